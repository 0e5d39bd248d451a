#include "otel_spans.h"

#include <algorithm>
#include <random>
#include <string>
#include <string_view>

namespace tessera::frontend {
namespace {

constexpr char kRootSpan[] = "InferRequest";
constexpr char kComputeSpan[] = "compute";

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// `out.size()` bytes from lowercase hex `text` (twice as long); false on any other character.
template <size_t N>
bool ReadHex(std::string_view text, std::array<uint8_t, N>& out) {
  for (size_t i = 0; i < N; ++i) {
    const char high = text[2 * i], low = text[2 * i + 1];
    if (!IsLowerHex(high) || !IsLowerHex(low)) return false;
    auto value = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    out[i] = static_cast<uint8_t>(value(high) * 16 + value(low));
  }
  return true;
}

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
}

template <size_t N>
std::string Bytes(const std::array<uint8_t, N>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), N);
}

void SetAttribute(otlp::Span* span, const char* key, const std::string& value) {
  otlp::KeyValue* kv = span->add_attributes();
  kv->set_key(key);
  kv->mutable_value()->set_string_value(value);
}

void SetAttribute(otlp::Span* span, const char* key, int64_t value) {
  otlp::KeyValue* kv = span->add_attributes();
  kv->set_key(key);
  kv->mutable_value()->set_int_value(value);
}

void AddEvent(otlp::Span* span, const char* name, uint64_t unix_ns) {
  otlp::Span::Event* event = span->add_events();
  event->set_name(name);
  event->set_time_unix_nano(unix_ns);
}

void SetError(otlp::Span* span, const std::string& error) {
  if (error.empty()) return;
  span->mutable_status()->set_code(otlp::Status::STATUS_CODE_ERROR);
  span->mutable_status()->set_message(error);
}

// splitmix64's finalizer: a bijection of 64-bit values that scatters neighbours.
uint64_t Mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string BytesOf(uint64_t value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

std::optional<TraceParent> ParseTraceParent(std::string_view traceparent,
                                            std::string_view tracestate) {
  // version "-" trace-id "-" parent-id "-" trace-flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 characters.
  constexpr size_t kLength = 55;
  if (traceparent.size() < kLength) return std::nullopt;
  std::array<uint8_t, 1> version{}, flags{};
  if (!ReadHex(traceparent.substr(0, 2), version) || version[0] == 0xff) return std::nullopt;
  if (version[0] == 0 ? traceparent.size() != kLength
                      : traceparent.size() > kLength && traceparent[kLength] != '-') {
    return std::nullopt;
  }
  if (traceparent[2] != '-' || traceparent[35] != '-' || traceparent[52] != '-') {
    return std::nullopt;
  }
  TraceParent parent;
  if (!ReadHex(traceparent.substr(3, 32), parent.trace_id) ||
      !ReadHex(traceparent.substr(36, 16), parent.span_id) ||
      !ReadHex(traceparent.substr(53, 2), flags) || AllZero(parent.trace_id) ||
      AllZero(parent.span_id)) {
    return std::nullopt;
  }
  parent.flags = flags[0];
  parent.trace_state = std::string(tracestate);
  return parent;
}

SpanIdSource::SpanIdSource() {
  std::random_device random;
  for (uint64_t& salt : salt_) salt = (uint64_t{random()} << 32) ^ random();
}

std::string SpanIdSource::TraceIdOf(uint64_t root_number) const {
  const uint64_t high = Mix(salt_[0] ^ root_number);
  const uint64_t low = Mix(salt_[1] ^ root_number);
  return BytesOf(high) + BytesOf(high == 0 && low == 0 ? 1 : low);
}

std::string SpanIdSource::SpanIdOf(uint64_t trace_number, Role role) const {
  // Distinct (number, role) pairs give distinct inputs, so distinct ids.
  const uint64_t id = Mix(salt_[2] ^ (trace_number * 3 + static_cast<uint64_t>(role)));
  return BytesOf(id == 0 ? 1 : id);
}

int SpanCount(const TraceRecord& record) {
  const bool computed =
      std::any_of(record.timestamps.begin(), record.timestamps.end(),
                  [](const auto& t) { return std::string_view(t.first) == "COMPUTE_START"; });
  return (record.parent_id == 0 ? 2 : 1) + (computed ? 1 : 0);
}

void AppendTraceSpans(const TraceRecord& record, uint64_t trace_number, int64_t wall_offset_ns,
                      const SpanIdSource& ids,
                      google::protobuf::RepeatedPtrField<otlp::Span>* spans) {
  using Role = SpanIdSource::Role;
  auto unix_ns = [&](uint64_t monotonic_ns) {
    return static_cast<uint64_t>(static_cast<int64_t>(monotonic_ns) + wall_offset_ns);
  };
  uint64_t start_ns = 0, end_ns = 0;
  for (const auto& [name, ns] : record.timestamps) {
    const std::string_view event(name);
    if (event == "REQUEST_START") start_ns = ns;
    if (event == "REQUEST_END") end_ns = ns;
  }
  const bool step = record.parent_id != 0;
  const uint64_t root_number = step ? record.root_id : trace_number;
  const std::string trace_id =
      record.parent ? Bytes(record.parent->trace_id) : ids.TraceIdOf(root_number);

  std::string model_parent;
  if (step) {
    model_parent = ids.SpanIdOf(record.parent_id, Role::kModel);
  } else {
    otlp::Span* root = spans->Add();
    root->set_trace_id(trace_id);
    root->set_span_id(ids.SpanIdOf(trace_number, Role::kRoot));
    if (record.parent) {
      root->set_parent_span_id(Bytes(record.parent->span_id));
      root->set_trace_state(record.parent->trace_state);
    }
    root->set_name(kRootSpan);
    root->set_kind(otlp::Span::SPAN_KIND_SERVER);
    root->set_start_time_unix_nano(unix_ns(start_ns));
    root->set_end_time_unix_nano(unix_ns(end_ns));
    if (*record.received_event != '\0') AddEvent(root, record.received_event, unix_ns(start_ns));
    AddEvent(root, "INFER_RESPONSE_COMPLETE", unix_ns(end_ns));
    SetError(root, record.error);
    model_parent = root->span_id();
  }

  // Triton makes every span of a trace a server span; kept, so that queries on kind match.
  otlp::Span* model = spans->Add();
  model->set_trace_id(trace_id);
  model->set_span_id(ids.SpanIdOf(trace_number, Role::kModel));
  model->set_parent_span_id(model_parent);
  model->set_name(record.model_name);
  model->set_kind(otlp::Span::SPAN_KIND_SERVER);
  model->set_start_time_unix_nano(unix_ns(start_ns));
  model->set_end_time_unix_nano(unix_ns(end_ns));
  SetAttribute(model, "triton.model_name", record.model_name);
  SetAttribute(model, "triton.model_version", record.model_version);
  SetAttribute(model, "triton.trace_id", static_cast<int64_t>(trace_number));
  SetAttribute(model, "triton.trace_parent_id", static_cast<int64_t>(record.parent_id));
  if (!record.request_id.empty()) SetAttribute(model, "triton.request_id", record.request_id);
  SetError(model, record.error);

  otlp::Span* compute = nullptr;
  for (const auto& [name, ns] : record.timestamps) {
    const std::string_view event(name);
    if (event == "COMPUTE_START") {
      compute = spans->Add();
      compute->set_trace_id(trace_id);
      compute->set_span_id(ids.SpanIdOf(trace_number, Role::kCompute));
      compute->set_parent_span_id(model->span_id());
      compute->set_name(kComputeSpan);
      compute->set_kind(otlp::Span::SPAN_KIND_SERVER);
      compute->set_start_time_unix_nano(unix_ns(ns));
    }
    const bool compute_event = event.starts_with("COMPUTE_");
    AddEvent(compute_event && compute ? compute : model, name, unix_ns(ns));
    if (event == "COMPUTE_END" && compute) compute->set_end_time_unix_nano(unix_ns(ns));
  }
}

}  // namespace tessera::frontend
