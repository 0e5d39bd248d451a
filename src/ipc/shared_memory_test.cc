#include "tessera/ipc/shared_memory.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace tessera::ipc {
namespace {

std::string UniqueName(const char* tag) {
  static std::atomic<int> counter{0};
  return "/tessera-test-" + std::string(tag) + "-" + std::to_string(getpid()) + "-" +
         std::to_string(counter++);
}

TEST(SharedMemoryRegionTest, CreateThenOpenSeeTheSameBytes) {
  std::string name = UniqueName("same");
  auto created = SharedMemoryRegion::Create(name, 4096);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)->size(), 4096u);
  EXPECT_EQ((*created)->name(), name);
  EXPECT_EQ((*created)->data()[100], std::byte{0});

  auto opened = SharedMemoryRegion::Open(name, 4096);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::memcpy((*opened)->data(), "hello", 5);
  EXPECT_EQ(std::memcmp((*created)->data(), "hello", 5), 0);
}

TEST(SharedMemoryRegionTest, NameWithoutSlashIsNormalised) {
  std::string name = UniqueName("slash").substr(1);
  auto created = SharedMemoryRegion::Create(name, 64);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)->name(), "/" + name);
  EXPECT_TRUE(SharedMemoryRegion::Open("/" + name, 64).ok());
}

TEST(SharedMemoryRegionTest, CreateRefusesAnExistingName) {
  std::string name = UniqueName("excl");
  auto first = SharedMemoryRegion::Create(name, 64);
  ASSERT_TRUE(first.ok());
  auto second = SharedMemoryRegion::Create(name, 64);
  EXPECT_TRUE(absl::IsAlreadyExists(second.status())) << second.status();
  EXPECT_NE(second.status().message().find(name), std::string::npos);
}

TEST(SharedMemoryRegionTest, OpenErrors) {
  std::string name = UniqueName("missing");
  auto missing = SharedMemoryRegion::Open(name, 64);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find(name), std::string::npos);

  auto created = SharedMemoryRegion::Create(name, 64);
  ASSERT_TRUE(created.ok());
  auto too_big = SharedMemoryRegion::Open(name, 4096);
  EXPECT_FALSE(too_big.ok());
  EXPECT_FALSE(SharedMemoryRegion::Create(UniqueName("zero"), 0).ok());
}

// A region larger than /dev/shm is refused when it is made, naming the fix, instead of mapping
// sparse pages that would kill the process with SIGBUS once /dev/shm ran out.
TEST(SharedMemoryRegionTest, RegionLargerThanDevShmIsRefusedAtCreation) {
  struct statvfs fs {};
  ASSERT_EQ(statvfs("/dev/shm", &fs), 0);
  const uint64_t total = fs.f_blocks * fs.f_frsize;
  const std::string name = UniqueName("huge");
  auto created = SharedMemoryRegion::Create(name, total + (1 << 20));
  ASSERT_FALSE(created.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(created.status())) << created.status();
  const std::string message(created.status().message());
  EXPECT_NE(message.find("/dev/shm: "), std::string::npos) << message;
  EXPECT_NE(message.find("--shm-size"), std::string::npos) << message;
  // Nothing is left behind under the name.
  EXPECT_TRUE(absl::IsNotFound(SharedMemoryRegion::Open(name, 64).status()));
}

// The pages of a created region are reserved at once (no sparse tmpfs file).
TEST(SharedMemoryRegionTest, CreatedRegionsHaveTheirPagesReserved) {
  const std::string name = UniqueName("reserved");
  constexpr size_t kBytes = 8 << 20;
  auto created = SharedMemoryRegion::Create(name, kBytes);
  ASSERT_TRUE(created.ok()) << created.status();
  struct stat st {};
  ASSERT_EQ(stat(("/dev/shm" + name).c_str(), &st), 0);
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, kBytes);
}

TEST(SharedMemoryRegionTest, CreatorUnlinksOnDestruction) {
  std::string name = UniqueName("unlink");
  {
    auto created = SharedMemoryRegion::Create(name, 64);
    ASSERT_TRUE(created.ok());
    auto opened = SharedMemoryRegion::Open(name, 64);
    ASSERT_TRUE(opened.ok());
    opened->reset();  // an opener leaves the name alone
    EXPECT_TRUE(SharedMemoryRegion::Open(name, 64).ok());
  }
  EXPECT_TRUE(absl::IsNotFound(SharedMemoryRegion::Open(name, 64).status()));
}

TEST(SharedMemoryRegionTest, UnlinkRemovesTheNameAndKeepsTheMapping) {
  std::string name = UniqueName("early");
  auto created = SharedMemoryRegion::Create(name, 64);
  ASSERT_TRUE(created.ok());
  auto opened = SharedMemoryRegion::Open(name, 64);
  ASSERT_TRUE(opened.ok());
  ASSERT_TRUE((*created)->Unlink().ok());
  EXPECT_TRUE((*created)->Unlink().ok());  // once is enough; again is no error
  EXPECT_TRUE(absl::IsNotFound(SharedMemoryRegion::Open(name, 64).status()));
  (*created)->data()[3] = std::byte{42};  // both mappings still share the bytes
  EXPECT_EQ((*opened)->data()[3], std::byte{42});
  EXPECT_FALSE((*opened)->Unlink().ok());  // not the opener's to remove
  // The name is free again: a new region may take it while the old one is still mapped.
  EXPECT_TRUE(SharedMemoryRegion::Create(name, 64).ok());
}

TEST(SharedMemoryRegionTest, ChildProcessWritesParentReads) {
  std::string name = UniqueName("fork");
  auto created = SharedMemoryRegion::Create(name, 1 << 20);
  ASSERT_TRUE(created.ok()) << created.status();

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: open by name, as tessera-executor does, and write a pattern across the whole region.
    auto opened = SharedMemoryRegion::Open(name, 1 << 20);
    if (!opened.ok()) _exit(1);
    for (size_t i = 0; i < (*opened)->size(); ++i) {
      (*opened)->data()[i] = static_cast<std::byte>(i * 7 + 3);
    }
    _exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  ASSERT_EQ(WEXITSTATUS(wstatus), 0);
  for (size_t i = 0; i < (*created)->size(); ++i) {
    ASSERT_EQ((*created)->data()[i], static_cast<std::byte>(i * 7 + 3)) << "byte " << i;
  }
}

}  // namespace
}  // namespace tessera::ipc
