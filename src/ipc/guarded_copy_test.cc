#include "tessera/ipc/guarded_copy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::ipc {
namespace {

// A page-sized POSIX shared-memory object mapped here, which the test truncates under the
// mapping as a client may do to a region it registered.
class TruncatedObject {
 public:
  TruncatedObject() : name_("/tessera-guarded-copy-" + std::to_string(getpid())) {
    fd_ = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd_, 0);
    EXPECT_EQ(ftruncate(fd_, kBytes), 0);
    data_ = static_cast<char*>(mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0));
    EXPECT_NE(data_, MAP_FAILED);
    std::memset(data_, 7, kBytes);
  }
  ~TruncatedObject() {
    munmap(data_, kBytes);
    close(fd_);
    shm_unlink(name_.c_str());
  }
  void Truncate() { ASSERT_EQ(ftruncate(fd_, 0), 0); }
  char* data() { return data_; }

  static constexpr size_t kBytes = 1 << 16;

 private:
  std::string name_;
  int fd_ = -1;
  char* data_ = nullptr;
};

TEST(GuardedCopyTest, CopiesWhatIsThere) {
  TruncatedObject object;
  std::vector<char> out(TruncatedObject::kBytes);
  ASSERT_TRUE(CopyGuardingSigbus(out.data(), object.data(), out.size(), "input 'x'").ok());
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out.back(), 7);
}

TEST(GuardedCopyTest, ReadingATruncatedObjectIsAnErrorNotACrash) {
  TruncatedObject object;
  object.Truncate();
  std::vector<char> out(TruncatedObject::kBytes);
  for (int i = 0; i < 3; ++i) {  // again and again: the handler stays in place
    Status status = CopyGuardingSigbus(out.data(), object.data(), out.size(), "input 'x'");
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_NE(std::string(status.message()).find("input 'x': the shared memory under it is gone"),
              std::string::npos)
        << status;
  }
}

TEST(GuardedCopyTest, WritingATruncatedObjectIsAnErrorNotACrash) {
  TruncatedObject object;
  object.Truncate();
  std::vector<char> in(256, 1);
  Status status = CopyGuardingSigbus(object.data(), in.data(), in.size(), "output 'y'");
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
}

TEST(GuardedCopyTest, ASigbusOutsideAGuardedCopyStillEndsTheProcess) {
  TruncatedObject object;
  std::vector<char> out(16);
  ASSERT_TRUE(CopyGuardingSigbus(out.data(), object.data(), out.size(), "x").ok());  // installs
  object.Truncate();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    volatile char c = object.data()[0];  // unguarded
    (void)c;
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // Killed by SIGBUS; or, under a sanitizer, its handler (the one installed before ours, to which
  // ours passes the fault) reported it and exited non-zero. Never the access going on to _exit(0).
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGBUS);
  } else {
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_NE(WEXITSTATUS(status), 0) << "the unguarded access went on as if nothing happened";
  }
}

}  // namespace
}  // namespace tessera::ipc
