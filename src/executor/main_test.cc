// The real tessera-executor binary with the real engine, driven the way tessera-server drives it.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
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
  release.mutable_release()->set_batch_id(11);
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

}  // namespace
}  // namespace tessera::ipc
