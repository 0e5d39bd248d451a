// The real tessera-executor binary with the real engine, driven the way tessera-server drives it.
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/common/data_type.h"
#include "tessera/ipc/control_channel.h"
#include "tessera/ipc/shared_memory.h"

namespace tessera::ipc {
namespace {

constexpr size_t kRingBytes = 1 << 20;

class ExecutorProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    std::string suffix = std::to_string(getpid()) + "-" + std::to_string(counter++);
    auto listener = ControlListener::Listen("/tmp/tessera-exec-main-test-" + suffix + ".sock");
    auto input = SharedMemoryRegion::Create("/tessera-exec-main-in-" + suffix, kRingBytes);
    auto output = SharedMemoryRegion::Create("/tessera-exec-main-out-" + suffix, kRingBytes);
    ASSERT_TRUE(listener.ok() && input.ok() && output.ok());
    listener_ = *std::move(listener);
    input_ = *std::move(input);
    output_ = *std::move(output);

    std::vector<std::string> args = {TESSERA_EXECUTOR_BINARY,
                                     "--executor-id",
                                     "5",
                                     "--control-socket",
                                     listener_->path(),
                                     "--input-shm",
                                     input_->name(),
                                     "--input-bytes",
                                     std::to_string(kRingBytes),
                                     "--output-shm",
                                     output_->name(),
                                     "--output-bytes",
                                     std::to_string(kRingBytes),
                                     "--device",
                                     "cpu",
                                     "--threads",
                                     "2"};
    for (const std::string& arg : ExtraArgs()) args.push_back(arg);
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    auto channel = listener_->Accept(10000);
    ASSERT_TRUE(channel.ok()) << channel.status();
    channel_ = *std::move(channel);
    auto hello = Next();
    ASSERT_TRUE(hello.has_value() && hello->has_hello());
    EXPECT_EQ(hello->hello().protocol_version(), PROTOCOL_VERSION_CURRENT);
    EXPECT_EQ(hello->hello().executor_id(), 5);
    EXPECT_EQ(hello->hello().pid(), pid_);
  }

  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Added to the executor's command line by fixtures that test a flag.
  virtual std::vector<std::string> ExtraArgs() const { return {}; }

  std::optional<ControlMessage> Next(int timeout_ms = 10000) {
    pollfd pfd{channel_->fd(), POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) return std::nullopt;
    ControlMessage message;
    if (!channel_->Receive(&message).ok()) return std::nullopt;
    return message;
  }

  // Exit status of the executor, or -1 if it did not exit within `timeout`.
  int WaitExit(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int wstatus = 0;
      if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  ControlMessage MlpLoad(int64_t input_dim) {
    ControlMessage message;
    LoadModel* load = message.mutable_load();
    load->set_instance_key("mlp/1");
    load->set_model_name("mlp");
    load->set_version(1);
    load->set_model_path(std::string(TESSERA_SOURCE_DIR) + "/configs/models/mlp/1/model.onnx");
    load->set_max_batch_size(8);
    TensorSpec* in = load->add_inputs();
    in->set_name("input");
    in->set_data_type(static_cast<int>(DataType::kFp32));
    in->add_dims(input_dim);
    TensorSpec* out = load->add_outputs();
    out->set_name("output");
    out->set_data_type(static_cast<int>(DataType::kFp32));
    out->add_dims(10);
    return message;
  }

  std::unique_ptr<ControlListener> listener_;
  std::unique_ptr<SharedMemoryRegion> input_;
  std::unique_ptr<SharedMemoryRegion> output_;
  std::unique_ptr<ControlChannel> channel_;
  pid_t pid_ = -1;
};

TEST_F(ExecutorProcessTest, LoadsAndRunsTheMlpThenShutsDown) {
  ASSERT_TRUE(channel_->Send(MlpLoad(64)).ok());
  auto loaded = Next();
  ASSERT_TRUE(loaded.has_value() && loaded->has_load_result());
  ASSERT_TRUE(loaded->load_result().ok()) << loaded->load_result().error();
  EXPECT_GT(loaded->load_result().weight_bytes(), 0u);

  // Two rows; row 1 equals row 0, so both output rows must be equal too.
  std::vector<float> x(2 * 64);
  for (int i = 0; i < 64; ++i) x[i] = x[64 + i] = std::sin(0.1f * i);
  std::memcpy(input_->data() + 4096, x.data(), x.size() * sizeof(float));
  ControlMessage infer;
  infer.mutable_infer()->set_batch_id(11);
  infer.mutable_infer()->set_instance_key("mlp/1");
  BatchTensor* in = infer.mutable_infer()->add_inputs();
  in->set_name("input");
  in->set_data_type(static_cast<int>(DataType::kFp32));
  in->add_shape(2);
  in->add_shape(64);
  in->set_offset(4096);
  in->set_byte_size(x.size() * sizeof(float));
  ASSERT_TRUE(channel_->Send(infer).ok());

  auto result = Next();
  ASSERT_TRUE(result.has_value() && result->has_result());
  ASSERT_TRUE(result->result().ok()) << result->result().error();
  ASSERT_EQ(result->result().outputs_size(), 1);
  const BatchTensor& out = result->result().outputs(0);
  EXPECT_EQ(out.name(), "output");
  ASSERT_EQ(out.shape_size(), 2);
  EXPECT_EQ(out.shape(0), 2);
  EXPECT_EQ(out.shape(1), 10);
  ASSERT_EQ(out.byte_size(), 2 * 10 * sizeof(float));
  std::vector<float> y(20);
  std::memcpy(y.data(), output_->data() + out.offset(), out.byte_size());
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(std::isfinite(y[i]));
    EXPECT_EQ(y[i], y[10 + i]);
  }
  ControlMessage release;
  release.mutable_release()->add_batch_ids(11);
  ASSERT_TRUE(channel_->Send(release).ok());

  ControlMessage shutdown;
  shutdown.mutable_shutdown();
  ASSERT_TRUE(channel_->Send(shutdown).ok());
  EXPECT_EQ(WaitExit(std::chrono::seconds(10)), 0);
}

TEST_F(ExecutorProcessTest, ConfigMismatchAndMissingFileAreLoadErrors) {
  ASSERT_TRUE(channel_->Send(MlpLoad(63)).ok());
  auto mismatch = Next();
  ASSERT_TRUE(mismatch.has_value() && mismatch->has_load_result());
  EXPECT_FALSE(mismatch->load_result().ok());
  EXPECT_NE(mismatch->load_result().error().find("'input'"), std::string::npos)
      << mismatch->load_result().error();

  ControlMessage missing = MlpLoad(64);
  missing.mutable_load()->set_model_path("/nonexistent/model.onnx");
  ASSERT_TRUE(channel_->Send(missing).ok());
  auto failed = Next();
  ASSERT_TRUE(failed.has_value() && failed->has_load_result());
  EXPECT_FALSE(failed->load_result().ok());
  EXPECT_NE(failed->load_result().error().find("/nonexistent/model.onnx"), std::string::npos);
}

TEST_F(ExecutorProcessTest, ExitsWhenTheServerCloses) {
  channel_.reset();
  EXPECT_EQ(WaitExit(std::chrono::seconds(10)), 0);
}

// The first core this test may use (core 0 on an unrestricted machine).
int FirstAllowedCpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) return i;
  }
  return 0;
}

// A CPU partition: `--cpus N` must pin the executor (and so its engine threads) to core N.
class PinnedExecutorProcessTest : public ExecutorProcessTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--cpus", std::to_string(FirstAllowedCpu())};
  }
};

// The kernel's view of a thread's allowed cores, e.g. "0" or "0-1".
std::string CpusAllowedList(const std::string& status_path) {
  std::ifstream in(status_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      std::string value = line.substr(line.find(':') + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "";
}

TEST_F(PinnedExecutorProcessTest, CpusPinsTheProcessAndItsThreads) {
  // After Hello the executor runs; a loaded model has started the engine's threads too.
  ASSERT_TRUE(channel_->Send(MlpLoad(64)).ok());
  auto loaded = Next();
  ASSERT_TRUE(loaded.has_value() && loaded->has_load_result());
  ASSERT_TRUE(loaded->load_result().ok()) << loaded->load_result().error();
  const std::string proc = "/proc/" + std::to_string(pid_);
  const std::string core = std::to_string(FirstAllowedCpu());
  EXPECT_EQ(CpusAllowedList(proc + "/status"), core);
  int threads = 0;
  for (const auto& task : std::filesystem::directory_iterator(proc + "/task")) {
    EXPECT_EQ(CpusAllowedList(task.path().string() + "/status"), core) << task.path();
    ++threads;
  }
  EXPECT_GE(threads, 1);
}

// A bad --cpus list is a clear error exit before the executor connects anywhere.
TEST(ExecutorFlagsTest, BadCpuListAndGreenWithoutGpuExitWithAnError) {
  for (std::vector<std::string> extra :
       {std::vector<std::string>{"--cpus", "0-x"}, std::vector<std::string>{"--cpus", "1000"},
        std::vector<std::string>{"--green-sms", "8"},
        std::vector<std::string>{"--device", "cuda:0", "--green-sms", "8"}}) {
    std::vector<std::string> args = {TESSERA_EXECUTOR_BINARY, "--executor-id", "1",
                                     "--control-socket", "/nonexistent/tessera.sock",
                                     "--input-shm", "/tessera-none-in", "--input-bytes", "4096",
                                     "--output-shm", "/tessera-none-out", "--output-bytes", "4096"};
    args.insert(args.end(), extra.begin(), extra.end());
    int err[2];
    ASSERT_EQ(pipe(err), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      dup2(err[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(err[1]);
    std::string output;
    char buf[512];
    for (ssize_t n; (n = read(err[0], buf, sizeof(buf))) > 0;) output.append(buf, n);
    close(err[0]);
    int wstatus = 0;
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFEXITED(wstatus));
    EXPECT_EQ(WEXITSTATUS(wstatus), 1) << output;
    if (extra[1] == "0-x") {
      EXPECT_NE(output.find("bad CPU list"), std::string::npos) << output;
    }
    if (extra[1] == "1000") {
      EXPECT_NE(output.find("cannot pin"), std::string::npos) << output;
    }
    if (extra[0] == "--green-sms") {
      EXPECT_NE(output.find("--green-sms needs --device cuda:N"), std::string::npos) << output;
    }
    if (extra[0] == "--device") {
      // Without a driver: a clear error. With one, the green context is made and the executor
      // fails later (no control socket), still with status 1.
      EXPECT_TRUE(output.find("--green-sms 8: UNAVAILABLE") != std::string::npos ||
                  output.find("green context of") != std::string::npos)
          << output;
    }
  }
}

}  // namespace
}  // namespace tessera::ipc
