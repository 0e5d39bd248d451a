#include "otel_spans.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "absl/strings/escaping.h"
#include "request_tracer.h"

namespace tessera::frontend {
namespace {

using ::testing::ElementsAre;

constexpr char kParent[] = "00-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01";

std::string Hex(const std::string& bytes) { return absl::BytesToHexString(bytes); }

template <size_t N>
std::string Hex(const std::array<uint8_t, N>& bytes) {
  return Hex(std::string(reinterpret_cast<const char*>(bytes.data()), N));
}

std::vector<std::string> EventNames(const otlp::Span& span) {
  std::vector<std::string> names;
  for (const auto& event : span.events()) names.push_back(event.name());
  return names;
}

TEST(TraceParentTest, ReadsTheW3cForm) {
  std::optional<TraceParent> parent = ParseTraceParent(kParent, "congo=t61rcWkgMzE");
  ASSERT_TRUE(parent.has_value());
  EXPECT_EQ(Hex(parent->trace_id), "0af7651916cd43dd8448eb211c12666c");
  EXPECT_EQ(Hex(parent->span_id), "b7ad6b7169242424");
  EXPECT_EQ(parent->flags, 1);
  EXPECT_EQ(parent->trace_state, "congo=t61rcWkgMzE");
  // A later version is read by the fields it shares with 00, and may carry more after a '-'.
  EXPECT_TRUE(ParseTraceParent("01-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-00-x", ""));
}

TEST(TraceParentTest, RefusesWhatTheSpecificationRefuses) {
  for (const char* bad : {
           "",
           "00-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424",       // no flags
           "00-0AF7651916CD43DD8448EB211C12666C-b7ad6b7169242424-01",    // uppercase
           "00-00000000000000000000000000000000-b7ad6b7169242424-01",    // zero trace id
           "00-0af7651916cd43dd8448eb211c12666c-0000000000000000-01",    // zero span id
           "ff-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01",    // version ff
           "00-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01-x",  // 00 with more
           "01-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01x",   // more without '-'
           "00_0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01",    // wrong separator
           "00-0af7651916cd43dd8448eb211c12666g-b7ad6b7169242424-01",    // not hex
       }) {
    EXPECT_FALSE(ParseTraceParent(bad, "")) << bad;
  }
}

TEST(SpanIdSourceTest, IdsHaveTheirSizesAreStableAndDiffer) {
  using Role = SpanIdSource::Role;
  SpanIdSource ids, other;
  std::set<std::string> seen;
  for (uint64_t n = 0; n < 100; ++n) {
    const std::string trace = ids.TraceIdOf(n);
    EXPECT_EQ(trace.size(), 16u);
    EXPECT_EQ(trace, ids.TraceIdOf(n));  // a step finds its request's trace again
    seen.insert(trace);
    for (Role role : {Role::kRoot, Role::kModel, Role::kCompute}) {
      const std::string span = ids.SpanIdOf(n, role);
      EXPECT_EQ(span.size(), 8u);
      EXPECT_NE(span, std::string(8, '\0'));
      EXPECT_EQ(span, ids.SpanIdOf(n, role));
      seen.insert(span);
    }
  }
  EXPECT_EQ(seen.size(), 400u);
  // Another source (another server run) makes other ids for the same numbers.
  EXPECT_NE(ids.TraceIdOf(1), other.TraceIdOf(1));
}

TraceRecord Record(bool failed) {
  dispatch::RequestTiming timing{100, 20, 300, 40};
  TraceRecord record =
      MakeTrace("mlp", 3, "req-7", 1000, 1100, failed ? nullptr : &timing,
                failed ? absl::InternalError("executor crashed") : absl::OkStatus());
  record.received_event = "HTTP_RECV_END";
  return record;
}

TEST(AppendTraceSpansTest, MakesTritonsThreeSpans) {
  TraceRecord record = Record(false);
  ASSERT_EQ(SpanCount(record), 3);
  const SpanIdSource ids;
  google::protobuf::RepeatedPtrField<otlp::Span> spans;
  const int64_t offset = 1'700'000'000'000'000'000;
  AppendTraceSpans(record, 42, offset, ids, &spans);
  ASSERT_EQ(spans.size(), 3);
  const otlp::Span &root = spans[0], &model = spans[1], &compute = spans[2];

  EXPECT_EQ(root.name(), "InferRequest");
  EXPECT_EQ(model.name(), "mlp");
  EXPECT_EQ(compute.name(), "compute");
  EXPECT_TRUE(root.parent_span_id().empty());
  EXPECT_EQ(model.parent_span_id(), root.span_id());
  EXPECT_EQ(compute.parent_span_id(), model.span_id());
  EXPECT_EQ(model.trace_id(), root.trace_id());
  EXPECT_EQ(compute.trace_id(), root.trace_id());

  EXPECT_THAT(EventNames(root), ElementsAre("HTTP_RECV_END", "INFER_RESPONSE_COMPLETE"));
  EXPECT_THAT(EventNames(model), ElementsAre("REQUEST_START", "QUEUE_START", "REQUEST_END"));
  EXPECT_THAT(EventNames(compute), ElementsAre("COMPUTE_START", "COMPUTE_INPUT_END",
                                               "COMPUTE_OUTPUT_START", "COMPUTE_END"));
  // Monotonic times moved by the offset: arrival 1000, queue 1100, then the timing's durations.
  EXPECT_EQ(root.start_time_unix_nano(), offset + 1000);
  EXPECT_EQ(model.events(1).time_unix_nano(), offset + 1100);
  EXPECT_EQ(compute.start_time_unix_nano(), offset + 1200);
  EXPECT_EQ(compute.events(1).time_unix_nano(), offset + 1220);
  EXPECT_EQ(compute.events(2).time_unix_nano(), offset + 1520);
  EXPECT_EQ(compute.end_time_unix_nano(), offset + 1560);
  EXPECT_EQ(root.end_time_unix_nano(), model.end_time_unix_nano());
  EXPECT_GE(root.end_time_unix_nano(), compute.end_time_unix_nano());

  std::map<std::string, std::string> attributes;
  for (const auto& kv : model.attributes()) {
    attributes[kv.key()] = kv.value().has_string_value() ? kv.value().string_value()
                                                         : std::to_string(kv.value().int_value());
  }
  EXPECT_EQ(attributes, (std::map<std::string, std::string>{{"triton.model_name", "mlp"},
                                                            {"triton.model_version", "3"},
                                                            {"triton.trace_id", "42"},
                                                            {"triton.trace_parent_id", "0"},
                                                            {"triton.request_id", "req-7"}}));
  for (const otlp::Span& span : spans) {
    EXPECT_EQ(span.kind(), otlp::Span::SPAN_KIND_SERVER);
    EXPECT_EQ(span.status().code(), otlp::Status::STATUS_CODE_UNSET);
  }
}

TEST(AppendTraceSpansTest, AFailedRequestHasNoComputeSpanAndCarriesItsError) {
  TraceRecord record = Record(true);
  ASSERT_EQ(SpanCount(record), 2);
  const SpanIdSource ids;
  google::protobuf::RepeatedPtrField<otlp::Span> spans;
  AppendTraceSpans(record, 1, 0, ids, &spans);
  ASSERT_EQ(spans.size(), 2);
  for (const otlp::Span& span : spans) {
    EXPECT_EQ(span.status().code(), otlp::Status::STATUS_CODE_ERROR);
    EXPECT_EQ(span.status().message(), "executor crashed");
  }
}

TEST(AppendTraceSpansTest, AStepIsAModelSpanUnderTheModelSpanOfTheRequestItServes) {
  const SpanIdSource ids;
  google::protobuf::RepeatedPtrField<otlp::Span> spans;
  AppendTraceSpans(Record(false), 7, 0, ids, &spans);  // the ensemble request, trace 7
  TraceRecord step = Record(false);
  step.model_name = "step_model";
  step.id = 9;
  step.parent_id = 7;
  step.root_id = 7;
  ASSERT_EQ(SpanCount(step), 2);
  AppendTraceSpans(step, 9, 0, ids, &spans);
  ASSERT_EQ(spans.size(), 5);
  const otlp::Span &ensemble = spans[1], &step_model = spans[3], &step_compute = spans[4];
  EXPECT_EQ(step_model.name(), "step_model");
  EXPECT_EQ(step_model.parent_span_id(), ensemble.span_id());
  EXPECT_EQ(step_model.trace_id(), ensemble.trace_id());
  EXPECT_EQ(step_compute.parent_span_id(), step_model.span_id());
  EXPECT_EQ(step_model.attributes(3).key(), "triton.trace_parent_id");
  EXPECT_EQ(step_model.attributes(3).value().int_value(), 7);
}

TEST(AppendTraceSpansTest, TheCallersContextIsTheRootsParent) {
  TraceRecord record = Record(false);
  record.parent = ParseTraceParent(kParent, "a=1");
  const SpanIdSource ids;
  google::protobuf::RepeatedPtrField<otlp::Span> spans;
  AppendTraceSpans(record, 1, 0, ids, &spans);
  EXPECT_EQ(Hex(spans[0].trace_id()), "0af7651916cd43dd8448eb211c12666c");
  EXPECT_EQ(Hex(spans[0].parent_span_id()), "b7ad6b7169242424");
  EXPECT_EQ(spans[0].trace_state(), "a=1");
  EXPECT_NE(spans[0].span_id(), spans[0].parent_span_id());
  EXPECT_EQ(Hex(spans[2].trace_id()), "0af7651916cd43dd8448eb211c12666c");
}

}  // namespace
}  // namespace tessera::frontend
