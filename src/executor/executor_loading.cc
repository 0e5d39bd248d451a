// The executor's loads, unloads and weight exports (docs/executor-protocol.md, "Load and unload",
// "Shared weights"); batches are in executor.cc.
#include <exception>
#include <new>
#include <optional>
#include <utility>

#include "executor/executor.h"
#include "executor/executor_instance.h"
#include "executor/model_signature.h"
#include "spdlog/spdlog.h"
#include "tessera/common/thread_name.h"

namespace tessera::executor {

void Executor::SendLoadResult(const std::string& key, const Status& status, uint64_t weight_bytes,
                              const engine::WeightImportOutcome& sharing) {
  ipc::ControlMessage message;
  ipc::LoadResult* result = message.mutable_load_result();
  result->set_instance_key(key);
  result->set_ok(status.ok());
  if (!status.ok()) {
    result->set_error(status.ToString());
    result->set_error_code(static_cast<int32_t>(status.code()));
  }
  result->set_weight_bytes(weight_bytes);
  result->set_weights_shared(sharing.imported);
  if (sharing.requested && !sharing.imported) result->set_weights_not_shared(sharing.why_not);
  if (status.ok()) {
    spdlog::info("loaded {} ({} weight bytes{})", key, weight_bytes,
                 sharing.imported    ? ", mapped from another executor"
                 : sharing.requested ? ", own copy: " + sharing.why_not
                                     : "");
  } else {
    spdlog::warn("load of {} failed: {}", key, status.ToString());
  }
  Send(message);
}

// ---------------------------------------------------------------------------------------------
// Loading

void Executor::HandleLoad(const ipc::LoadModel& load) {
  const std::string& key = load.instance_key();
  {
    absl::MutexLock lock(&mu_);
    if (instances_.count(key) == 0 && loading_.count(key) == 0) {
      loading_.insert(key);
      // The descriptor came with this frame: take it now, in frame order.
      load_queue_.push_back(
          {load, load.has_shared_weights() ? channel_->TakeReceivedFd() : UniqueFd()});
      return;
    }
  }
  if (load.has_shared_weights()) channel_->TakeReceivedFd();  // closed, unused
  SendLoadResult(
      key,
      absl::AlreadyExistsError(absl::StrCat("instance ", key, " is already loaded or loading")), 0);
}

void Executor::LoaderLoop() {
  SetCurrentThreadName("ts-loader");
  while (true) {
    QueuedLoad queued;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Executor* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
            return e->stopping_ || !e->load_queue_.empty();
          },
          this));
      if (stopping_) break;
      queued = std::move(load_queue_.front());
      load_queue_.pop_front();
    }
    const ipc::LoadModel& request = queued.request;
    std::optional<engine::WeightImport> shared;
    engine::WeightImportOutcome sharing;
    if (request.has_shared_weights()) {
      sharing.requested = true;
      if (queued.shared_weights.valid()) {
        shared = engine::WeightImport{queued.shared_weights.get(), request.shared_weights().bytes(),
                                      request.shared_weights().layout()};
      } else {
        sharing.why_not = "the load named shared weights but no descriptor came with it";
      }
    }

    uint64_t weight_bytes = 0;
    std::unique_ptr<engine::Model> model;
    Status status;
    try {
      StatusOr<std::unique_ptr<engine::Model>> loaded =
          options_.loader(request, shared.has_value() ? &*shared : nullptr);
      status = loaded.status();
      if (loaded.ok()) model = *std::move(loaded);
      if (status.code() == absl::StatusCode::kResourceExhausted) {
        status = Status(status.code(), absl::StrCat(status.message(), MemoryLimitNote()));
      }
    } catch (const std::bad_alloc&) {
      // Sizes in a model file (a constant folded at load, say) can ask for more than there is.
      status = absl::ResourceExhaustedError(absl::StrCat(
          "model ", request.model_name(), " version ", request.version(), " (",
          request.model_path(), "): loading it needs more memory than this executor can allocate",
          MemoryLimitNote()));
    } catch (const std::exception& e) {
      // The engine must not throw; if it does anyway, one bad model must not end the executor.
      status = absl::InternalError(absl::StrCat("model loader threw: ", e.what()));
    }
    if (status.ok()) {
      status = CheckModelSignature(request, *model);
      if (!status.ok()) {
        status = absl::InvalidArgumentError(
            absl::StrCat("model ", request.model_name(), " version ", request.version(), " (",
                         request.model_path(), "): ", status.message()));
      }
    }
    if (status.ok()) {
      weight_bytes = model->weight_bytes();
      WarnOfOptionalInputsWithoutDefault(request, *model);
    }
    if (status.ok() && shared.has_value()) {
      sharing = model->weight_import();
      if (!sharing.requested) {
        sharing = {true, false, "this executor's backend does not map shared weights"};
      }
    }
    queued.shared_weights.Reset();  // a mapping holds the buffer; the descriptor is done

    const std::string& key = request.instance_key();
    {
      absl::MutexLock lock(&mu_);
      loading_.erase(key);
      if (cancelled_loads_.erase(key) > 0 && status.ok()) {
        status = absl::AbortedError(absl::StrCat("instance ", key, " was unloaded while loading"));
      }
      if (status.ok()) {
        auto instance = std::make_unique<Instance>();
        instance->key = key;
        instance->model = std::move(model);
        instance->thread = std::thread(&Executor::InstanceLoop, this, instance.get());
        instances_.emplace(key, std::move(instance));
      }
    }
    model.reset();  // a cancelled load frees its weights here, outside the lock
    SendLoadResult(key, status, status.ok() ? weight_bytes : 0,
                   status.ok() ? sharing : engine::WeightImportOutcome{});
  }

  // Draining: loads still queued are answered, not run.
  std::deque<QueuedLoad> abandoned;
  {
    absl::MutexLock lock(&mu_);
    abandoned.swap(load_queue_);
    for (const auto& load : abandoned) loading_.erase(load.request.instance_key());
  }
  for (const auto& load : abandoned) {
    SendLoadResult(load.request.instance_key(), absl::UnavailableError("executor is shutting down"),
                   0);
  }
}

void Executor::HandleExportWeights(const ipc::ExportWeights& request) {
  ipc::ControlMessage message;
  ipc::WeightsExport* reply = message.mutable_weights_export();
  reply->set_request_id(request.request_id());
  StatusOr<engine::ExportedWeights> exported =
      absl::NotFoundError(absl::StrCat("no loaded instance ", request.instance_key()));
  {
    absl::MutexLock lock(&mu_);
    auto it = instances_.find(request.instance_key());
    // An instance in instances_ has not been told to stop, so its worker still holds the model
    // (only this thread unloads); exporting only reads the immutable weight buffer.
    if (it != instances_.end()) exported = it->second->model->ExportWeights();
  }
  if (!exported.ok()) {
    reply->set_error(std::string(exported.status().message()));
    reply->set_error_code(static_cast<int32_t>(exported.status().code()));
    Send(message);
    return;
  }
  reply->set_ok(true);
  reply->set_bytes(exported->bytes);
  reply->set_layout(exported->layout);
  Status status = channel_->SendWithFd(message, exported->fd.get());
  if (!status.ok() && !send_failed_.exchange(true)) {
    spdlog::warn("cannot send to the server: {}", status.ToString());
  }
}

void Executor::HandleUnload(const ipc::UnloadModel& unload) {
  const std::string& key = unload.instance_key();
  absl::MutexLock lock(&mu_);
  // Reap workers that finished since the last unload so that retired_ stays short.
  for (auto it = retired_.begin(); it != retired_.end();) {
    if ((*it)->exited.load()) {
      (*it)->thread.join();
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
  auto it = instances_.find(key);
  if (it != instances_.end()) {
    // Batches already queued still run; the worker frees the model after the last one.
    it->second->Stop();
    retired_.push_back(std::move(it->second));
    instances_.erase(it);
    spdlog::info("unloading {}", key);
  } else if (loading_.count(key) > 0) {
    cancelled_loads_.insert(key);
  } else {
    spdlog::warn("unload of unknown instance {}", key);
  }
}

}  // namespace tessera::executor
