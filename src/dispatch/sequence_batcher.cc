#include "tessera/dispatch/sequence_batcher.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tessera/common/bytes_tensor.h"

namespace tessera::dispatch {
namespace {

template <typename T>
std::string BytesOf(T value) {
  std::string bytes(sizeof(T), '\0');
  std::memcpy(bytes.data(), &value, sizeof(T));
  return bytes;
}

// A flag's value in its control's type (INT32, FP32 or BOOL: the config parser allows no other).
std::string FlagBytes(const SequenceControl& control, bool on) {
  const double value = on ? control.true_value : control.false_value;
  switch (control.data_type) {
    case DataType::kFp32:
      return BytesOf(static_cast<float>(value));
    case DataType::kBool:
      return BytesOf(static_cast<uint8_t>(value != 0));
    default:
      return BytesOf(static_cast<int32_t>(value));
  }
}

// The correlation ID in the CORRID input's type; Enqueue has checked that it fits. A TYPE_STRING
// CORRID gets a string ID as it is and a numeric one as its decimal text, as one BYTES element.
std::string IdBytes(DataType type, const SequenceFlags& flags) {
  const uint64_t id = flags.id;
  switch (type) {
    case DataType::kString: {
      std::string bytes;
      AppendBytesElement(flags.id_text.empty() ? absl::StrCat(id) : flags.id_text, &bytes);
      return bytes;
    }
    case DataType::kInt64:
      return BytesOf(static_cast<int64_t>(id));
    case DataType::kUint32:
      return BytesOf(static_cast<uint32_t>(id));
    case DataType::kInt32:
      return BytesOf(static_cast<int32_t>(id));
    default:
      return BytesOf(id);
  }
}

uint64_t LargestId(DataType type) {
  switch (type) {
    case DataType::kInt64:
      return static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    case DataType::kUint32:
      return std::numeric_limits<uint32_t>::max();
    case DataType::kInt32:
      return static_cast<uint64_t>(std::numeric_limits<int32_t>::max());
    default:
      return std::numeric_limits<uint64_t>::max();
  }
}

uint64_t StateBytes(const SequenceState& state) {
  // A BYTES state of zeros is all empty strings: each element a zero length prefix.
  const size_t element =
      state.data_type == DataType::kString ? kBytesLengthPrefix : DataTypeByteSize(state.data_type);
  return DenseByteSize(StartShape(state), element).value_or(0);
}

// Whether a state output's shape (without the batch dim) is one the state takes: its rank, and
// its size in each fixed dim.
bool FitsStateDims(const Shape& shape, const Shape& dims) {
  if (shape.size() != dims.size()) return false;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] >= 0 ? shape[d] != dims[d] : shape[d] < 0) return false;
  }
  return true;
}

}  // namespace

std::string SequenceFlags::IdString() const {
  return id_text.empty() ? absl::StrCat(id) : absl::StrCat("\"", id_text, "\"");
}

struct SequenceBatcher::AddedInputs {
  std::vector<std::string> buffers;  // the views point into these
  std::vector<TensorView> views;
};

SequenceBatcher::SequenceBatcher(SequenceBatcherOptions options, std::shared_ptr<ModelQueue> queue,
                                 std::shared_ptr<ModelStats> stats, const Clock* clock)
    : options_(std::move(options)),
      queue_(std::move(queue)),
      stats_(std::move(stats)),
      clock_(clock != nullptr ? clock : &steady_clock_) {}

SequenceBatcher::Key SequenceBatcher::KeyOf(const SequenceFlags& flags) {
  // Apart, so the number 7 and the string "7" are two sequences (as in Triton).
  return flags.id_text.empty() ? absl::StrCat("#", flags.id) : absl::StrCat("$", flags.id_text);
}

Status SequenceBatcher::Enqueue(std::unique_ptr<Request>&& request, const SequenceFlags& flags) {
  const std::string& model = options_.model_label;
  if (!flags.has_id()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inference request to model '", model,
        "' must specify a non-zero or non-empty correlation ID (the sequence_id parameter): the "
        "model is stateful (sequence_batching)"));
  }
  if (options_.batched && request->batch_size != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inference request to model '", model, "' must have batch size 1, got ",
        request->batch_size, ": a stateful model (sequence_batching) takes one row per request"));
  }
  for (const SequenceControl& control : options_.controls) {
    if (control.kind != SequenceControl::Kind::kCorrelationId) continue;
    if (control.data_type == DataType::kString) continue;  // takes any ID (IdBytes)
    if (!flags.id_text.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", flags.IdString(), " to model '", model, "': the model's CORRID input '",
          control.input_name, "' is ", std::string(DataTypeToConfigName(control.data_type)),
          ", so the sequence_id must be a number, not a string"));
    }
    if (flags.id > LargestId(control.data_type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", flags.IdString(), " to model '", model,
          "': the ID does not fit the "
          "model's CORRID input '",
          control.input_name, "' (", std::string(DataTypeToConfigName(control.data_type)), ")"));
    }
  }

  const Key key = KeyOf(flags);
  const uint64_t now = clock_->NowNs();
  bool launch = false;
  {
    std::lock_guard lock(mu_);
    if (!accepting_) {
      return absl::AbortedError(
          absl::StrCat("model '", model, "' is not accepting requests (unloading)"));
    }
    ReleaseIdleLocked(now);
    auto it = sequences_.find(key);
    if (it == sequences_.end() && !flags.start) {
      return absl::InvalidArgumentError(absl::StrCat(
          "inference request for sequence ", flags.IdString(), " to model '", model,
          "' must specify the START flag on the first request of the sequence (the sequence is "
          "not active: never started, ended, or released after ",
          options_.idle_timeout_ns / 1000, " us idle, max_sequence_idle_microseconds)"));
    }
    Sequence& sequence = sequences_[key];
    sequence.last_request_ns = now;
    sequence.waiting.push_back(Held{std::move(request), flags});
    ++in_batcher_;
    if (!sequence.running) {
      sequence.running = true;
      launch = true;
    }
  }
  if (launch) LaunchNext(key);
  return absl::OkStatus();
}

std::shared_ptr<SequenceBatcher::AddedInputs> SequenceBatcher::MakeAddedInputs(
    const SequenceFlags& flags, const std::vector<std::string>& state,
    const std::vector<Shape>& shapes) const {
  auto added = std::make_shared<AddedInputs>();
  added->buffers.reserve(options_.controls.size() + options_.states.size());
  const Shape control_shape = options_.batched ? Shape{1, 1} : Shape{1};
  for (const SequenceControl& control : options_.controls) {
    switch (control.kind) {
      case SequenceControl::Kind::kStart:
        added->buffers.push_back(FlagBytes(control, flags.start));
        break;
      case SequenceControl::Kind::kEnd:
        added->buffers.push_back(FlagBytes(control, flags.end));
        break;
      case SequenceControl::Kind::kReady:
        added->buffers.push_back(FlagBytes(control, true));  // every row holds a request
        break;
      case SequenceControl::Kind::kCorrelationId:
        added->buffers.push_back(IdBytes(control.data_type, flags));
        break;
    }
    std::string& bytes = added->buffers.back();
    added->views.push_back(TensorView{control.input_name, control.data_type, control_shape,
                                      bytes.data(), bytes.size()});
  }
  for (size_t k = 0; k < options_.states.size(); ++k) {
    const SequenceState& spec = options_.states[k];
    if (k < state.size()) {
      added->buffers.push_back(state[k]);
    } else if (spec.initial_data) {
      added->buffers.push_back(*spec.initial_data);  // the initial state, from its data_file
    } else {
      added->buffers.emplace_back(StateBytes(spec), '\0');  // the initial state: zeros
    }
    Shape shape = k < shapes.size() ? shapes[k] : StartShape(spec);
    if (options_.batched) shape.insert(shape.begin(), 1);
    std::string& bytes = added->buffers.back();
    added->views.push_back(
        TensorView{spec.input_name, spec.data_type, std::move(shape), bytes.data(), bytes.size()});
  }
  return added;
}

void SequenceBatcher::LaunchNext(const Key& key) {
  for (;;) {
    Held held;
    std::shared_ptr<AddedInputs> added;
    Status refusal;
    {
      std::lock_guard lock(mu_);
      auto it = sequences_.find(key);
      if (it == sequences_.end()) return;  // not reached: a running sequence is never erased
      Sequence& sequence = it->second;
      if (sequence.waiting.empty()) {
        sequence.running = false;
        if (!sequence.live) sequences_.erase(it);
        return;
      }
      held = std::move(sequence.waiting.front());
      sequence.waiting.pop_front();
      if (held.flags.start) {
        if (!sequence.live) ++live_;
        sequence.live = true;
        sequence.state.clear();
        sequence.state_shapes.clear();
        stats_->SetActiveSequences(live_);
      }
      if (!sequence.live) {
        refusal = absl::InvalidArgumentError(absl::StrCat(
            "inference request for sequence ", held.flags.IdString(), " to model '",
            options_.model_label,
            "' must specify the START flag: the sequence ended at an earlier request"));
      } else if (held.request->cancelled && held.request->cancelled()) {
        refusal = absl::CancelledError(
            "request cancelled by the client while it waited for "
            "its sequence's earlier requests");
      } else {
        added = MakeAddedInputs(held.flags, sequence.state, sequence.state_shapes);
      }
    }
    Request& request = *held.request;
    auto answer = std::make_shared<CompletionCallback>(std::move(request.done));
    if (!refusal.ok()) {
      stats_->RecordFailure("OTHER", clock_->NowNs() - request.arrival_ns);
      (*answer)(refusal);
      Settle(1);
      continue;
    }
    request.inputs.insert(request.inputs.end(), added->views.begin(), added->views.end());
    if (request.requested_outputs.empty()) request.requested_outputs = options_.outputs;
    for (const SequenceState& state : options_.states) {
      request.requested_outputs.push_back(state.output_name);
    }
    request.done = [self = shared_from_this(), key, flags = held.flags, added,
                    answer](StatusOr<Response> result) {
      self->Finished(key, flags, result);
      (*answer)(std::move(result));
      self->Settle(1);
    };
    Status queued = queue_->EnqueueAdmitted(std::move(held.request));
    if (queued.ok()) return;
    // The queue was shut down (an unload): this and every later request of the sequence fail.
    stats_->RecordFailure("REJECTED", clock_->NowNs() - request.arrival_ns);
    (*answer)(absl::UnavailableError(queued.message()));
    Settle(1);
  }
}

void SequenceBatcher::Finished(const Key& key, const SequenceFlags& flags,
                               StatusOr<Response>& result) {
  std::vector<std::string> next_state;
  std::vector<Shape> next_shapes;
  if (result.ok()) {
    // Take each state output out of the answer, checked against the config's state.
    for (const SequenceState& spec : options_.states) {
      auto found = std::find_if(result->outputs.begin(), result->outputs.end(),
                                [&](const OutputTensor& t) { return t.name == spec.output_name; });
      if (found == result->outputs.end()) {
        result = absl::InternalError(absl::StrCat(
            "model '", options_.model_label, "' gave no state output '", spec.output_name, "'"));
        break;
      }
      Shape expected = spec.dims;
      Shape shape = found->shape;
      const bool row = !options_.batched || (!shape.empty() && shape[0] == 1);
      if (options_.batched) {
        expected.insert(expected.begin(), 1);
        if (!shape.empty()) shape.erase(shape.begin());
      }
      if (found->dtype != spec.data_type || !row || !FitsStateDims(shape, spec.dims)) {
        result = absl::InvalidArgumentError(absl::StrCat(
            "model '", options_.model_label, "' gave state output '", spec.output_name, "' as ",
            std::string(DataTypeToConfigName(found->dtype)), " ", ShapeToString(found->shape),
            ", but its state is ", std::string(DataTypeToConfigName(spec.data_type)), " ",
            ShapeToString(expected), " (sequence_batching.state; -1 = any size)"));
        break;
      }
      next_state.push_back(std::move(found->bytes));
      next_shapes.push_back(std::move(shape));
      result->outputs.erase(found);
    }
  }
  {
    std::lock_guard lock(mu_);
    Sequence& sequence = sequences_[key];
    // A failed request leaves the state as it was: the sequence goes on from its last good step.
    if (result.ok() && sequence.live) {
      sequence.state = std::move(next_state);
      sequence.state_shapes = std::move(next_shapes);
    }
    if (flags.end && sequence.live) {
      sequence.live = false;
      --live_;
      sequence.state.clear();
      sequence.state_shapes.clear();
      stats_->SetActiveSequences(live_);
    }
    sequence.last_request_ns = clock_->NowNs();
  }
  LaunchNext(key);
}

void SequenceBatcher::ReleaseIdleLocked(uint64_t now_ns) {
  // A scan per quarter of the timeout at most: a sequence is released at most 25 % late.
  const uint64_t every = std::max<uint64_t>(options_.idle_timeout_ns / 4, 1'000'000);
  if (now_ns - last_sweep_ns_ < every) return;
  last_sweep_ns_ = now_ns;
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    const Sequence& sequence = it->second;
    if (!sequence.running && sequence.waiting.empty() &&
        now_ns - sequence.last_request_ns > options_.idle_timeout_ns) {
      if (sequence.live) --live_;
      it = sequences_.erase(it);
    } else {
      ++it;
    }
  }
  stats_->SetActiveSequences(live_);
}

void SequenceBatcher::Settle(size_t n) {
  std::lock_guard lock(mu_);
  in_batcher_ -= n;
  if (in_batcher_ == 0) idle_cv_.notify_all();
}

void SequenceBatcher::StopAccepting() {
  std::lock_guard lock(mu_);
  accepting_ = false;
}

bool SequenceBatcher::WaitIdle(int64_t timeout_ms) {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [this] { return in_batcher_ == 0; });
}

size_t SequenceBatcher::active_sequences() {
  std::lock_guard lock(mu_);
  ReleaseIdleLocked(clock_->NowNs());
  return live_;
}

}  // namespace tessera::dispatch
