#include "load_client.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <unordered_set>

#include "grpcpp/grpcpp.h"
#include "tessera/common/bytes_tensor.h"
#include "tessera/common/clock.h"
#include "tessera/common/data_type.h"
#include "tessera/common/float16.h"
#include "tessera/common/tensor.h"
#include "tessera/common/yaml_util.h"

namespace tessera::bench {
namespace {

constexpr int64_t kLateThresholdNs = 1'000'000;
constexpr double kMetadataTimeoutS = 5;

std::chrono::system_clock::time_point DeadlineIn(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

void SleepUntilNs(int64_t monotonic_ns) {
  timespec ts;
  ts.tv_sec = monotonic_ns / 1'000'000'000;
  ts.tv_nsec = monotonic_ns % 1'000'000'000;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

std::string Describe(const grpc::Status& s) {
  return absl::StrCat(OutcomeCodeName(s.error_code()), ": ", s.error_message());
}

// `count` random BYTES elements, serialized: each kRandomStringLength lowercase letters and
// digits (perf_analyzer also sends random strings of one length, --string-length).
constexpr size_t kRandomStringLength = 16;
std::string RandomStrings(int64_t count, std::mt19937_64& rng) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string bytes;
  std::string element(kRandomStringLength, ' ');
  for (int64_t i = 0; i < count; ++i) {
    for (char& c : element) c = kAlphabet[pick(rng)];
    AppendBytesElement(element, &bytes);
  }
  return bytes;
}

// Fills `bytes` for one input: zeros, or random values of `type` (floats in [0, 1), integers in
// [0, 100), booleans 0/1).
void FillRandom(DataType type, std::string& bytes, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const size_t size = DataTypeByteSize(type);
  const size_t n = size ? bytes.size() / size : 0;
  char* p = bytes.data();
  auto put = [&](size_t i, auto value) {
    std::memcpy(p + i * sizeof(value), &value, sizeof(value));
  };
  for (size_t i = 0; i < n; ++i) {
    const double u = unit(rng);
    switch (type) {
      case DataType::kFp32:
        put(i, static_cast<float>(u));
        break;
      case DataType::kFp64:
        put(i, u);
        break;
      case DataType::kFp16:
        put(i, FloatToFp16(static_cast<float>(u)));
        break;
      case DataType::kBf16:
        put(i, FloatToBf16(static_cast<float>(u)));
        break;
      case DataType::kBool:
        put(i, static_cast<uint8_t>(u < 0.5));
        break;
      case DataType::kInt8:
        put(i, static_cast<int8_t>(u * 100));
        break;
      case DataType::kUint8:
        put(i, static_cast<uint8_t>(u * 100));
        break;
      case DataType::kInt16:
        put(i, static_cast<int16_t>(u * 100));
        break;
      case DataType::kUint16:
        put(i, static_cast<uint16_t>(u * 100));
        break;
      case DataType::kInt32:
        put(i, static_cast<int32_t>(u * 100));
        break;
      case DataType::kUint32:
        put(i, static_cast<uint32_t>(u * 100));
        break;
      case DataType::kInt64:
        put(i, static_cast<int64_t>(u * 100));
        break;
      case DataType::kUint64:
        put(i, static_cast<uint64_t>(u * 100));
        break;
      default:
        return;
    }
  }
}

}  // namespace

void Progress::Reset(double total) {
  intended = sent = ok = errors = dropped = late = in_flight = 0;
  run_start_ns = 0;
  total_s = total;
}

// One request on the wire. Owned by LiveCalls from Send until its callback finishes.
struct LoadClient::Call {
  grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  Outcome* out = nullptr;
  const std::function<void(Outcome*)>* done = nullptr;  // closed loop: sends the next request
};

// Outstanding calls, so that the drain can cancel them and wait for the last callback.
struct LoadClient::LiveCalls {
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_set<Call*> calls;                              // guarded by mu
  std::map<std::pair<int32_t, int>, std::string> first_errors;  // guarded by mu
  std::atomic<bool> cancelling{false};
};

LoadClient::LoadClient(Scenario scenario)
    : scenario_(std::move(scenario)), live_(std::make_unique<LiveCalls>()) {}

LoadClient::~LoadClient() {
  if (live_) DrainOrCancel(0);
}

StatusOr<std::unique_ptr<LoadClient>> LoadClient::Create(const Scenario& scenario,
                                                         double connect_timeout_s) {
  TESSERA_RETURN_IF_ERROR(ValidateScenario(scenario));
  std::unique_ptr<LoadClient> client(new LoadClient(scenario));
  TESSERA_RETURN_IF_ERROR(client->Connect(connect_timeout_s));
  TESSERA_RETURN_IF_ERROR(client->Prepare());
  return client;
}

namespace {

StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(const ClientTls& tls) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  if (tls.private_key.empty() != tls.cert_chain.empty()) {
    return absl::InvalidArgumentError(
        "--ssl-grpc-private-key-file and --ssl-grpc-certificate-chain-file go together");
  }
  grpc::SslCredentialsOptions options;
  for (auto [path, pem] : {std::pair{&tls.root_certs, &options.pem_root_certs},
                           {&tls.private_key, &options.pem_private_key},
                           {&tls.cert_chain, &options.pem_cert_chain}}) {
    if (path->empty()) continue;
    TESSERA_ASSIGN_OR_RETURN(*pem, yaml::ReadFileToString(*path));
  }
  return grpc::SslCredentials(options);
}

}  // namespace

Status LoadClient::Connect(double timeout_s) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                           Credentials(scenario_.tls));
  for (int i = 0; i < scenario_.channels; ++i) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    // A channel of its own per index: separate TCP connections rather than one shared subchannel.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("tessera.bench.channel", i);
    auto channel = grpc::CreateCustomChannel(scenario_.server, credentials, args);
    if (!channel->WaitForConnected(DeadlineIn(timeout_s))) {
      return absl::UnavailableError(
          absl::StrCat("cannot reach the server at ", scenario_.server, " within ", timeout_s,
                       " s (is it running? set the address with --server or `server:` in the "
                       "scenario",
                       scenario_.tls.enabled
                           ? "; over TLS: does the server use TLS, and do the root certificates "
                             "sign its certificate?)"
                           : "; a TLS server needs --ssl-grpc-use-ssl)"));
    }
    channels_.push_back(channel);
    stubs_.push_back(inference::GRPCInferenceService::NewStub(channel));
  }
  return absl::OkStatus();
}

Status LoadClient::Prepare() {
  std::mt19937_64 rng(scenario_.seed ^ 0x7e55e7aULL);
  for (const ModelLoad& m : scenario_.models) {
    std::vector<TensorSpec> inputs = m.inputs;
    if (inputs.empty()) {
      inference::ModelMetadataRequest mreq;
      mreq.set_name(m.name);
      mreq.set_version(m.version);
      inference::ModelMetadataResponse meta;
      grpc::ClientContext ctx;
      ctx.set_deadline(DeadlineIn(kMetadataTimeoutS));
      grpc::Status s = stubs_[0]->ModelMetadata(&ctx, mreq, &meta);
      if (!s.ok()) {
        return absl::Status(
            static_cast<absl::StatusCode>(s.error_code()),
            absl::StrCat("model \"", m.name, "\"",
                         m.version.empty() ? "" : absl::StrCat(" version ", m.version),
                         ": the server at ", scenario_.server,
                         " refused its metadata: ", Describe(s)));
      }
      inference::ModelConfigRequest creq;
      creq.set_name(m.name);
      creq.set_version(m.version);
      inference::ModelConfigResponse config;
      grpc::ClientContext cctx;
      cctx.set_deadline(DeadlineIn(kMetadataTimeoutS));
      s = stubs_[0]->ModelConfig(&cctx, creq, &config);
      if (!s.ok()) {
        return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                            absl::StrCat("model \"", m.name, "\": ModelConfig failed at ",
                                         scenario_.server, ": ", Describe(s)));
      }
      const int64_t max_batch = config.config().max_batch_size();
      if (max_batch == 0 && m.batch_size != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model \"", m.name, "\" does not batch (max_batch_size 0): batch_size must be 1"));
      }
      if (max_batch > 0 && m.batch_size > max_batch) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model \"", m.name, "\": batch_size ", m.batch_size, " > max_batch_size ", max_batch));
      }
      for (const auto& t : meta.inputs()) {
        TensorSpec spec{t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}};
        if (max_batch > 0 && !spec.shape.empty()) spec.shape[0] = m.batch_size;
        for (int64_t d : spec.shape) {
          if (d < 0) {
            return absl::InvalidArgumentError(absl::StrCat(
                "model \"", m.name, "\": input \"", t.name(),
                "\" has a variable dimension; give its shape under `inputs:` in the scenario"));
          }
        }
        inputs.push_back(std::move(spec));
      }
    }
    inference::ModelInferRequest req;
    req.set_model_name(m.name);
    req.set_model_version(m.version);
    int64_t total_bytes = 0;
    for (const TensorSpec& spec : inputs) {
      std::optional<DataType> type = DataTypeFromWireName(spec.datatype);
      if (!type || (DataTypeByteSize(*type) == 0 && *type != DataType::kString)) {
        return absl::InvalidArgumentError(absl::StrCat("model \"", m.name, "\": input \"",
                                                       spec.name, "\" has datatype ", spec.datatype,
                                                       ", which the bench cannot fill"));
      }
      // The shape comes from the server's metadata or the scenario: checked before allocating.
      const bool bytes_tensor = *type == DataType::kString;
      // BYTES zeros are empty strings: a 4-byte zero length per element.
      std::optional<uint64_t> size =
          DenseByteSize(spec.shape, bytes_tensor ? kBytesLengthPrefix : DataTypeByteSize(*type));
      if (!size || *size > static_cast<uint64_t>(INT32_MAX)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model \"", m.name, "\": input \"", spec.name, "\" of shape ",
            ShapeToString(spec.shape), " is larger than the 2 GiB a gRPC message can carry"));
      }
      std::string bytes(*size, '\0');
      if (m.fill == InputFill::kRandom && bytes_tensor) {
        bytes = RandomStrings(ElementCount(spec.shape), rng);
      } else if (m.fill == InputFill::kRandom) {
        FillRandom(*type, bytes, rng);
      } else if (m.fill == InputFill::kFiles) {
        auto it = m.input_files.find(spec.name);
        if (it == m.input_files.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "model \"", m.name, "\": no file for input \"", spec.name, "\" in input_files"));
        }
        std::ifstream in(it->second, std::ios::binary);
        if (!in) return absl::NotFoundError(absl::StrCat("cannot open input file ", it->second));
        std::stringstream buffer;
        buffer << in.rdbuf();
        if (bytes_tensor) {  // the file holds the serialized elements, as on the wire
          TESSERA_RETURN_IF_ERROR(CheckBytesElements(
              absl::StrCat("input file ", it->second, " for BYTES input \"", spec.name, "\""),
              buffer.str().data(), buffer.str().size(), ElementCount(spec.shape)));
        } else if (buffer.str().size() != bytes.size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "input file ", it->second, " has ", buffer.str().size(), " bytes; input \"",
              spec.name, "\" of model \"", m.name, "\" needs ", bytes.size()));
        }
        bytes = buffer.str();
      }
      auto* tensor = req.add_inputs();
      tensor->set_name(spec.name);
      tensor->set_datatype(spec.datatype);
      for (int64_t d : spec.shape) tensor->add_shape(d);
      total_bytes += static_cast<int64_t>(bytes.size());
      req.add_raw_input_contents(std::move(bytes));
    }
    requests_.push_back(std::move(req));
    request_bytes_.push_back(total_bytes);
  }
  return absl::OkStatus();
}

StatusOr<RunResult> LoadClient::RunOpen(const std::vector<std::vector<int64_t>>& offsets,
                                        int64_t measure_begin_ns, int64_t measure_end_ns) {
  if (offsets.size() != scenario_.models.size()) {
    return absl::InvalidArgumentError("one offset list per model expected");
  }
  RunResult result;
  result.measure_begin_ns = measure_begin_ns;
  result.measure_end_ns = measure_end_ns;
  std::vector<std::pair<int64_t, int32_t>> schedule;
  for (size_t m = 0; m < offsets.size(); ++m) {
    for (int64_t t : offsets[m]) schedule.emplace_back(t, static_cast<int32_t>(m));
  }
  std::sort(schedule.begin(), schedule.end());
  result.outcomes.resize(schedule.size());
  for (size_t i = 0; i < schedule.size(); ++i) {
    result.outcomes[i].scheduled_ns = schedule[i].first;
    result.outcomes[i].model = schedule[i].second;
  }
  progress_.Reset(static_cast<double>(measure_end_ns) * 1e-9);
  progress_.intended = static_cast<int64_t>(schedule.size());
  live_->cancelling = false;
  // Wake-ups within a microsecond rather than the default 50 µs timer slack.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  const int64_t t0 = static_cast<int64_t>(MonotonicNs()) + 20'000'000;  // 20 ms to get going
  progress_.run_start_ns = t0;
  for (Outcome& o : result.outcomes) {
    const int64_t due = t0 + o.scheduled_ns;
    if (static_cast<int64_t>(MonotonicNs()) < due) SleepUntilNs(due);
    if (progress_.in_flight.load() >= scenario_.max_in_flight) {
      o.code = kNotSent;
      ++progress_.dropped;
      continue;
    }
    StartCall(&o, t0, nullptr);
  }
  DrainOrCancel(scenario_.drain_s);
  result.wall_s = static_cast<double>(static_cast<int64_t>(MonotonicNs()) - t0) * 1e-9;
  CollectErrors(&result);
  return result;
}

void LoadClient::StartCall(Outcome* out, int64_t t0, const std::function<void(Outcome*)>* done) {
  auto* call = new Call;
  call->out = out;
  call->done = done;
  call->ctx.set_deadline(DeadlineIn(scenario_.request_timeout_s));
  {
    std::lock_guard<std::mutex> lock(live_->mu);
    live_->calls.insert(call);
  }
  ++progress_.in_flight;
  const int64_t now = static_cast<int64_t>(MonotonicNs()) - t0;
  out->sent_ns = now;
  ++progress_.sent;
  if (now - out->scheduled_ns > kLateThresholdNs) ++progress_.late;
  const size_t channel = next_channel_.fetch_add(1) % stubs_.size();
  stubs_[channel]->async()->ModelInfer(
      &call->ctx, &requests_[out->model], &call->response, [this, call, t0](grpc::Status status) {
        Outcome* o = call->out;
        o->done_ns = static_cast<int64_t>(MonotonicNs()) - t0;
        int code = status.error_code();
        if (code == grpc::StatusCode::CANCELLED && live_->cancelling) code = kUnfinished;
        o->code = code;
        if (code == 0) {
          ++progress_.ok;
        } else {
          ++progress_.errors;
          if (code != kUnfinished) {
            std::lock_guard<std::mutex> lock(live_->mu);
            live_->first_errors.emplace(std::make_pair(o->model, code), status.error_message());
          }
        }
        // The next closed-loop request goes out before this one counts as finished, so the
        // drain never sees zero calls while a successor is about to be sent.
        if (call->done) (*call->done)(o);
        std::lock_guard<std::mutex> lock(live_->mu);
        live_->calls.erase(call);
        delete call;
        --progress_.in_flight;
        if (live_->calls.empty()) live_->cv.notify_all();
      });
}

void LoadClient::DrainOrCancel(double drain_s) {
  std::unique_lock<std::mutex> lock(live_->mu);
  live_->cv.wait_for(lock, std::chrono::microseconds(static_cast<int64_t>(drain_s * 1e6)),
                     [&] { return live_->calls.empty(); });
  if (live_->calls.empty()) return;
  live_->cancelling = true;
  for (Call* call : live_->calls) call->ctx.TryCancel();
  live_->cv.wait(lock, [&] { return live_->calls.empty(); });
}

void LoadClient::CollectErrors(RunResult* result) {
  std::lock_guard<std::mutex> lock(live_->mu);
  for (const auto& [key, message] : live_->first_errors) {
    result->error_examples.push_back(
        {scenario_.models[key.first].name, OutcomeCodeName(key.second), message});
  }
  live_->first_errors.clear();
}

StatusOr<RunResult> LoadClient::RunClosed(const std::vector<int>& concurrency) {
  if (concurrency.size() != scenario_.models.size()) {
    return absl::InvalidArgumentError("one concurrency per model expected");
  }
  RunResult result;
  const double total_s = scenario_.warmup_s + scenario_.duration_s;
  result.measure_begin_ns = static_cast<int64_t>(scenario_.warmup_s * 1e9);
  result.measure_end_ns = static_cast<int64_t>(total_s * 1e9);
  progress_.Reset(total_s);
  live_->cancelling = false;
  std::mutex outcomes_mu;
  std::atomic<bool> stop{false};
  const int64_t t0 = static_cast<int64_t>(MonotonicNs());
  progress_.run_start_ns = t0;
  const int64_t end_ns = result.measure_end_ns;
  struct Slot {
    Outcome current;
    std::function<void(Outcome*)> next;
  };
  std::vector<std::unique_ptr<Slot>> slots;
  for (size_t m = 0; m < concurrency.size(); ++m) {
    for (int c = 0; c < concurrency[m]; ++c) {
      auto slot = std::make_unique<Slot>();
      Slot* s = slot.get();
      s->next = [&, s, m](Outcome* o) {
        {
          std::lock_guard<std::mutex> lock(outcomes_mu);
          result.outcomes.push_back(*o);
        }
        const int64_t now = static_cast<int64_t>(MonotonicNs()) - t0;
        if (stop.load() || now >= end_ns) return;
        *o = Outcome{};
        o->model = static_cast<int32_t>(m);
        o->scheduled_ns = now;  // closed loop: due as soon as the previous answer is in
        ++progress_.intended;
        StartCall(o, t0, &s->next);
      };
      slots.push_back(std::move(slot));
    }
  }
  for (size_t i = 0, m = 0; m < concurrency.size(); ++m) {
    for (int c = 0; c < concurrency[m]; ++c, ++i) {
      Slot* s = slots[i].get();
      s->current.model = static_cast<int32_t>(m);
      s->current.scheduled_ns = static_cast<int64_t>(MonotonicNs()) - t0;
      ++progress_.intended;
      StartCall(&s->current, t0, &s->next);
    }
  }
  SleepUntilNs(t0 + end_ns);
  stop = true;
  DrainOrCancel(scenario_.drain_s);
  result.wall_s = static_cast<double>(static_cast<int64_t>(MonotonicNs()) - t0) * 1e-9;
  CollectErrors(&result);
  std::sort(result.outcomes.begin(), result.outcomes.end(),
            [](const Outcome& a, const Outcome& b) { return a.scheduled_ns < b.scheduled_ns; });
  return result;
}

}  // namespace tessera::bench
