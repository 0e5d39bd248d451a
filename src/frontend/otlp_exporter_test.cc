#include "otlp_exporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "request_tracer.h"
#include "tessera/otlp_trace.pb.h"

namespace tessera::frontend {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Keeps what the exporter sends, decoded; can fail, and can hold its first post until released.
class FakeOtlpSinkForTest final : public OtlpSink {
 public:
  struct Shared {
    std::mutex mu;
    std::condition_variable changed;
    std::vector<otlp::ExportTraceServiceRequest> posts;
    bool fail = false;
    bool hold_first = false;
    bool holding = false;  // the first post is waiting for Release
  };

  explicit FakeOtlpSinkForTest(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

  Status Post(const std::string& body) override {
    std::unique_lock lock(shared_->mu);
    otlp::ExportTraceServiceRequest request;
    EXPECT_TRUE(request.ParseFromString(body));
    if (shared_->hold_first && shared_->posts.empty()) {
      shared_->holding = true;
      shared_->changed.notify_all();
      shared_->changed.wait(lock, [&] { return !shared_->hold_first; });
      shared_->holding = false;
    }
    shared_->posts.push_back(std::move(request));
    shared_->changed.notify_all();
    if (shared_->fail) return absl::UnavailableError("collector away");
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<Shared> shared_;
};

size_t SpansIn(const otlp::ExportTraceServiceRequest& request) {
  size_t n = 0;
  for (const auto& rs : request.resource_spans()) {
    for (const auto& ss : rs.scope_spans()) n += ss.spans_size();
  }
  return n;
}

// A traced request's record: 3 spans, or 2 when it failed.
TraceRecord Record(bool failed = false) {
  dispatch::RequestTiming timing{100, 20, 300, 40};
  return MakeTrace("m", 1, "r", 1000, 1100, failed ? nullptr : &timing,
                   failed ? absl::InternalError("x") : absl::OkStatus());
}

OtlpExportSettings Settings(int64_t queue, int64_t batch, int64_t delay_ms) {
  OtlpExportSettings settings;
  settings.max_queue_size = queue;
  settings.max_export_batch_size = batch;
  settings.schedule_delay_ms = delay_ms;
  settings.resource = {{"service.name", "unit"}};
  return settings;
}

constexpr int64_t kHour = 3'600'000;

TEST(OtlpExporterTest, AFullBatchGoesAtOnceAndNoBatchIsLargerThanTheLimit) {
  auto shared = std::make_shared<FakeOtlpSinkForTest::Shared>();
  OtlpExporter exporter(Settings(100, 6, kHour), std::make_unique<FakeOtlpSinkForTest>(shared), 0);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(exporter.Add(Record(), i));
  std::unique_lock lock(shared->mu);
  ASSERT_TRUE(shared->changed.wait_for(lock, std::chrono::seconds(10),
                                       [&] { return shared->posts.size() == 2; }));
  for (const auto& post : shared->posts) {
    EXPECT_EQ(SpansIn(post), 6u);
    ASSERT_EQ(post.resource_spans_size(), 1);
    EXPECT_EQ(post.resource_spans(0).resource().attributes(0).key(), "service.name");
    EXPECT_EQ(post.resource_spans(0).scope_spans(0).scope().name(), "tessera");
  }
}

TEST(OtlpExporterTest, WokenByAFullBatchTheRestWaitsToFillTheNext) {
  auto shared = std::make_shared<FakeOtlpSinkForTest::Shared>();
  OtlpExporter exporter(Settings(100, 6, kHour), std::make_unique<FakeOtlpSinkForTest>(shared), 0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(exporter.Add(Record(), i));
  {
    std::unique_lock lock(shared->mu);
    ASSERT_TRUE(shared->changed.wait_for(lock, std::chrono::seconds(10),
                                         [&] { return !shared->posts.empty(); }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  {
    std::lock_guard lock(shared->mu);
    ASSERT_EQ(shared->posts.size(), 1u);  // not a small export of the 3 spans left over
    EXPECT_EQ(SpansIn(shared->posts[0]), 6u);
  }
  exporter.Flush();
  std::lock_guard lock(shared->mu);
  ASSERT_EQ(shared->posts.size(), 2u);
  EXPECT_EQ(SpansIn(shared->posts[1]), 3u);
}

TEST(OtlpExporterTest, ThePartOfABatchWaitsNoLongerThanTheScheduleDelay) {
  auto shared = std::make_shared<FakeOtlpSinkForTest::Shared>();
  OtlpExporter exporter(Settings(100, 60, 20), std::make_unique<FakeOtlpSinkForTest>(shared), 0);
  ASSERT_TRUE(exporter.Add(Record(), 1));
  std::unique_lock lock(shared->mu);
  ASSERT_TRUE(shared->changed.wait_for(lock, std::chrono::seconds(10),
                                       [&] { return !shared->posts.empty(); }));
  EXPECT_EQ(SpansIn(shared->posts[0]), 3u);
}

TEST(OtlpExporterTest, FlushSendsWhatIsQueuedAndCounts) {
  auto shared = std::make_shared<FakeOtlpSinkForTest::Shared>();
  OtlpExporter exporter(Settings(100, 60, kHour), std::make_unique<FakeOtlpSinkForTest>(shared), 0);
  ASSERT_TRUE(exporter.Add(Record(), 1));
  ASSERT_TRUE(exporter.Add(Record(/*failed=*/true), 2));
  exporter.Flush();
  {
    std::lock_guard lock(shared->mu);
    ASSERT_EQ(shared->posts.size(), 1u);
    EXPECT_EQ(SpansIn(shared->posts[0]), 5u);
  }
  EXPECT_EQ(exporter.counts().exported_spans, 5u);
  exporter.Flush();  // nothing queued: returns at once
}

TEST(OtlpExporterTest, AFullQueueDropsSpansAndCountsThem) {
  auto shared = std::make_shared<FakeOtlpSinkForTest::Shared>();
  shared->hold_first = true;
  OtlpExporter exporter(Settings(6, 6, kHour), std::make_unique<FakeOtlpSinkForTest>(shared), 0);
  ASSERT_TRUE(exporter.Add(Record(), 1));
  ASSERT_TRUE(exporter.Add(Record(), 2));  // a full batch: taken, and held in the sink
  {
    std::unique_lock lock(shared->mu);
    ASSERT_TRUE(
        shared->changed.wait_for(lock, std::chrono::seconds(10), [&] { return shared->holding; }));
  }
  EXPECT_TRUE(exporter.Add(Record(), 3));
  EXPECT_TRUE(exporter.Add(Record(), 4));
  EXPECT_FALSE(exporter.Add(Record(), 5));  // 9 spans would not fit in 6
  {
    std::lock_guard lock(shared->mu);
    shared->hold_first = false;
    shared->changed.notify_all();
  }
  exporter.Flush();
  const OtlpExporter::Counts counts = exporter.counts();
  EXPECT_EQ(counts.exported_spans, 12u);
  EXPECT_EQ(counts.dropped_spans, 3u);
  EXPECT_EQ(counts.failed_spans, 0u);
}

TEST(OtlpExporterTest, AStopGivesUpAfterTheFirstFailedExport) {
  auto shared = std::make_shared<FakeOtlpSinkForTest::Shared>();
  shared->hold_first = true;
  shared->fail = true;
  auto exporter = std::make_unique<OtlpExporter>(Settings(100, 3, kHour),
                                                 std::make_unique<FakeOtlpSinkForTest>(shared), 0);
  OtlpExporter* raw = exporter.get();
  ASSERT_TRUE(raw->Add(Record(), 1));  // a full batch: taken, and held in the sink
  {
    std::unique_lock lock(shared->mu);
    ASSERT_TRUE(
        shared->changed.wait_for(lock, std::chrono::seconds(10), [&] { return shared->holding; }));
  }
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(raw->Add(Record(/*failed=*/true), 2 + i));
  std::thread stopper([&] { exporter.reset(); });
  // Flush returns once the stop has begun, since the held post keeps the queue from being
  // handled (the destructor waits for that post meanwhile). Waiting for Add to refuse instead was
  // flaky: it also refuses when the queue is full, which happened before a slow stopper began.
  raw->Flush();
  EXPECT_FALSE(raw->Add(Record(/*failed=*/true), 99));  // refused: the stop has begun
  {
    std::lock_guard lock(shared->mu);
    shared->hold_first = false;
    shared->changed.notify_all();
  }
  stopper.join();
  std::lock_guard lock(shared->mu);
  EXPECT_EQ(shared->posts.size(), 1u);  // the 5 queued records were given up on, not sent
}

const char* FromMap(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : it->second.c_str();
}

StatusOr<OtlpExportSettings> Resolve(const ServerConfig::OtelTrace& otel,
                                     const std::map<std::string, std::string>& env) {
  return ResolveOtlpExport(otel, [&](const char* name) { return FromMap(env, name); });
}

TEST(ResolveOtlpExportTest, DefaultsAreOpenTelemetrys) {
  StatusOr<OtlpExportSettings> s = Resolve({}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->url, "http://localhost:4318/v1/traces");
  EXPECT_THAT(s->resource, ElementsAre(Pair("service.name", "tessera")));
  EXPECT_EQ(s->max_queue_size, 2048);
  EXPECT_EQ(s->schedule_delay_ms, 5000);
  EXPECT_EQ(s->max_export_batch_size, 512);
  EXPECT_EQ(s->timeout_ms, 10000);
}

TEST(ResolveOtlpExportTest, TheConfigWinsOverTheEnvironmentWhichWinsOverTheDefaults) {
  const std::map<std::string, std::string> env = {
      {"OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318/"},
      {"OTEL_RESOURCE_ATTRIBUTES", "service.name=a, team=search%2Cads ,zone=eu"},
      {"OTEL_SERVICE_NAME", "b"},
      {"OTEL_EXPORTER_OTLP_HEADERS", "api-key=k1"},
      {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key=k2"},
      {"OTEL_BSP_SCHEDULE_DELAY", "100"},
      {"OTEL_BSP_MAX_QUEUE_SIZE", "64"},
      {"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"}};
  StatusOr<OtlpExportSettings> s = Resolve({}, env);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->url, "https://collector:4318/v1/traces");  // the base endpoint gets the path
  EXPECT_THAT(s->resource, ElementsAre(Pair("service.name", "b"), Pair("team", "search,ads"),
                                       Pair("zone", "eu")));
  EXPECT_THAT(s->headers, ElementsAre(Pair("api-key", "k2")));  // the signal's own wins
  EXPECT_EQ(s->schedule_delay_ms, 100);
  EXPECT_EQ(s->max_queue_size, 64);
  EXPECT_EQ(s->max_export_batch_size, 64);  // not given: shrunk to the queue
  EXPECT_EQ(s->timeout_ms, 2500);
}

TEST(ResolveOtlpExportTest, ConfiguredValuesOverrideTheEnvironment) {
  ServerConfig::OtelTrace otel;
  otel.url = "http://mine:4318/v1/traces";
  otel.resource = {{"service.name", "configured"}};
  otel.bsp_max_queue_size = 10;
  otel.bsp_max_export_batch_size = 10;
  const std::map<std::string, std::string> env = {
      {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://env:4318/custom"},
      {"OTEL_SERVICE_NAME", "env"},
      {"OTEL_BSP_MAX_QUEUE_SIZE", "5"}};
  StatusOr<OtlpExportSettings> s = Resolve(otel, env);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->url, "http://mine:4318/v1/traces");
  EXPECT_THAT(s->resource, ElementsAre(Pair("service.name", "configured")));
  EXPECT_EQ(s->max_queue_size, 10);
  // The signal's own endpoint is taken as it is.
  otel.url.reset();
  EXPECT_EQ(Resolve(otel, env)->url, "http://env:4318/custom");
}

TEST(ResolveOtlpExportTest, BadSettingsAreNamed) {
  ServerConfig::OtelTrace batch_too_big;
  batch_too_big.bsp_max_queue_size = 4;
  batch_too_big.bsp_max_export_batch_size = 8;
  ServerConfig::OtelTrace bad_header;
  bad_header.headers = {{"x:y", "1"}};
  for (const auto& [otel, env, message] : std::vector<
           std::tuple<ServerConfig::OtelTrace, std::map<std::string, std::string>, std::string>>{
           {batch_too_big, {}, "bsp_max_export_batch_size (8) must not be larger"},
           {bad_header, {}, "header \"x:y\""},
           {{},
            {{"OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://c:4317"}},
            "OTEL_EXPORTER_OTLP_ENDPOINT \"grpc://c:4317/v1/traces\": expected an http"},
           {{}, {{"OTEL_RESOURCE_ATTRIBUTES", "a=1,=2"}}, "OTEL_RESOURCE_ATTRIBUTES: \"=2\""},
           {{}, {{"OTEL_RESOURCE_ATTRIBUTES", "a=%zz"}}, "OTEL_RESOURCE_ATTRIBUTES: \"a=%zz\""},
           {{}, {{"OTEL_RESOURCE_ATTRIBUTES", "a=%4"}}, "OTEL_RESOURCE_ATTRIBUTES: \"a=%4\""},
           {{}, {{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0"}}, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"},
           {{}, {{"OTEL_EXPORTER_OTLP_TIMEOUT", "10s"}}, "OTEL_EXPORTER_OTLP_TIMEOUT"},
       }) {
    StatusOr<OtlpExportSettings> s = Resolve(otel, env);
    ASSERT_FALSE(s.ok()) << message;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(message));
  }
}

TEST(RequestTracerOpenTelemetryTest, ATraceContextIsTracedWhateverTheRateAndCount) {
  auto shared = std::make_shared<FakeOtlpSinkForTest::Shared>();
  TraceSettings settings;
  settings.level = "TIMESTAMPS";
  settings.rate = 0;
  settings.count = 0;
  auto tracer = RequestTracer::CreateOpenTelemetry(settings, Settings(100, 50, kHour),
                                                   std::make_unique<FakeOtlpSinkForTest>(shared));
  ASSERT_TRUE(tracer.ok()) << tracer.status();
  EXPECT_TRUE((*tracer)->opentelemetry());
  EXPECT_FALSE((*tracer)->Sample("m"));
  EXPECT_TRUE((*tracer)->Sample("m", /*has_trace_context=*/true).timestamps);
  (*tracer)->Record(Record());
  (*tracer)->Record(Record());
  ASSERT_TRUE((*tracer)->Flush().ok());
  {
    std::lock_guard lock(shared->mu);
    ASSERT_EQ(shared->posts.size(), 1u);
    EXPECT_EQ(SpansIn(shared->posts[0]), 6u);
  }

  // A model whose level is OFF is not traced, context or not; TENSORS cannot be asked for.
  TraceSettingsUpdate off;
  off.values["trace_level"] = "OFF";
  ASSERT_TRUE((*tracer)->Update("m", off).ok());
  EXPECT_FALSE((*tracer)->Sample("m", true));
  TraceSettingsUpdate tensors;
  tensors.values["trace_level"] = "TIMESTAMPS,TENSORS";
  Status refused = (*tracer)->Update("", tensors);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("mode opentelemetry"));
  settings.level = "TENSORS";
  EXPECT_FALSE(RequestTracer::CreateOpenTelemetry(settings, Settings(100, 50, kHour),
                                                  std::make_unique<FakeOtlpSinkForTest>(shared))
                   .ok());
}

}  // namespace
}  // namespace tessera::frontend
