#include "ensemble_runner.h"

#include <algorithm>
#include <future>
#include <map>
#include <mutex>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tessera/common/clock.h"
#include "tessera/common/data_type.h"

namespace tessera::server {
namespace {

using dispatch::Request;
using dispatch::Response;
using repository::EnsembleStep;
using repository::FindTensor;
using repository::ModelConfig;
using repository::TensorConfig;

std::string TypeName(DataType type) { return std::string(DataTypeToConfigName(type)); }

// Two dims lists that can describe one tensor: the same rank, each dim equal or variable (-1).
bool DimsFit(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i] && a[i] != -1 && b[i] != -1) return false;
  }
  return true;
}

std::string DimsText(const Shape& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

std::string StepLabel(const ModelConfig& ensemble, size_t s) {
  return absl::StrCat("ensemble '", ensemble.name, "' step[", s, "] (model '",
                      ensemble.ensemble_steps[s].model_name, "')");
}

// Whether `shape` is one `tensor` takes: the batch dim first (1..max_batch_size) when the model
// batches, then its dims (-1 = any size).
bool ShapeFits(const TensorConfig& tensor, const Shape& shape, int max_batch_size) {
  const size_t offset = max_batch_size > 0 ? 1 : 0;
  if (shape.size() != tensor.dims.size() + offset) return false;
  if (offset == 1 && (shape[0] < 1 || shape[0] > max_batch_size)) return false;
  for (size_t d = 0; d < tensor.dims.size(); ++d) {
    if (tensor.dims[d] >= 0 && tensor.dims[d] != shape[d + offset]) return false;
  }
  return true;
}

Shape FullDims(const TensorConfig& tensor, int max_batch_size) {
  Shape dims;
  if (max_batch_size > 0) dims.push_back(-1);
  dims.insert(dims.end(), tensor.dims.begin(), tensor.dims.end());
  return dims;
}

// An ensemble tensor while a request runs: an ensemble input (a view of the request's bytes) or a
// step's output (owned).
struct HeldTensor {
  DataType dtype = DataType::kInvalid;
  Shape shape;
  std::string bytes;
  void* data = nullptr;
  size_t size = 0;
  bool absent = false;  // an optional ensemble input the request leaves out
};

// One ensemble request on its way through the steps. Owned by the step callbacks in flight: it
// lives until the last one has run, since their requests view its tensors and the ensemble
// request's inputs.
class EnsembleCall : public std::enable_shared_from_this<EnsembleCall> {
 public:
  using Done = std::function<void(StatusOr<Response>)>;

  EnsembleCall(std::shared_ptr<const ModelConfig> config, ComposingModelLookup lookup,
               const Request* request, Done done)
      : config_(std::move(config)),
        lookup_(std::move(lookup)),
        request_(request),
        done_(std::move(done)),
        started_(config_->ensemble_steps.size(), false) {}

  void Start() {
    std::vector<Launch> launches;
    {
      std::lock_guard lock(mu_);
      for (size_t k = 0; k < config_->inputs.size() && k < request_->inputs.size(); ++k) {
        const TensorView& input = request_->inputs[k];
        auto held = std::make_unique<HeldTensor>();
        held->dtype = input.dtype;
        held->shape = input.shape;
        held->data = input.data;
        held->size = input.byte_size;
        held->absent = dispatch::IsAbsent(input);
        tensors_[config_->inputs[k].name] = std::move(held);
      }
      launches = TakeRunnableLocked();
      if (launches.empty()) {
        error_ = absl::InvalidArgumentError(absl::StrCat(
            "ensemble '", config_->name, "': no step can start from the request's inputs"));
      }
    }
    if (launches.empty()) {
      Finish();
      return;
    }
    StartSteps(std::move(launches));
  }

 private:
  struct Launch {
    size_t step = 0;
    frontend::ReadyModel model;
    std::unique_ptr<Request> request;
    Status error;  // set instead of `request` when the step could not be built
  };

  // Steps not yet started whose tensors all exist, with their requests built (views into
  // tensors_, which stay put: the map holds them by pointer).
  std::vector<Launch> TakeRunnableLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<Launch> launches;
    if (!error_.ok()) return launches;
    for (size_t s = 0; s < started_.size(); ++s) {
      const EnsembleStep& step = config_->ensemble_steps[s];
      const bool runnable =
          !started_[s] &&
          std::all_of(step.input_map.begin(), step.input_map.end(),
                      [&](const auto& entry) { return tensors_.count(entry.second); });
      if (!runnable) continue;
      started_[s] = true;
      ++in_flight_;
      Launch launch;
      launch.step = s;
      PrepareLocked(launch);
      launches.push_back(std::move(launch));
    }
    return launches;
  }

  // Looks up the step's model and builds its request, or sets launch.error.
  void PrepareLocked(Launch& launch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const EnsembleStep& step = config_->ensemble_steps[launch.step];
    StatusOr<frontend::ReadyModel> model = lookup_(step.model_name, step.model_version);
    if (!model.ok()) {
      launch.error = absl::UnavailableError(model.status().message());
      return;
    }
    launch.model = std::move(model).value();
    StatusOr<std::unique_ptr<Request>> request = BuildStepRequestLocked(launch.step, launch.model);
    if (request.ok()) {
      launch.request = std::move(request).value();
    } else {
      launch.error = request.status();
    }
  }

  StatusOr<std::unique_ptr<Request>> BuildStepRequestLocked(size_t s,
                                                            const frontend::ReadyModel& model)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const EnsembleStep& step = config_->ensemble_steps[s];
    const ModelConfig& composing = *model.config;
    const bool batched = composing.max_batch_size > 0;
    auto request = std::make_unique<Request>();
    size_t mapped_inputs = 0;
    std::optional<size_t> first_given;  // in request->inputs: the batch size is its rows
    for (const TensorConfig& input : composing.inputs) {
      auto mapped = std::find_if(step.input_map.begin(), step.input_map.end(),
                                 [&](const auto& entry) { return entry.first == input.name; });
      if (mapped == step.input_map.end()) {
        if (!input.optional) {
          return absl::InvalidArgumentError(
              absl::StrCat("the step gives the model's input '", input.name, "' no tensor"));
        }
        request->inputs.push_back(dispatch::AbsentInput(input.name, input.data_type));
        continue;
      }
      ++mapped_inputs;
      const HeldTensor& tensor = *tensors_.at(mapped->second);
      if (tensor.absent) {  // left out of the ensemble's request: left out of the step's too
        if (!input.optional) {
          return absl::InvalidArgumentError(
              absl::StrCat("the request leaves out the ensemble's optional input '", mapped->second,
                           "', which the model takes as its required input '", input.name, "'"));
        }
        request->inputs.push_back(dispatch::AbsentInput(input.name, input.data_type));
        continue;
      }
      if (tensor.dtype != input.data_type) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor '", mapped->second, "' is ", TypeName(tensor.dtype), ", the model's input '",
            input.name, "' takes ", TypeName(input.data_type)));
      }
      if (!ShapeFits(input, tensor.shape, composing.max_batch_size)) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", mapped->second, "' has shape ", ShapeToString(tensor.shape),
                         ", the model's input '", input.name, "' takes ",
                         ShapeToString(FullDims(input, composing.max_batch_size))));
      }
      if (batched && first_given && request->inputs[*first_given].shape[0] != tensor.shape[0]) {
        const TensorView& first = request->inputs[*first_given];
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", mapped->second, "' has batch size ", tensor.shape[0],
                         ", the step's '", first.name, "' has ", first.shape[0]));
      }
      Shape shape =
          input.reshape ? repository::ToModelShape(input, tensor.shape, batched) : tensor.shape;
      request->inputs.push_back(
          TensorView{input.name, tensor.dtype, std::move(shape), tensor.data, tensor.size});
      if (!first_given) first_given = request->inputs.size() - 1;
    }
    if (step.input_map.size() != mapped_inputs) {
      return absl::InvalidArgumentError("the step maps an input the model does not have");
    }
    for (const auto& [output, unused] : step.output_map)
      request->requested_outputs.push_back(output);
    // A step given none of its inputs (all optional, all left out) takes the ensemble request's
    // rows.
    request->batch_size = !batched      ? 1
                          : first_given ? request->inputs[*first_given].shape[0]
                                        : request_->batch_size;
    request->arrival_ns = MonotonicNs();
    request->cancelled = request_->cancelled;  // a step of a request its client gave up on
    request->priority = composing.dynamic_batching.PriorityLevel(0);  // its default level
    if (request_->trace.sink) {  // traced: the step is too, as a child of this request
      request->trace = {request_->trace.sink, request_->trace.sink->NewStepId()};
    }
    return request;
  }

  void StartSteps(std::vector<Launch> launches) {
    for (Launch& launch : launches) {
      Status enqueued = Enqueue(launch);
      if (enqueued.code() == absl::StatusCode::kAborted) {
        // The composing model's version was being replaced: its successor takes the step, with
        // the request built again for its config. Once; then the step fails as unavailable.
        {
          std::lock_guard lock(mu_);
          launch.request.reset();
          PrepareLocked(launch);
        }
        enqueued = Enqueue(launch);
        if (enqueued.code() == absl::StatusCode::kAborted) {
          enqueued = absl::UnavailableError(enqueued.message());
        }
      }
      if (!enqueued.ok()) OnStepDone(launch.step, nullptr, enqueued);
    }
  }

  // Hands the step's request to its model's queue. On error the request stays in `launch`.
  Status Enqueue(Launch& launch) {
    if (!launch.error.ok()) return launch.error;
    std::shared_ptr<const ModelConfig> composing = launch.model.config;
    // A traced step reports when answered; the queue owns the request by then, so its trace
    // keeps what it reads (the input views point at tensors_, alive as long as this call).
    std::shared_ptr<Request> traced;
    if (launch.request->trace.sink) {
      traced = std::make_shared<Request>();
      traced->inputs = launch.request->inputs;
      traced->arrival_ns = launch.request->arrival_ns;
      traced->batch_size = launch.request->batch_size;
      traced->trace = launch.request->trace;
    }
    launch.request->done = [self = shared_from_this(), s = launch.step, composing, traced,
                            version = launch.model.version](StatusOr<Response> result) {
      if (traced) {
        traced->trace.sink->StepDone(traced->trace.id, self->request_->trace.id, composing->name,
                                     version, *traced, result);
      }
      self->OnStepDone(s, composing.get(), std::move(result));
    };
    return launch.model.queue->Enqueue(std::move(launch.request));
  }

  void OnStepDone(size_t s, const ModelConfig* composing, StatusOr<Response> result) {
    std::vector<Launch> launches;
    bool finished = false;
    {
      std::lock_guard lock(mu_);
      --in_flight_;
      if (!result.ok()) {
        if (error_.ok()) {
          error_ = absl::Status(result.status().code(), absl::StrCat(StepLabel(*config_, s), ": ",
                                                                     result.status().message()));
        }
      } else if (error_.ok()) {
        AddOutputsLocked(s, *composing, *result);
        ++steps_done_;
        const dispatch::RequestTiming& t = result->timing;
        timing_.compute_input_ns += t.compute_input_ns;
        timing_.compute_infer_ns += t.compute_infer_ns;
        timing_.compute_output_ns += t.compute_output_ns;
        launches = TakeRunnableLocked();
      }
      if (in_flight_ == 0 && launches.empty() && error_.ok() && steps_done_ < started_.size()) {
        // Cannot happen with a config that passed the data-flow check; never hang on it.
        error_ = absl::InternalError(
            absl::StrCat("ensemble '", config_->name, "': some steps never got their inputs"));
      }
      finished =
          in_flight_ == 0 && launches.empty() && (!error_.ok() || steps_done_ == started_.size());
    }
    StartSteps(std::move(launches));
    if (finished) Finish();
  }

  void AddOutputsLocked(size_t s, const ModelConfig& composing, Response& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const EnsembleStep& step = config_->ensemble_steps[s];
    for (const auto& [output, tensor_name] : step.output_map) {
      auto given = std::find_if(response.outputs.begin(), response.outputs.end(),
                                [&](const auto& o) { return o.name == output; });
      if (given == response.outputs.end()) {
        error_ = absl::InternalError(
            absl::StrCat(StepLabel(*config_, s), ": the model gave no output '", output, "'"));
        return;
      }
      auto held = std::make_unique<HeldTensor>();
      held->dtype = given->dtype;
      held->shape = std::move(given->shape);
      if (const TensorConfig* config = FindTensor(composing.outputs, output);
          config != nullptr && config->reshape) {
        std::optional<Shape> shape =
            repository::ToClientShape(*config, held->shape, composing.max_batch_size > 0);
        if (shape) held->shape = std::move(*shape);
      }
      held->bytes = std::move(given->bytes);
      held->data = held->bytes.data();
      held->size = held->bytes.size();
      tensors_[tensor_name] = std::move(held);
    }
  }

  void Finish() {
    std::unique_lock lock(mu_);
    if (!error_.ok()) {
      Status error = error_;
      lock.unlock();
      done_(error);
      return;
    }
    Response response;
    response.timing = timing_;
    response.batch_size = request_->batch_size;
    std::vector<std::string> names = request_->requested_outputs;
    if (names.empty()) {
      for (const TensorConfig& output : config_->outputs) names.push_back(output.name);
    }
    for (const std::string& name : names) {
      const TensorConfig* config = FindTensor(config_->outputs, name);
      auto it = tensors_.find(name);
      if (config == nullptr || it == tensors_.end()) continue;  // the frontend checked the names
      HeldTensor& held = *it->second;
      if (held.dtype != config->data_type ||
          !ShapeFits(*config, held.shape, config_->max_batch_size)) {
        Status error = absl::InvalidArgumentError(absl::StrCat(
            "ensemble '", config_->name, "': output '", name, "' came out ", TypeName(held.dtype),
            " ", ShapeToString(held.shape), ", its config says ", TypeName(config->data_type), " ",
            ShapeToString(FullDims(*config, config_->max_batch_size))));
        lock.unlock();
        done_(error);
        return;
      }
      response.outputs.push_back(
          dispatch::OutputTensor{name, held.dtype, held.shape, std::move(held.bytes)});
    }
    lock.unlock();
    done_(std::move(response));
  }

  const std::shared_ptr<const ModelConfig> config_;
  const ComposingModelLookup lookup_;
  const Request* const request_;
  const Done done_;

  std::mutex mu_;
  std::map<std::string, std::unique_ptr<HeldTensor>> tensors_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> started_ ABSL_GUARDED_BY(mu_);
  size_t steps_done_ ABSL_GUARDED_BY(mu_) = 0;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  Status error_ ABSL_GUARDED_BY(mu_);
  dispatch::RequestTiming timing_ ABSL_GUARDED_BY(mu_);
};

// The outcomes of one submitted batch's requests, reported together.
class BatchOutcomes {
 public:
  BatchOutcomes(size_t count, dispatch::BatchOutcomeCallback done)
      : responses_(count), left_(count), done_(std::move(done)) {}

  void Set(size_t i, StatusOr<Response> result) {
    bool last = false;
    {
      std::lock_guard lock(mu_);
      if (result.ok()) {
        responses_[i] = std::move(result).value();
      } else if (error_.ok()) {
        error_ = result.status();
      }
      last = --left_ == 0;
    }
    if (!last) return;
    if (!error_.ok()) {
      done_(error_);
    } else {
      done_(std::move(responses_));
    }
  }

 private:
  std::mutex mu_;
  std::vector<Response> responses_;
  size_t left_;
  Status error_;
  dispatch::BatchOutcomeCallback done_;
};

// Why running `config` (an ensemble reached from `path`) would come back to `target`, or
// nullopt: "runs 'a' again (a -> b -> a)", or a nesting deeper than kMaxEnsembleDepth.
std::optional<std::string> LoopBack(const ModelConfig& config, const std::string& target,
                                    const ComposingModelLookup& lookup,
                                    std::vector<std::string>& path) {
  constexpr size_t kMaxEnsembleDepth = 16;
  path.push_back(config.name);
  if (path.size() > kMaxEnsembleDepth) {
    return absl::StrCat("ensembles nested more than ", kMaxEnsembleDepth, " deep (",
                        absl::StrJoin(path, " -> "), ")");
  }
  for (const EnsembleStep& step : config.ensemble_steps) {
    if (step.model_name == target) {
      path.push_back(target);
      return absl::StrCat("runs '", target, "' again (", absl::StrJoin(path, " -> "),
                          "): ensembles may not loop");
    }
    StatusOr<frontend::ReadyModel> inner = lookup(step.model_name, step.model_version);
    if (!inner.ok() || !inner->config->is_ensemble()) continue;
    if (std::optional<std::string> loop = LoopBack(*inner->config, target, lookup, path)) {
      return loop;
    }
  }
  path.pop_back();
  return std::nullopt;
}

}  // namespace

Status CheckEnsembleSteps(const ModelConfig& ensemble, const ComposingModelLookup& lookup) {
  // Each ensemble tensor as the config that makes it declares it: the ensemble's own input, or a
  // step's output. Dims are compared only between two configs that agree on batching (both leave
  // the batch dim out, or both spell it).
  struct Made {
    const TensorConfig* tensor;
    bool batched;
  };
  std::map<std::string, Made> made;
  for (const TensorConfig& input : ensemble.inputs) {
    made[input.name] = {&input, ensemble.max_batch_size > 0};
  }
  std::vector<std::shared_ptr<const ModelConfig>> composing;
  for (size_t s = 0; s < ensemble.ensemble_steps.size(); ++s) {
    const EnsembleStep& step = ensemble.ensemble_steps[s];
    if (step.model_name == ensemble.name) {
      return absl::InvalidArgumentError(
          absl::StrCat(StepLabel(ensemble, s), ": runs the ensemble itself"));
    }
    StatusOr<frontend::ReadyModel> model = lookup(step.model_name, step.model_version);
    if (!model.ok()) {
      return absl::UnavailableError(
          absl::StrCat(StepLabel(ensemble, s), ": ", model.status().message()));
    }
    const ModelConfig& config = *model->config;
    if (config.is_ensemble()) {
      // Ensembles run inside ensembles, as in Triton; one that leads back here would never end.
      std::vector<std::string> path = {ensemble.name};
      if (std::optional<std::string> loop = LoopBack(config, ensemble.name, lookup, path)) {
        return absl::InvalidArgumentError(absl::StrCat(StepLabel(ensemble, s), ": ", *loop));
      }
    }
    if (config.sequence_batching.enabled) {
      return absl::InvalidArgumentError(absl::StrCat(
          StepLabel(ensemble, s),
          ": is stateful (sequence_batching); an ensemble cannot carry its sequences"));
    }
    if (ensemble.max_batch_size > config.max_batch_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(StepLabel(ensemble, s), ": the ensemble's max_batch_size is ",
                       ensemble.max_batch_size, ", the model's only ", config.max_batch_size));
    }
    for (const TensorConfig& input : config.inputs) {
      const bool mapped = std::any_of(step.input_map.begin(), step.input_map.end(),
                                      [&](const auto& e) { return e.first == input.name; });
      if (!mapped && !input.optional) {
        return absl::InvalidArgumentError(absl::StrCat(StepLabel(ensemble, s),
                                                       ": input_map gives the model's input '",
                                                       input.name, "' no ensemble tensor"));
      }
    }
    for (const auto* map : {&step.input_map, &step.output_map}) {
      const bool inputs = map == &step.input_map;
      for (const auto& [name, tensor] : *map) {
        if (FindTensor(inputs ? config.inputs : config.outputs, name) == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat(StepLabel(ensemble, s), ": the model has no ",
                           inputs ? "input" : "output", " '", name, "'"));
        }
      }
    }
    for (const auto& [name, tensor] : step.output_map) {
      made[tensor] = {FindTensor(config.outputs, name), config.max_batch_size > 0};
    }
    composing.push_back(model->config);
  }
  for (size_t s = 0; s < ensemble.ensemble_steps.size(); ++s) {
    for (const auto& [name, tensor] : ensemble.ensemble_steps[s].input_map) {
      const TensorConfig& want = *FindTensor(composing[s]->inputs, name);
      const Made& have = made.at(tensor);
      if (have.tensor->data_type != want.data_type) {
        return absl::InvalidArgumentError(absl::StrCat(
            StepLabel(ensemble, s), ": tensor '", tensor, "' is ", TypeName(have.tensor->data_type),
            ", the model's input '", name, "' takes ", TypeName(want.data_type)));
      }
      if (have.batched == (composing[s]->max_batch_size > 0) &&
          !DimsFit(have.tensor->dims, want.dims)) {
        return absl::InvalidArgumentError(absl::StrCat(StepLabel(ensemble, s), ": tensor '", tensor,
                                                       "' has dims ", DimsText(have.tensor->dims),
                                                       ", the model's input '", name, "' takes ",
                                                       DimsText(want.dims)));
      }
    }
  }
  for (const TensorConfig& output : ensemble.outputs) {
    const Made& have = made.at(output.name);
    if (have.tensor->data_type != output.data_type) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ensemble '", ensemble.name, "': output '", output.name, "' is ",
          TypeName(output.data_type), " in its config, but the step that makes it gives ",
          TypeName(have.tensor->data_type)));
    }
    if (have.batched == (ensemble.max_batch_size > 0) && !DimsFit(have.tensor->dims, output.dims)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ensemble '", ensemble.name, "': output '", output.name, "' has dims ",
                       DimsText(output.dims), " in its config, but the step that makes it gives ",
                       DimsText(have.tensor->dims)));
    }
  }
  return absl::OkStatus();
}

EnsembleRunner::EnsembleRunner(std::shared_ptr<const ModelConfig> config, int64_t version,
                               ComposingModelLookup lookup)
    : config_(std::move(config)), version_(version), lookup_(std::move(lookup)) {}

StatusOr<std::vector<Response>> EnsembleRunner::Run(const std::vector<const Request*>& batch) {
  std::promise<dispatch::BatchOutcome> promise;
  std::future<dispatch::BatchOutcome> future = promise.get_future();
  std::vector<dispatch::BatchOutcomeCallback> done = {
      [&promise](dispatch::BatchOutcome outcome) { promise.set_value(std::move(outcome)); }};
  Submit({batch}, std::move(done));
  return future.get();
}

std::string EnsembleRunner::Describe() const {
  return absl::StrCat("ensemble ", config_->name, "/", version_);
}

void EnsembleRunner::Submit(const std::vector<std::vector<const Request*>>& batches,
                            std::vector<dispatch::BatchOutcomeCallback> done) {
  for (size_t b = 0; b < batches.size(); ++b) {
    auto outcomes = std::make_shared<BatchOutcomes>(batches[b].size(), std::move(done[b]));
    for (size_t i = 0; i < batches[b].size(); ++i) {
      auto call = std::make_shared<EnsembleCall>(
          config_, lookup_, batches[b][i],
          [outcomes, i](StatusOr<Response> result) { outcomes->Set(i, std::move(result)); });
      call->Start();
    }
  }
}

bool EnsembleRunner::TrySubmit(const std::vector<std::vector<const Request*>>& batches,
                               std::vector<dispatch::BatchOutcomeCallback>& done) {
  Submit(batches, std::move(done));
  return true;
}

}  // namespace tessera::server
