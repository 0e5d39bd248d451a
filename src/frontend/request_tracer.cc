#include "request_tracer.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "http_json.h"
#include "spdlog/spdlog.h"
#include "tessera/common/clock.h"
#include "tessera/common/server_config.h"

namespace tessera::frontend {
namespace {

constexpr char kKnownKeys[] = "trace_level, trace_rate, trace_count, log_frequency, trace_file";

// The canonical form of a level written as one or more comma-separated names.
StatusOr<std::string> LevelOf(const std::string& text) {
  std::vector<std::string> levels;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    levels.emplace_back(absl::StripAsciiWhitespace(part));
  }
  return CanonicalTraceLevel(levels);
}

TraceLevels LevelsOf(const std::string& canonical) {
  return {canonical.find("TIMESTAMPS") != std::string::npos,
          canonical.find("TENSORS") != std::string::npos};
}

StatusOr<int64_t> ParseInt(const std::string& key, const std::string& text, int64_t min) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < min) {
    return absl::InvalidArgumentError(absl::StrCat("trace setting '", key,
                                                   "' must be an integer >= ", min, ", got \"",
                                                   text, "\""));
  }
  return value;
}

// A JSON string literal: quotes, backslashes and control characters escaped.
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// The settings `update` makes of `base` (the defaults stand in for cleared keys). `for_model`
// refuses the global-only keys.
StatusOr<TraceSettings> Apply(TraceSettings base, const TraceSettingsUpdate& update,
                              bool for_model) {
  const TraceSettings defaults;
  for (const auto& [key, value] : update.values) {
    if (key == "trace_file") {
      return absl::InvalidArgumentError(
          "trace setting 'trace_file' cannot be changed by a TraceSetting call; set it in "
          "server.yaml (trace.file) or with --trace-file");
    }
    if (for_model && key == "log_frequency") {
      return absl::InvalidArgumentError(
          "trace setting 'log_frequency' is global: send it without a model_name");
    }
    if (key == "trace_level") {
      if (value) {
        StatusOr<std::string> level = LevelOf(*value);
        if (!level.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("trace setting 'trace_level': ", level.status().message()));
        }
        base.level = *std::move(level);
      } else {
        base.level = defaults.level;
      }
    } else if (key == "trace_rate") {
      if (value) {
        TESSERA_ASSIGN_OR_RETURN(base.rate, ParseInt(key, *value, 0));
      } else {
        base.rate = defaults.rate;
      }
    } else if (key == "trace_count") {
      if (value) {
        TESSERA_ASSIGN_OR_RETURN(base.count, ParseInt(key, *value, -1));
      } else {
        base.count = defaults.count;
      }
    } else if (key == "log_frequency") {
      if (value) {
        TESSERA_ASSIGN_OR_RETURN(base.log_frequency, ParseInt(key, *value, 0));
      } else {
        base.log_frequency = defaults.log_frequency;
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown trace setting '", key, "' (known: ", kKnownKeys, ")"));
    }
  }
  return base;
}

// What the level needs: a trace file in mode triton; in mode opentelemetry, no TENSORS level
// (spans carry timestamps only, as Triton's).
Status CheckLevel(const TraceSettings& settings, bool opentelemetry) {
  if (opentelemetry) {
    if (settings.level.find("TENSORS") == std::string::npos) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("trace_level ", settings.level,
                     ": this server traces in mode opentelemetry, which records TIMESTAMPS only"));
  }
  if (settings.level != "OFF" && settings.file.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("trace_level ", settings.level,
                     " needs a trace file, and this server has none: start it with --trace-file "
                     "or trace.file in server.yaml"));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<RequestTracer>> RequestTracer::Create(const TraceSettings& settings) {
  return Create(settings, nullptr);
}

StatusOr<std::unique_ptr<RequestTracer>> RequestTracer::Create(
    const TraceSettings& settings, std::unique_ptr<OtlpExporter> exporter) {
  StatusOr<std::string> level = LevelOf(settings.level);
  if (!level.ok()) return level.status();
  if (settings.rate < 0 || settings.count < -1 || settings.log_frequency < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace rate must be >= 0, count >= -1 and log frequency >= 0; got ",
                     settings.rate, ", ", settings.count, " and ", settings.log_frequency));
  }
  TraceSettings checked = settings;
  checked.level = *std::move(level);
  TESSERA_RETURN_IF_ERROR(CheckLevel(checked, exporter != nullptr));
  std::unique_ptr<RequestTracer> tracer(new RequestTracer(std::move(checked)));
  tracer->exporter_ = std::move(exporter);
  absl::MutexLock lock(&tracer->mu_);
  tracer->RefreshEnabled();
  return tracer;
}

StatusOr<std::unique_ptr<RequestTracer>> RequestTracer::CreateOpenTelemetry(
    const TraceSettings& settings, const OtlpExportSettings& export_settings,
    std::unique_ptr<OtlpSink> sink) {
  if (sink == nullptr) {
    TESSERA_ASSIGN_OR_RETURN(sink, MakeCurlOtlpSink(export_settings));
  }
  const int64_t wall_offset_ns =
      static_cast<int64_t>(WallNs()) - static_cast<int64_t>(MonotonicNs());
  return Create(settings,
                std::make_unique<OtlpExporter>(export_settings, std::move(sink), wall_offset_ns));
}

RequestTracer::~RequestTracer() {
  Status written = Flush();
  if (!written.ok()) spdlog::error("request traces lost: {}", written.message());
}

TraceSettings RequestTracer::Get(const std::string& model) const {
  absl::MutexLock lock(&mu_);
  TraceSettings settings = global_;
  auto it = models_.find(model);
  if (model.empty() || it == models_.end()) return settings;
  settings.level = it->second.level.value_or(settings.level);
  settings.rate = it->second.rate.value_or(settings.rate);
  settings.count = it->second.count.value_or(settings.count);
  return settings;
}

Status RequestTracer::Update(const std::string& model, const TraceSettingsUpdate& update) {
  absl::MutexLock lock(&mu_);
  if (model.empty()) {
    TESSERA_ASSIGN_OR_RETURN(TraceSettings next, Apply(global_, update, false));
    TESSERA_RETURN_IF_ERROR(CheckLevel(next, exporter_ != nullptr));
    global_ = std::move(next);
  } else {
    ModelOverride next = models_[model];
    TraceSettings effective = global_;
    effective.level = next.level.value_or(effective.level);
    effective.rate = next.rate.value_or(effective.rate);
    effective.count = next.count.value_or(effective.count);
    TESSERA_ASSIGN_OR_RETURN(TraceSettings applied, Apply(effective, update, true));
    TESSERA_RETURN_IF_ERROR(CheckLevel(applied, exporter_ != nullptr));
    // Keys the call named become the model's own; keys it cleared follow the global ones again.
    for (const auto& [key, value] : update.values) {
      if (key == "trace_level") {
        next.level = value ? std::optional(applied.level) : std::nullopt;
      } else if (key == "trace_rate") {
        next.rate = value ? std::optional(applied.rate) : std::nullopt;
      } else if (key == "trace_count") {
        next.count = value ? std::optional(applied.count) : std::nullopt;
      }
    }
    models_[model] = next;
  }
  RefreshEnabled();
  return absl::OkStatus();
}

void RequestTracer::RefreshEnabled() {
  // In mode opentelemetry a request with a trace context is traced whatever the count.
  const bool counted = exporter_ == nullptr;
  bool enabled = global_.level != "OFF" && (global_.count != 0 || !counted);
  for (const auto& [name, o] : models_) {
    if (o.level.value_or(global_.level) != "OFF" &&
        (o.count.value_or(global_.count) != 0 || !counted)) {
      enabled = true;
    }
  }
  enabled_.store(enabled, std::memory_order_relaxed);
}

TraceLevels RequestTracer::Sample(const std::string& model, bool has_trace_context) {
  if (!enabled_.load(std::memory_order_relaxed)) return {};
  absl::MutexLock lock(&mu_);
  auto it = models_.find(model);
  ModelOverride* own = it == models_.end() ? nullptr : &it->second;
  const std::string& level = own && own->level ? *own->level : global_.level;
  if (level == "OFF") return {};
  // The caller's trace goes on here whatever the rate and count (Triton's context propagation).
  if (has_trace_context && exporter_) return LevelsOf(level);
  // The rate and count counters belong to whichever settings define them.
  uint64_t& seen = own && own->rate ? own->seen : global_seen_;
  const int64_t rate = own && own->rate ? *own->rate : global_.rate;
  int64_t& count = own && own->count ? *own->count : global_.count;
  if (count == 0 || rate == 0) return {};
  if (seen++ % static_cast<uint64_t>(rate) != 0) return {};
  const TraceLevels levels = LevelsOf(level);
  if (count > 0 && --count == 0) RefreshEnabled();
  return levels;
}

uint64_t RequestTracer::NewTraceId() {
  absl::MutexLock lock(&mu_);
  return next_id_++;
}

void RequestTracer::Record(TraceRecord record) {
  if (exporter_) {
    const uint64_t id = record.id != 0 ? record.id : NewTraceId();
    exporter_->Add(std::move(record), id);
    return;
  }
  std::string json = "{";
  absl::MutexLock lock(&mu_);
  const uint64_t id = record.id != 0 ? record.id : next_id_++;
  absl::StrAppend(&json, "\"id\":", id, ",\"model_name\":", JsonString(record.model_name),
                  ",\"model_version\":", record.model_version,
                  ",\"request_id\":", JsonString(record.request_id));
  if (record.parent_id != 0) absl::StrAppend(&json, ",\"parent_id\":", record.parent_id);
  if (!record.timestamps.empty()) {
    json += ",\"timestamps\":[";
    for (size_t i = 0; i < record.timestamps.size(); ++i) {
      absl::StrAppend(&json, i ? "," : "", "{\"name\":\"", record.timestamps[i].first,
                      "\",\"ns\":", record.timestamps[i].second, "}");
    }
    json += "]";
  }
  if (!record.error.empty()) absl::StrAppend(&json, ",\"error\":", JsonString(record.error));
  json += "}";
  pending_.push_back(std::move(json));
  // Level TENSORS: one entry per tensor under the trace's id, in Triton's form.
  for (const TracedTensor& tensor : record.tensors) {
    pending_.push_back(absl::StrCat(
        "{\"id\":", id, ",\"activity\":\"", tensor.activity,
        "\",\"tensor\":{\"name\":", JsonString(tensor.name), ",\"data\":", JsonString(tensor.data),
        ",\"shape\":", JsonString(tensor.shape), ",\"dtype\":", JsonString(tensor.dtype), "}}"));
  }
  if (global_.log_frequency > 0 &&
      pending_.size() >= static_cast<size_t>(global_.log_frequency)) {
    Status written = WriteLocked();
    if (!written.ok()) spdlog::error("request traces lost: {}", written.message());
  }
}

Status RequestTracer::Flush() {
  if (exporter_) {
    exporter_->Flush();
    return absl::OkStatus();
  }
  absl::MutexLock lock(&mu_);
  return WriteLocked();
}

Status RequestTracer::WriteLocked() {
  if (pending_.empty() || global_.file.empty()) return absl::OkStatus();
  std::string path = global_.file;
  std::vector<std::string>* traces = &pending_;
  if (global_.log_frequency > 0) {
    absl::StrAppend(&path, ".", next_file_index_++);
  } else {
    // One file holds every trace, so it is rewritten whole each time.
    for (std::string& t : pending_) written_.push_back(std::move(t));
    traces = &written_;
  }
  std::ofstream out(path, std::ios::trunc);
  out << "[\n";
  for (size_t i = 0; i < traces->size(); ++i) {
    out << (*traces)[i] << (i + 1 < traces->size() ? ",\n" : "\n");
  }
  out << "]\n";
  out.close();
  const size_t count = traces->size();
  pending_.clear();
  if (!out) {
    return absl::InternalError(absl::StrCat("cannot write ", count, " request traces to ", path));
  }
  return absl::OkStatus();
}

TraceRecord MakeTrace(std::string model, int64_t version, std::string request_id,
                      uint64_t arrival_ns, uint64_t queue_start_ns,
                      const dispatch::RequestTiming* timing, const Status& status) {
  TraceRecord record;
  record.model_name = std::move(model);
  record.model_version = version;
  record.request_id = std::move(request_id);
  const uint64_t end_ns = MonotonicNs();
  record.timestamps.emplace_back("REQUEST_START", arrival_ns);
  record.timestamps.emplace_back("QUEUE_START", queue_start_ns);
  if (timing != nullptr) {
    // The durations were measured back to back, so they are laid end to end from the queue
    // start; never past the answer, whose time is measured here.
    uint64_t t = queue_start_ns;
    for (auto [name, ns] : {std::pair{"COMPUTE_START", timing->queue_ns},
                            std::pair{"COMPUTE_INPUT_END", timing->compute_input_ns},
                            std::pair{"COMPUTE_OUTPUT_START", timing->compute_infer_ns},
                            std::pair{"COMPUTE_END", timing->compute_output_ns}}) {
      t = std::min(t + ns, end_ns);
      record.timestamps.emplace_back(name, t);
    }
  }
  record.timestamps.emplace_back("REQUEST_END", end_ns);
  if (!status.ok()) record.error = std::string(status.message());
  return record;
}

void TracedSteps::StepDone(uint64_t step_id, uint64_t parent_id, const std::string& model,
                           int64_t version, const dispatch::Request& step,
                           const StatusOr<dispatch::Response>& result) {
  // A step is queued as soon as it is made: its queue starts at its arrival.
  TraceRecord record = MakeTrace(model, version, request_id_, step.arrival_ns, step.arrival_ns,
                                 result.ok() ? &result->timing : nullptr, result.status());
  if (!levels_.timestamps) record.timestamps.clear();
  if (levels_.tensors) {
    for (const TensorView& input : step.inputs) {
      if (dispatch::IsAbsent(input)) continue;  // an optional input the step leaves out
      record.tensors.push_back(
          TraceTensor("TENSOR_QUEUE_INPUT", input.name, input.dtype, input.shape,
                      std::string_view(static_cast<const char*>(input.data), input.byte_size)));
    }
    if (result.ok()) {
      for (const dispatch::OutputTensor& output : result->outputs) {
        record.tensors.push_back(TraceTensor("TENSOR_BACKEND_OUTPUT", output.name, output.dtype,
                                             output.shape, output.bytes));
      }
    }
  }
  record.id = step_id;
  record.parent_id = parent_id;
  record.root_id = root_id_;
  record.parent = context_;
  tracer_->Record(std::move(record));
}

TracedTensor TraceTensor(const char* activity, const std::string& name, DataType dtype,
                         const Shape& shape, std::string_view bytes) {
  TracedTensor tensor{activity, name, "", absl::StrJoin(shape, ","),
                      std::string(DataTypeToWireName(dtype))};
  StatusOr<nlohmann::json> values = TensorDataToJson(name, dtype, bytes);
  if (!values.ok()) {
    tensor.data = absl::StrCat("<", values.status().message(), ">");
    return tensor;
  }
  for (size_t i = 0; i < values->size(); ++i) {
    const nlohmann::json& value = (*values)[i];
    if (i > 0) tensor.data += ',';
    if (value.is_string()) {
      tensor.data += value.get_ref<const std::string&>();
    } else if (value.is_boolean()) {
      tensor.data += value.get<bool>() ? "1" : "0";
    } else if (value.is_number_float() && dtype != DataType::kFp64) {
      // The shortest text that reads back as the same float (0.001, not the double's digits).
      char text[32];
      auto [end, ec] = std::to_chars(text, text + sizeof text, value.get<float>());
      tensor.data.append(text, ec == std::errc() ? end : text);
    } else {
      tensor.data += value.dump();
    }
  }
  return tensor;
}

StatusOr<TraceSettingsUpdate> TraceSettingsUpdateFromProto(
    const inference::TraceSettingRequest& request) {
  TraceSettingsUpdate update;
  for (const auto& [key, value] : request.settings()) {
    if (key == "trace_level" && value.value_size() > 1) {  // several levels, each adding detail
      update.values[key] = absl::StrJoin(value.value(), ",");
      continue;
    }
    if (value.value_size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat("trace setting '", key,
                                                     "' takes one value, got ", value.value_size()));
    }
    update.values[key] =
        value.value_size() == 0 ? std::nullopt : std::optional<std::string>(value.value(0));
  }
  return update;
}

void TraceSettingsToProto(const TraceSettings& settings, inference::TraceSettingResponse* response) {
  auto& out = *response->mutable_settings();
  out["trace_file"].add_value(settings.file);
  for (absl::string_view level : absl::StrSplit(settings.level, ',')) {
    out["trace_level"].add_value(std::string(level));
  }
  out["trace_rate"].add_value(std::to_string(settings.rate));
  out["trace_count"].add_value(std::to_string(settings.count));
  out["log_frequency"].add_value(std::to_string(settings.log_frequency));
}

}  // namespace tessera::frontend
