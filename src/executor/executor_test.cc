#include "executor/executor.h"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "executor/fake_engine_model_for_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::executor {
namespace {

using ::testing::HasSubstr;

std::string UniqueSuffix() {
  static std::atomic<int> counter{0};
  return std::to_string(getpid()) + "-" + std::to_string(counter++);
}

// Records which thread ran each batch of an instance.
class RunThreads {
 public:
  std::function<Status()> Hook() {
    return [this]() -> Status {
      absl::MutexLock lock(&mu_);
      threads_.push_back(std::this_thread::get_id());
      return absl::OkStatus();
    };
  }
  std::vector<std::thread::id> threads() {
    absl::MutexLock lock(&mu_);
    return threads_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

// Plays the server: owns the rings and the listening socket, drives an in-process Executor running
// on its own thread through a real Unix socket and real shared memory.
class ExecutorTest : public ::testing::Test {
 protected:
  void Start(size_t input_bytes = 1 << 16, size_t output_bytes = 1 << 16,
             int64_t output_wait_timeout_ms = 10000, uint64_t inline_run_max_ns = 0) {
    std::string suffix = UniqueSuffix();
    auto listener = ipc::ControlListener::Listen("/tmp/tessera-executor-test-" + suffix + ".sock");
    ASSERT_TRUE(listener.ok()) << listener.status();
    auto input = ipc::SharedMemoryRegion::Create("/tessera-exec-test-in-" + suffix, input_bytes);
    auto output = ipc::SharedMemoryRegion::Create("/tessera-exec-test-out-" + suffix, output_bytes);
    ASSERT_TRUE(input.ok() && output.ok());
    input_ = *std::move(input);
    output_ = *std::move(output);

    // The executor's side, as tessera-executor would open it.
    auto exec_input = ipc::SharedMemoryRegion::Open(input_->name(), input_bytes);
    auto exec_output = ipc::SharedMemoryRegion::Open(output_->name(), output_bytes);
    auto exec_channel = ipc::ControlChannel::Connect((*listener)->path());
    ASSERT_TRUE(exec_input.ok() && exec_output.ok() && exec_channel.ok());
    auto server = (*listener)->Accept(5000);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);

    ExecutorOptions options;
    options.executor_id = 3;
    options.output_wait_timeout_ms = output_wait_timeout_ms;
    options.inline_run_max_ns = inline_run_max_ns;
    options.loader =
        [this](const ipc::LoadModel& request,
               const engine::WeightImport* shared) -> StatusOr<std::unique_ptr<engine::Model>> {
      if (request.model_path() == "/models/missing.onnx") {
        return absl::NotFoundError("cannot open /models/missing.onnx");
      }
      FakeEngineModelForTest::Options fake;
      absl::MutexLock lock(&hooks_mu_);
      if (auto it = run_hooks_.find(request.instance_key()); it != run_hooks_.end()) {
        fake.on_run = it->second;
      }
      fake.weights = "weights of " + request.model_path();
      return std::make_unique<FakeEngineModelForTest>(fake, shared);
    };
    auto executor = Executor::Create(std::move(options), *std::move(exec_channel),
                                     *std::move(exec_input), *std::move(exec_output));
    ASSERT_TRUE(executor.ok()) << executor.status();
    executor_ = *std::move(executor);
    runner_ = std::thread([this] { run_status_ = executor_->Run(); });

    auto hello = Next();
    ASSERT_TRUE(hello.has_value());
    ASSERT_TRUE(hello->has_hello());
    EXPECT_EQ(hello->hello().protocol_version(), ipc::PROTOCOL_VERSION_CURRENT);
    EXPECT_EQ(hello->hello().executor_id(), 3);
    EXPECT_EQ(hello->hello().pid(), getpid());
    EXPECT_EQ(hello->hello().device(), "cpu");
  }

  void TearDown() override {
    if (runner_.joinable()) {
      ipc::ControlMessage shutdown;
      shutdown.mutable_shutdown();
      (void)server_->Send(shutdown);
      runner_.join();
    }
  }

  void SetRunHook(const std::string& key, std::function<Status()> hook) {
    absl::MutexLock lock(&hooks_mu_);
    run_hooks_[key] = std::move(hook);
  }

  // The next message from the executor, or nullopt if none arrives within `timeout_ms`.
  std::optional<ipc::ControlMessage> Next(int timeout_ms = 5000) {
    pollfd pfd{server_->fd(), POLLIN, 0};
    // Frames already read ahead by an earlier Receive are not on the socket any more.
    if (!server_->HasBufferedFrame() && poll(&pfd, 1, timeout_ms) <= 0) return std::nullopt;
    ipc::ControlMessage message;
    Status status = server_->Receive(&message);
    if (!status.ok()) return std::nullopt;
    return message;
  }

  void Send(const ipc::ControlMessage& message) { ASSERT_TRUE(server_->Send(message).ok()); }

  ipc::LoadResult Load(const std::string& key, const std::string& path = "/models/fake.onnx",
                       int64_t x_dim = 4) {
    Send(LoadMessage(key, path, x_dim));
    return NextLoadResult(key);
  }

  ipc::LoadResult NextLoadResult(const std::string& key) {
    auto reply = Next();
    if (!reply.has_value() || !reply->has_load_result()) {
      ADD_FAILURE() << "no LoadResult for " << key;
      return {};
    }
    EXPECT_EQ(reply->load_result().instance_key(), key);
    return reply->load_result();
  }

  static ipc::ControlMessage LoadMessage(const std::string& key,
                                         const std::string& path = "/models/fake.onnx",
                                         int64_t x_dim = 4) {
    ipc::ControlMessage message;
    ipc::LoadModel* load = message.mutable_load();
    load->set_instance_key(key);
    load->set_model_name(key.substr(0, key.find('/')));
    load->set_version(1);
    load->set_model_path(path);
    load->set_max_batch_size(8);
    ipc::TensorSpec* x = load->add_inputs();
    x->set_name("x");
    x->set_data_type(static_cast<int>(DataType::kFp32));
    x->add_dims(x_dim);
    return message;
  }

  // Writes `rows` x 4 floats (value = base + index) at `offset` of the input ring.
  void WriteInput(uint64_t offset, int rows, float base) {
    std::vector<float> values(rows * 4);
    for (size_t i = 0; i < values.size(); ++i) values[i] = base + static_cast<float>(i);
    std::memcpy(input_->data() + offset, values.data(), values.size() * sizeof(float));
  }

  ipc::ControlMessage InferMessage(uint64_t batch_id, const std::string& key, uint64_t offset,
                                   int rows, std::vector<std::string> outputs = {}) {
    ipc::ControlMessage message;
    ipc::InferBatch* infer = message.mutable_infer();
    infer->set_batch_id(batch_id);
    infer->set_instance_key(key);
    ipc::BatchTensor* x = infer->add_inputs();
    x->set_name("x");
    x->set_data_type(static_cast<int>(DataType::kFp32));
    x->add_shape(rows);
    x->add_shape(4);
    x->set_offset(offset);
    x->set_byte_size(rows * 4 * sizeof(float));
    for (auto& name : outputs) infer->add_outputs(name);
    return message;
  }

  ipc::BatchResult Infer(const ipc::ControlMessage& message) {
    Send(message);
    auto reply = Next();
    if (!reply.has_value() || !reply->has_result()) {
      ADD_FAILURE() << "no BatchResult for batch " << message.infer().batch_id();
      return {};
    }
    EXPECT_EQ(reply->result().batch_id(), message.infer().batch_id());
    return reply->result();
  }

  std::vector<float> ReadOutput(const ipc::BatchTensor& t) {
    std::vector<float> values(t.byte_size() / sizeof(float));
    std::memcpy(values.data(), output_->data() + t.offset(), t.byte_size());
    return values;
  }

  void Release(uint64_t batch_id) {
    ipc::ControlMessage message;
    message.mutable_release()->add_batch_ids(batch_id);
    Send(message);
  }

  // Runs one-row batches of "fake/1" (output "y"), one at a time from *next_id on, until one runs
  // on the receive thread; returns its id (its output still held), or 0 after 200 tries. A worker
  // marks itself idle only once its result went out, so the batch right after one of its own may
  // still find it busy. Batches that ran on the worker are released.
  uint64_t InferUntilInline(RunThreads& ran, uint64_t* next_id) {
    for (int attempt = 0; attempt < 200; ++attempt) {
      const uint64_t id = (*next_id)++;
      ipc::BatchResult r = Infer(InferMessage(id, "fake/1", 0, 1, {"y"}));
      if (!r.ok()) {
        ADD_FAILURE() << "batch " << id << ": " << r.error();
        return 0;
      }
      if (ran.threads().back() == runner_.get_id()) return id;
      Release(id);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ADD_FAILURE() << "no batch ran on the receive thread";
    return 0;
  }

  std::unique_ptr<ipc::SharedMemoryRegion> input_;
  std::unique_ptr<ipc::SharedMemoryRegion> output_;
  std::unique_ptr<ipc::ControlChannel> server_;
  std::unique_ptr<Executor> executor_;
  std::thread runner_;
  Status run_status_;
  absl::Mutex hooks_mu_;
  std::map<std::string, std::function<Status()>> run_hooks_ ABSL_GUARDED_BY(hooks_mu_);
};

TEST_F(ExecutorTest, LoadInferReleaseRoundTrip) {
  Start();
  ipc::LoadResult load = Load("fake/1");
  ASSERT_TRUE(load.ok()) << load.error();
  EXPECT_EQ(load.weight_bytes(), 1234u);

  WriteInput(512, 2, 10.0f);
  ipc::BatchResult result = Infer(InferMessage(1, "fake/1", 512, 2));
  ASSERT_TRUE(result.ok()) << result.error();
  ASSERT_EQ(result.outputs_size(), 2);  // no names requested: every output
  const ipc::BatchTensor& y = result.outputs(0);
  EXPECT_EQ(y.name(), "y");
  EXPECT_EQ(y.data_type(), static_cast<int>(DataType::kFp32));
  EXPECT_EQ(std::vector<int64_t>(y.shape().begin(), y.shape().end()), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(y.byte_size(), 32u);
  EXPECT_EQ(y.offset() % 256, 0u);
  std::vector<float> y_values = ReadOutput(y);
  std::vector<float> z_values = ReadOutput(result.outputs(1));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(y_values[i], 10.0f + i + 1.0f);
    EXPECT_EQ(z_values[i], 2.0f * (10.0f + i));
  }
  EXPECT_GT(result.compute_infer_ns(), 0u);
  Release(1);

  // Only the requested output comes back.
  WriteInput(0, 1, -1.0f);
  result = Infer(InferMessage(2, "fake/1", 0, 1, {"z"}));
  ASSERT_TRUE(result.ok()) << result.error();
  ASSERT_EQ(result.outputs_size(), 1);
  EXPECT_EQ(result.outputs(0).name(), "z");
  EXPECT_EQ(ReadOutput(result.outputs(0))[0], -2.0f);
  Release(2);

  ipc::ControlMessage shutdown;
  shutdown.mutable_shutdown();
  Send(shutdown);
  runner_.join();
  EXPECT_TRUE(run_status_.ok()) << run_status_;
}

TEST_F(ExecutorTest, ExportedWeightsComeWithTheirDescriptorAndASecondLoadMapsThem) {
  Start();
  ASSERT_TRUE(Load("fake/1").ok());
  ipc::ControlMessage request;
  request.mutable_export_weights()->set_request_id(7);
  request.mutable_export_weights()->set_instance_key("fake/1");
  Send(request);
  auto reply = Next();
  ASSERT_TRUE(reply.has_value() && reply->has_weights_export());
  const ipc::WeightsExport exported = reply->weights_export();
  EXPECT_EQ(exported.request_id(), 7u);
  ASSERT_TRUE(exported.ok()) << exported.error();
  UniqueFd fd = server_->TakeReceivedFd();
  ASSERT_TRUE(fd.valid());
  std::string bytes(exported.bytes(), '\0');
  ASSERT_EQ(pread(fd.get(), bytes.data(), bytes.size(), 0), ssize_t(bytes.size()));
  EXPECT_EQ(bytes, "weights of /models/fake.onnx");

  auto with_weights = [&](const std::string& key, const std::string& path) {
    ipc::ControlMessage load = LoadMessage(key, path);
    ipc::SharedWeights* shared = load.mutable_load()->mutable_shared_weights();
    shared->set_bytes(exported.bytes());
    shared->set_layout(exported.layout());
    shared->set_source("executor 3 (instance fake/1)");
    return load;
  };
  // The same model again (a shadow): mapped.
  ASSERT_TRUE(server_->SendWithFd(with_weights("fake/2", "/models/fake.onnx"), fd.get()).ok());
  ipc::LoadResult shadow = NextLoadResult("fake/2");
  ASSERT_TRUE(shadow.ok()) << shadow.error();
  EXPECT_TRUE(shadow.weights_shared()) << shadow.weights_not_shared();
  // Another model of the same size: loads its own copy, and says why.
  ASSERT_TRUE(server_->SendWithFd(with_weights("fake/3", "/models/fak3.onnx"), fd.get()).ok());
  ipc::LoadResult other = NextLoadResult("fake/3");
  ASSERT_TRUE(other.ok()) << other.error();
  EXPECT_FALSE(other.weights_shared());
  EXPECT_THAT(other.weights_not_shared(), HasSubstr("not this model's weights"));
  // Shared weights named, but the frame carried no descriptor.
  Send(with_weights("fake/4", "/models/fake.onnx"));
  ipc::LoadResult no_fd = NextLoadResult("fake/4");
  ASSERT_TRUE(no_fd.ok()) << no_fd.error();
  EXPECT_FALSE(no_fd.weights_shared());
  EXPECT_THAT(no_fd.weights_not_shared(), HasSubstr("no descriptor"));
  // A plain load says nothing about sharing.
  ipc::LoadResult plain = Load("fake/5");
  EXPECT_FALSE(plain.weights_shared());
  EXPECT_TRUE(plain.weights_not_shared().empty());

  WriteInput(0, 1, 1.0f);
  EXPECT_TRUE(Infer(InferMessage(1, "fake/2", 0, 1, {"y"})).ok());
}

TEST_F(ExecutorTest, ExportOfAnUnknownInstanceSaysWhichAndPassesNoDescriptor) {
  Start();
  ipc::ControlMessage request;
  request.mutable_export_weights()->set_request_id(9);
  request.mutable_export_weights()->set_instance_key("nope/1");
  Send(request);
  auto reply = Next();
  ASSERT_TRUE(reply.has_value() && reply->has_weights_export());
  EXPECT_EQ(reply->weights_export().request_id(), 9u);
  EXPECT_FALSE(reply->weights_export().ok());
  EXPECT_THAT(reply->weights_export().error(), HasSubstr("no loaded instance nope/1"));
  EXPECT_FALSE(server_->TakeReceivedFd().valid());
}

TEST_F(ExecutorTest, BadInputsAreErrorResultsAndTheExecutorKeepsServing) {
  Start(/*input_bytes=*/4096);
  ASSERT_TRUE(Load("fake/1").ok());

  ipc::BatchResult r = Infer(InferMessage(1, "fake/1", /*offset=*/4096 - 16, 2));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("outside the input ring"), std::string::npos) << r.error();

  ipc::ControlMessage huge_offset = InferMessage(2, "fake/1", UINT64_MAX - 8, 2);
  r = Infer(huge_offset);
  EXPECT_FALSE(r.ok());

  ipc::ControlMessage wrong_size = InferMessage(3, "fake/1", 0, 2);
  wrong_size.mutable_infer()->mutable_inputs(0)->set_byte_size(31);
  r = Infer(wrong_size);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("byte_size 31"), std::string::npos) << r.error();

  ipc::ControlMessage negative_dim = InferMessage(4, "fake/1", 0, 2);
  negative_dim.mutable_infer()->mutable_inputs(0)->set_shape(0, -2);
  EXPECT_FALSE(Infer(negative_dim).ok());

  // BYTES: serialized elements whose count must match the shape ([2, 4] needs 8), whatever
  // their size; the bytes are read only once they are known to lie in the ring.
  const char three_strings[] = "\x01\0\0\0a\x02\0\0\0bc\0\0\0\0";
  std::memcpy(input_->data() + 1024, three_strings, sizeof(three_strings) - 1);
  ipc::ControlMessage few_strings = InferMessage(5, "fake/1", 1024, 2);
  few_strings.mutable_infer()->mutable_inputs(0)->set_data_type(
      static_cast<int>(DataType::kString));
  few_strings.mutable_infer()->mutable_inputs(0)->set_byte_size(sizeof(three_strings) - 1);
  r = Infer(few_strings);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("input 'x': 15 bytes of BYTES data hold 3 elements, the shape needs 8"),
            std::string::npos)
      << r.error();
  few_strings.mutable_infer()->mutable_inputs(0)->set_byte_size(14);  // cuts the last prefix
  r = Infer(few_strings);
  EXPECT_NE(r.error().find("its 4-byte length is cut off"), std::string::npos) << r.error();
  few_strings.mutable_infer()->mutable_inputs(0)->set_offset(4096 - 4);  // runs past the ring
  r = Infer(few_strings);
  EXPECT_NE(r.error().find("outside the input ring"), std::string::npos) << r.error();

  r = Infer(InferMessage(6, "fake/1", 0, 2, {"nope"}));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("'nope'"), std::string::npos) << r.error();

  WriteInput(256, 1, 0.0f);
  r = Infer(InferMessage(7, "fake/1", 256, 1));
  EXPECT_TRUE(r.ok()) << r.error();
}

TEST_F(ExecutorTest, UnknownInstanceIsAnErrorResult) {
  Start();
  ipc::BatchResult r = Infer(InferMessage(9, "ghost/1", 0, 1));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("ghost/1"), std::string::npos) << r.error();
}

TEST_F(ExecutorTest, LoadErrorsAreReported) {
  Start();
  ipc::LoadResult missing = Load("missing/1", "/models/missing.onnx");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("missing.onnx"), std::string::npos) << missing.error();

  ipc::LoadResult mismatch = Load("wrong/1", "/models/fake.onnx", /*x_dim=*/5);
  EXPECT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.error().find("'x'"), std::string::npos) << mismatch.error();
  EXPECT_NE(mismatch.error().find("[5]"), std::string::npos) << mismatch.error();

  ASSERT_TRUE(Load("fake/1").ok());
  ipc::LoadResult again = Load("fake/1");
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.error().find("already"), std::string::npos) << again.error();

  // A failed load leaves nothing behind: the same key can be loaded later.
  EXPECT_FALSE(Infer(InferMessage(1, "wrong/1", 0, 1)).ok());
}

TEST_F(ExecutorTest, EngineErrorIsReportedAndTheModelStaysUsable) {
  std::atomic<int> calls{0};
  SetRunHook("flaky/1", [&calls]() -> Status {
    return calls++ == 0 ? absl::InternalError("kernel exploded in node Add_3") : absl::OkStatus();
  });
  Start();
  ASSERT_TRUE(Load("flaky/1").ok());
  ipc::BatchResult r = Infer(InferMessage(1, "flaky/1", 0, 1));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("Add_3"), std::string::npos) << r.error();
  r = Infer(InferMessage(2, "flaky/1", 0, 1));
  EXPECT_TRUE(r.ok()) << r.error();
}

TEST_F(ExecutorTest, OutputRingPressureIsRelievedByReleaseOutputs) {
  // Room for exactly two 256-byte output ranges.
  Start(1 << 16, /*output_bytes=*/512);
  ASSERT_TRUE(Load("fake/1").ok());
  ASSERT_TRUE(Infer(InferMessage(1, "fake/1", 0, 1, {"y"})).ok());
  ASSERT_TRUE(Infer(InferMessage(2, "fake/1", 0, 1, {"y"})).ok());

  Send(InferMessage(3, "fake/1", 0, 1, {"y"}));
  EXPECT_FALSE(Next(300).has_value()) << "batch 3 should wait for output space";
  Release(1);
  auto reply = Next();
  ASSERT_TRUE(reply.has_value() && reply->has_result());
  EXPECT_EQ(reply->result().batch_id(), 3u);
  EXPECT_TRUE(reply->result().ok()) << reply->result().error();
  EXPECT_EQ(reply->result().outputs(0).offset(), 0u);  // batch 1's range, reused
}

TEST_F(ExecutorTest, OutputRingFullPastTheTimeoutIsAnError) {
  Start(1 << 16, /*output_bytes=*/512, /*output_wait_timeout_ms=*/150);
  ASSERT_TRUE(Load("fake/1").ok());
  ASSERT_TRUE(Infer(InferMessage(1, "fake/1", 0, 1)).ok());  // y and z fill the ring
  ipc::BatchResult r = Infer(InferMessage(2, "fake/1", 0, 1));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("output ring full"), std::string::npos) << r.error();
  // Once space is back, batches succeed again.
  Release(1);
  EXPECT_TRUE(Infer(InferMessage(3, "fake/1", 0, 1)).ok());
}

TEST_F(ExecutorTest, OutputsLargerThanTheRingFailAtOnce) {
  Start(1 << 16, /*output_bytes=*/256, /*output_wait_timeout_ms=*/60000);
  ASSERT_TRUE(Load("fake/1").ok());
  ipc::BatchResult r = Infer(InferMessage(1, "fake/1", 0, 1));  // two ranges, one fits
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("output ring holds 256"), std::string::npos) << r.error();
}

TEST_F(ExecutorTest, ASlowModelDoesNotBlockOtherInstances) {
  absl::Notification gate;
  absl::Notification slow_running;
  SetRunHook("slow/1", [&]() -> Status {
    slow_running.Notify();
    gate.WaitForNotification();
    return absl::OkStatus();
  });
  Start();
  ASSERT_TRUE(Load("slow/1").ok());
  Send(InferMessage(1, "slow/1", 0, 1));
  ASSERT_TRUE(slow_running.WaitForNotificationWithTimeout(absl::Seconds(5)));

  // Loading and serving another instance proceed while slow/1 is stuck in Run().
  ASSERT_TRUE(Load("fast/1").ok());
  ipc::BatchResult fast = Infer(InferMessage(2, "fast/1", 0, 1));
  EXPECT_TRUE(fast.ok()) << fast.error();

  // Unloading slow/1 waits for its running batch, which still completes.
  ipc::ControlMessage unload;
  unload.mutable_unload()->set_instance_key("slow/1");
  Send(unload);
  EXPECT_FALSE(Infer(InferMessage(3, "slow/1", 0, 1)).ok());  // unknown from now on
  gate.Notify();
  auto reply = Next();
  ASSERT_TRUE(reply.has_value() && reply->has_result());
  EXPECT_EQ(reply->result().batch_id(), 1u);
  EXPECT_TRUE(reply->result().ok()) << reply->result().error();

  // The key is free again.
  EXPECT_TRUE(Load("slow/1").ok());
}

TEST_F(ExecutorTest, ShortBatchesRunOnTheReceiveThreadOnceOneRanOnTheWorker) {
  RunThreads ran;
  SetRunHook("fake/1", ran.Hook());
  Start(1 << 16, 1 << 16, 10000, /*inline_run_max_ns=*/1'000'000'000);
  ASSERT_TRUE(Load("fake/1").ok());
  ASSERT_TRUE(Infer(InferMessage(1, "fake/1", 0, 1, {"y"})).ok());
  ASSERT_EQ(ran.threads().size(), 1u);
  EXPECT_NE(ran.threads()[0], runner_.get_id()) << "the first batch's run time is unknown: worker";
  Release(1);
  uint64_t next_id = 2;
  const uint64_t first_inline = InferUntilInline(ran, &next_id);
  ASSERT_NE(first_inline, 0u);
  Release(first_inline);

  // From then on every short batch runs there, the receive thread being idle when it answers.
  const size_t runs_before = ran.threads().size();
  for (uint64_t id = next_id; id < next_id + 4; ++id) {
    WriteInput(0, 2, static_cast<float>(id));
    ipc::BatchResult r = Infer(InferMessage(id, "fake/1", 0, 2, {"y"}));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(ReadOutput(r.outputs(0))[7], static_cast<float>(id) + 7.0f + 1.0f);
    Release(id);
  }
  std::vector<std::thread::id> threads = ran.threads();
  ASSERT_EQ(threads.size(), runs_before + 4);
  for (size_t i = runs_before; i < threads.size(); ++i) {
    EXPECT_EQ(threads[i], runner_.get_id()) << i;
  }
}

TEST_F(ExecutorTest, BatchesSlowerThanTheInlineLimitStayOnTheWorker) {
  RunThreads ran;
  SetRunHook("fake/1", ran.Hook());
  Start(1 << 16, 1 << 16, 10000, /*inline_run_max_ns=*/1);  // every run takes longer than 1 ns
  ASSERT_TRUE(Load("fake/1").ok());
  for (uint64_t id = 1; id <= 3; ++id) {
    ASSERT_TRUE(Infer(InferMessage(id, "fake/1", 0, 1)).ok());
    Release(id);
  }
  for (std::thread::id thread : ran.threads()) EXPECT_NE(thread, runner_.get_id());
}

TEST_F(ExecutorTest, InlineBatchWithoutOutputSpaceWaitsOnTheWorkerForReleaseOutputs) {
  RunThreads ran;
  SetRunHook("fake/1", ran.Hook());
  // Room for exactly two 256-byte output ranges.
  Start(1 << 16, /*output_bytes=*/512, 10000, /*inline_run_max_ns=*/1'000'000'000);
  ASSERT_TRUE(Load("fake/1").ok());
  ipc::BatchResult first = Infer(InferMessage(1, "fake/1", 0, 1, {"y"}));  // on the worker
  ASSERT_TRUE(first.ok()) << first.error();
  const uint64_t held_range = first.outputs(0).offset();
  uint64_t next_id = 2;
  const uint64_t inline_id = InferUntilInline(ran, &next_id);  // holds the other range
  ASSERT_NE(inline_id, 0u);

  // The next batch finds no space: the receive thread must not wait for it (the ReleaseOutputs
  // that frees it arrives on that thread), so the worker takes the batch over.
  const uint64_t blocked_id = next_id++;
  Send(InferMessage(blocked_id, "fake/1", 0, 1, {"y"}));
  EXPECT_FALSE(Next(300).has_value()) << "the batch should wait for output space";
  Release(1);
  auto reply = Next();
  ASSERT_TRUE(reply.has_value() && reply->has_result());
  EXPECT_EQ(reply->result().batch_id(), blocked_id);
  EXPECT_TRUE(reply->result().ok()) << reply->result().error();
  EXPECT_EQ(reply->result().outputs(0).offset(), held_range);  // batch 1's range, reused
  EXPECT_NE(ran.threads().back(), runner_.get_id());

  // And the receive thread runs short batches again.
  Release(inline_id);
  Release(blocked_id);
  EXPECT_NE(InferUntilInline(ran, &next_id), 0u);
}

TEST_F(ExecutorTest, ABurstOfInlineBatchesIsAnsweredInOrder) {
  Start(1 << 16, 1 << 16, 10000, /*inline_run_max_ns=*/1'000'000'000);
  ASSERT_TRUE(Load("fake/1").ok());
  ASSERT_TRUE(Infer(InferMessage(1, "fake/1", 0, 1, {"y"})).ok());
  Release(1);
  std::vector<ipc::ControlMessage> burst;
  for (uint64_t id = 2; id <= 9; ++id) {
    WriteInput(id * 64, 1, static_cast<float>(id));
    burst.push_back(InferMessage(id, "fake/1", id * 64, 1, {"y"}));
  }
  ASSERT_TRUE(server_->SendAll(burst).ok());
  for (uint64_t id = 2; id <= 9; ++id) {
    auto reply = Next();
    ASSERT_TRUE(reply.has_value() && reply->has_result()) << id;
    EXPECT_EQ(reply->result().batch_id(), id);
    ASSERT_TRUE(reply->result().ok()) << reply->result().error();
    EXPECT_EQ(ReadOutput(reply->result().outputs(0))[0], static_cast<float>(id) + 1.0f);
  }
}

TEST_F(ExecutorTest, ServerEofStopsTheExecutorCleanly) {
  Start();
  ASSERT_TRUE(Load("fake/1").ok());
  server_.reset();  // the server died
  runner_.join();
  EXPECT_TRUE(run_status_.ok()) << run_status_;
}

TEST_F(ExecutorTest, CorruptStreamStopsTheExecutorWithAnError) {
  Start();
  const unsigned char frame[] = {4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  ASSERT_EQ(write(server_->fd(), frame, sizeof(frame)), static_cast<ssize_t>(sizeof(frame)));
  runner_.join();
  EXPECT_TRUE(absl::IsDataLoss(run_status_)) << run_status_;
}

TEST_F(ExecutorTest, StopFromAnotherThread) {
  Start();
  executor_->Stop();
  runner_.join();
  EXPECT_TRUE(run_status_.ok()) << run_status_;
}

TEST(ExecutorCreateTest, RequiresALoader) {
  auto pair = ipc::ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  std::string suffix = UniqueSuffix();
  auto in = ipc::SharedMemoryRegion::Create("/tessera-exec-create-in-" + suffix, 4096);
  auto out = ipc::SharedMemoryRegion::Create("/tessera-exec-create-out-" + suffix, 4096);
  ASSERT_TRUE(in.ok() && out.ok());
  auto executor =
      Executor::Create(ExecutorOptions{}, std::move(pair->first), *std::move(in), *std::move(out));
  EXPECT_TRUE(absl::IsInvalidArgument(executor.status()));
}

}  // namespace
}  // namespace tessera::executor
