#include "client_shm.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "infer_request.h"

namespace tessera::frontend {
namespace {

// A POSIX shm object standing in for the client's (the registry opens it by key, as a client's).
class ClientObject {
 public:
  explicit ClientObject(size_t bytes)
      : key_(absl::StrCat("/tessera-client-shm-test-", getpid(), "-", counter_++)),
        region_(ipc::SharedMemoryRegion::Create(key_, bytes).value()) {}
  const std::string& key() const { return key_; }
  std::byte* data() const { return region_->data(); }
  // What a client may do to a region it registered: its pages are gone from every mapping.
  void Truncate() const {
    const int fd = shm_open(key_.c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 0), 0);
    close(fd);
  }

 private:
  static inline int counter_ = 0;
  std::string key_;
  std::unique_ptr<ipc::SharedMemoryRegion> region_;
};

google::protobuf::Map<std::string, inference::InferParameter> ShmParams(const std::string& region,
                                                                         int64_t byte_size,
                                                                         int64_t offset = -1) {
  google::protobuf::Map<std::string, inference::InferParameter> params;
  params["shared_memory_region"].set_string_param(region);
  params["shared_memory_byte_size"].set_int64_param(byte_size);
  if (offset >= 0) params["shared_memory_offset"].set_int64_param(offset);
  return params;
}

void ExpectError(const Status& status, absl::StatusCode code, const std::string& fragment) {
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_NE(status.message().find(fragment), std::string::npos)
      << "'" << status.message() << "' lacks '" << fragment << "'";
}

TEST(ClientShmRegistryTest, RegisteredWindowIsReadAtItsOffset) {
  ClientObject object(4096);
  std::memcpy(object.data() + 100, "hello", 5);
  ClientShmRegistry registry(/*enabled=*/true);
  ASSERT_TRUE(registry.Register("r", object.key(), 96, 64).ok());
  // The tensor's own offset is inside the window: 96 + 4 = byte 100 of the object.
  auto slice = registry.SliceFor("input 'x'", ShmParams("r", 5, 4));
  ASSERT_TRUE(slice.ok()) << slice.status();
  ASSERT_TRUE(slice->has_value());
  EXPECT_EQ(std::memcmp((*slice)->data, "hello", 5), 0);
  EXPECT_EQ((*slice)->byte_size, 5u);

  auto regions = registry.Regions("");
  ASSERT_TRUE(regions.ok());
  ASSERT_EQ(regions->size(), 1u);
  EXPECT_EQ((*regions)[0]->key, object.key());
  EXPECT_EQ((*regions)[0]->offset, 96u);
  EXPECT_EQ((*regions)[0]->byte_size, 64u);
}

TEST(ClientShmRegistryTest, RegistrationErrorsNameWhatIsWrong) {
  ClientObject object(4096);
  ClientShmRegistry registry(/*enabled=*/true);
  ExpectError(registry.Register("r", "/tessera-no-such-object", 0, 16), absl::StatusCode::kNotFound,
              "'/tessera-no-such-object'");
  ExpectError(registry.Register("r", object.key(), 4000, 200), absl::StatusCode::kInvalidArgument,
              "shared memory region 'r'");
  ExpectError(registry.Register("r", object.key(), 0, 0), absl::StatusCode::kInvalidArgument,
              "byte_size must be > 0");
  ExpectError(registry.Register("", object.key(), 0, 16), absl::StatusCode::kInvalidArgument,
              "name is empty");
  // Keys shm_open cannot take: refused as the client's mistake, before any system call.
  for (const std::string& key : {std::string("/") + std::string(300, 'k'), std::string("/a/b"),
                                 std::string("/")}) {
    ExpectError(registry.Register("r", key, 0, 16), absl::StatusCode::kInvalidArgument,
                "is not a POSIX shared-memory name");
  }
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 16).ok());
  ExpectError(registry.Register("r", object.key(), 0, 16), absl::StatusCode::kAlreadyExists,
              "already registered");
  ExpectError(registry.Regions("other").status(), absl::StatusCode::kNotFound, "'other'");
}

TEST(ClientShmRegistryTest, SliceErrorsNameTheTensorAndTheRegion) {
  ClientObject object(4096);
  ClientShmRegistry registry(/*enabled=*/true);
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 64).ok());
  ExpectError(registry.SliceFor("input 'x'", ShmParams("nope", 8)).status(),
              absl::StatusCode::kNotFound, "input 'x': shared memory region 'nope'");
  ExpectError(registry.SliceFor("input 'x'", ShmParams("r", 60, 8)).status(),
              absl::StatusCode::kInvalidArgument, "bytes [8, 68) lie outside");
  ExpectError(registry.SliceFor("input 'x'", ShmParams("r", -1)).status(),
              absl::StatusCode::kInvalidArgument, "non-negative integer");
  auto params = ShmParams("r", 8);
  params.erase("shared_memory_byte_size");
  ExpectError(registry.SliceFor("input 'x'", params).status(), absl::StatusCode::kInvalidArgument,
              "without 'shared_memory_byte_size'");
  auto none = registry.SliceFor("input 'x'", {});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(ClientShmRegistryTest, UnregisteredRegionStaysMappedForRequestsThatHoldIt) {
  ClientObject object(4096);
  std::memcpy(object.data(), "still here", 10);
  ClientShmRegistry registry(/*enabled=*/true);
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 64).ok());
  auto slice = registry.SliceFor("input 'x'", ShmParams("r", 10));
  ASSERT_TRUE(slice.ok() && slice->has_value());
  ASSERT_TRUE(registry.Unregister("").ok());
  EXPECT_EQ(registry.Regions("")->size(), 0u);
  EXPECT_EQ(std::memcmp((*slice)->data, "still here", 10), 0);
  // Unknown names are not an error (clients unregister defensively).
  EXPECT_TRUE(registry.Unregister("r").ok());
  ExpectError(registry.SliceFor("input 'x'", ShmParams("r", 10)).status(),
              absl::StatusCode::kNotFound, "not registered");
}

TEST(ClientShmRegistryTest, DisabledRegistryRefusesEverythingWithTheFlagToTurnItOn) {
  ClientObject object(4096);
  ClientShmRegistry registry(/*enabled=*/false);
  ExpectError(registry.Register("r", object.key(), 0, 64), absl::StatusCode::kPermissionDenied,
              "--allow-client-shm");
  ExpectError(registry.SliceFor("input 'x'", ShmParams("r", 8)).status(),
              absl::StatusCode::kPermissionDenied, "input 'x': client shared memory is disabled");
}

// ---- requests naming regions ------------------------------------------------------------------

repository::ModelConfig TwoInputConfig() {
  repository::ModelConfig config;
  config.name = "two";
  config.max_batch_size = 8;
  config.inputs = {{"a", DataType::kFp32, {2}}, {"b", DataType::kFp32, {2}}};
  config.outputs = {{"y", DataType::kFp32, {2}}};
  return config;
}

void AddInput(inference::ModelInferRequest* wire, const std::string& name) {
  auto* input = wire->add_inputs();
  input->set_name(name);
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(2);
}

TEST(InferRequestShmTest, RawContentsCoverOnlyTheInputsOutsideSharedMemory) {
  ClientObject object(4096);
  const float a[2] = {1.f, 2.f};
  std::memcpy(object.data() + 32, a, sizeof(a));
  ClientShmRegistry registry(/*enabled=*/true);
  ASSERT_TRUE(registry.Register("in", object.key(), 32, 8).ok());

  inference::ModelInferRequest wire;
  AddInput(&wire, "a");
  *wire.mutable_inputs(0)->mutable_parameters() = ShmParams("in", 8);
  AddInput(&wire, "b");
  const float b[2] = {3.f, 4.f};
  wire.add_raw_input_contents(std::string(reinterpret_cast<const char*>(b), sizeof(b)));
  RequestStorage storage;
  auto request = BuildDispatchRequest(wire, TwoInputConfig(), &storage, &registry);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ((*request)->inputs.size(), 2u);
  EXPECT_EQ(static_cast<const float*>((*request)->inputs[0].data)[1], 2.f);
  EXPECT_EQ(static_cast<const float*>((*request)->inputs[1].data)[0], 3.f);
  EXPECT_EQ(storage.shm_input_copies.size(), 1u);
  // A copy: what the client writes into its region afterwards does not change the request.
  std::memset(object.data() + 32, 0, sizeof(a));
  EXPECT_EQ(static_cast<const float*>((*request)->inputs[0].data)[1], 2.f);

  // One raw entry per input would be one too many.
  wire.add_raw_input_contents(std::string(sizeof(b), '\0'));
  ExpectError(BuildDispatchRequest(wire, TwoInputConfig(), &storage, &registry).status(),
              absl::StatusCode::kInvalidArgument, "1 inputs outside shared memory but 2");
}

TEST(InferRequestShmTest, ShmInputOfTheWrongSizeIsRefused) {
  ClientObject object(4096);
  ClientShmRegistry registry(/*enabled=*/true);
  ASSERT_TRUE(registry.Register("in", object.key(), 0, 64).ok());
  inference::ModelInferRequest wire;
  AddInput(&wire, "a");
  AddInput(&wire, "b");
  *wire.mutable_inputs(0)->mutable_parameters() = ShmParams("in", 12);
  *wire.mutable_inputs(1)->mutable_parameters() = ShmParams("in", 8, 16);
  RequestStorage storage;
  ExpectError(BuildDispatchRequest(wire, TwoInputConfig(), &storage, &registry).status(),
              absl::StatusCode::kInvalidArgument,
              "input 'a': shared_memory_byte_size is 12, but shape [1, 2] of FP32 needs 8");
}

TEST(InferRequestShmTest, OutputIsWrittenIntoTheRegionAndItsRawEntryLeftEmpty) {
  ClientObject object(4096);
  ClientShmRegistry registry(/*enabled=*/true);
  ASSERT_TRUE(registry.Register("out", object.key(), 64, 64).ok());
  inference::ModelInferRequest wire;
  AddInput(&wire, "a");
  AddInput(&wire, "b");
  wire.add_raw_input_contents(std::string(8, '\0'));
  wire.add_raw_input_contents(std::string(8, '\0'));
  auto* output = wire.add_outputs();
  output->set_name("y");
  *output->mutable_parameters() = ShmParams("out", 16, 8);
  RequestStorage storage;
  ASSERT_TRUE(BuildDispatchRequest(wire, TwoInputConfig(), &storage, &registry).ok());
  ASSERT_EQ(storage.shm_outputs.size(), 1u);

  const float y[2] = {5.f, 6.f};
  dispatch::Response response;
  response.outputs.push_back(
      {"y", DataType::kFp32, {1, 2}, std::string(reinterpret_cast<const char*>(y), sizeof(y))});
  inference::ModelInferResponse answer;
  ASSERT_TRUE(FillInferResponse("two", 1, "id", std::move(response), storage, &answer).ok());
  ASSERT_EQ(answer.raw_output_contents_size(), 1);
  EXPECT_TRUE(answer.raw_output_contents(0).empty());
  EXPECT_EQ(answer.outputs(0).parameters().at("shared_memory_byte_size").int64_param(), 8);
  float written[2];
  std::memcpy(written, object.data() + 64 + 8, sizeof(written));
  EXPECT_EQ(written[1], 6.f);

  // A window smaller than the result: an error naming both sizes, nothing written.
  std::memset(object.data() + 64, 0, 64);
  RequestStorage small;
  *wire.mutable_outputs(0)->mutable_parameters() = ShmParams("out", 4);
  ASSERT_TRUE(BuildDispatchRequest(wire, TwoInputConfig(), &small, &registry).ok());
  dispatch::Response again;
  again.outputs.push_back({"y", DataType::kFp32, {1, 2}, std::string(8, '\1')});
  inference::ModelInferResponse refused;
  ExpectError(FillInferResponse("two", 1, "id", std::move(again), small, &refused),
              absl::StatusCode::kInvalidArgument,
              "output 'y': shared_memory_byte_size is 4, but the result [1, 2] needs 8 bytes");
  EXPECT_EQ(object.data()[64], std::byte{0});
}

// A region truncated by its client after registering: the request fails naming the tensor and
// the region, and the server survives (the bytes under the mapping are gone: SIGBUS unguarded).
TEST(InferRequestShmTest, TruncatedRegionsFailTheirRequestNotTheServer) {
  ClientObject object(4096);
  ClientShmRegistry registry(/*enabled=*/true);
  ASSERT_TRUE(registry.Register("in", object.key(), 0, 8).ok());
  ASSERT_TRUE(registry.Register("out", object.key(), 64, 64).ok());
  inference::ModelInferRequest wire;
  AddInput(&wire, "a");
  AddInput(&wire, "b");
  *wire.mutable_inputs(0)->mutable_parameters() = ShmParams("in", 8);
  wire.add_raw_input_contents(std::string(8, '\0'));
  auto* output = wire.add_outputs();
  output->set_name("y");
  *output->mutable_parameters() = ShmParams("out", 8);
  RequestStorage storage;
  ASSERT_TRUE(BuildDispatchRequest(wire, TwoInputConfig(), &storage, &registry).ok());

  object.Truncate();
  dispatch::Response response;
  response.outputs.push_back({"y", DataType::kFp32, {1, 2}, std::string(8, '\1')});
  inference::ModelInferResponse answer;
  ExpectError(FillInferResponse("two", 1, "id", std::move(response), storage, &answer),
              absl::StatusCode::kInvalidArgument,
              "output 'y': shared-memory region 'out': the shared memory under it is gone");
  RequestStorage again;
  ExpectError(BuildDispatchRequest(wire, TwoInputConfig(), &again, &registry).status(),
              absl::StatusCode::kInvalidArgument,
              "input 'a': shared-memory region 'in': the shared memory under it is gone");
}

}  // namespace
}  // namespace tessera::frontend
