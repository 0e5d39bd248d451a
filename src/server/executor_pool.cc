#include "executor_pool.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "tessera/common/thread_name.h"

namespace tessera::server {

ExecutorPool::ExecutorPool(const ExecutorPoolOptions& options)
    : options_(options), slots_(options.executors) {
  for (Slot& slot : slots_) slot.launch = options.launch;
}

StatusOr<std::unique_ptr<ExecutorPool>> ExecutorPool::Start(const ExecutorPoolOptions& options) {
  if (options.executors < 1) {
    return absl::InvalidArgumentError("at least one executor is needed");
  }
  std::unique_ptr<ExecutorPool> pool(new ExecutorPool(options));
  for (int slot = 0; slot < options.executors; ++slot) {
    TESSERA_ASSIGN_OR_RETURN(auto process, pool->Launch(slot, 0));
    std::lock_guard lock(pool->mu_);
    pool->slots_[slot].process = std::move(process);
  }
  pool->supervisor_ = std::thread([p = pool.get()] { p->SupervisorLoop(); });
  return pool;
}

ExecutorPool::~ExecutorPool() { Stop(); }

StatusOr<std::shared_ptr<ExecutorProcess>> ExecutorPool::Launch(int slot, int generation) {
  ExecutorLaunchOptions launch;
  {
    std::lock_guard lock(mu_);
    launch = slots_.at(slot).launch;
  }
  launch.executor_id = slot;
  launch.generation = generation;
  // Runs on the process's reader thread: only flag the slot; the supervisor does the work.
  auto on_exit = [this, slot, generation](const std::string&) {
    std::lock_guard lock(mu_);
    if (slots_[slot].generation == generation) slots_[slot].needs_restart = true;
    changed_cv_.notify_all();
  };
  TESSERA_ASSIGN_OR_RETURN(auto process, ExecutorProcess::Start(launch, on_exit));
  return std::shared_ptr<ExecutorProcess>(std::move(process));
}

void ExecutorPool::SupervisorLoop() {
  SetCurrentThreadName("ts-supervisor");
  std::unique_lock lock(mu_);
  while (!stopping_) {
    int slot = -1;
    for (int i = 0; i < static_cast<int>(slots_.size()); ++i) {
      if (slots_[i].needs_restart && !slots_[i].removed) slot = i;
    }
    if (slot < 0) {
      changed_cv_.wait(lock);
      continue;
    }
    Slot& s = slots_[slot];
    std::shared_ptr<ExecutorProcess> dead = std::move(s.process);
    s.needs_restart = false;
    const int generation = ++s.generation;
    std::map<std::string, ipc::LoadModel> instances = s.instances;
    ++restarts_;
    lock.unlock();
    dead.reset();  // reaps the child and unmaps its rings

    spdlog::warn("restarting executor {} (restart #{})", slot, generation);
    auto process = Launch(slot, generation);
    Status reloaded = process.ok() ? absl::OkStatus() : process.status();
    for (auto it = instances.begin(); reloaded.ok() && it != instances.end(); ++it) {
      reloaded = (*process)->Load(it->second, options_.load_timeout_ms);
      if (!reloaded.ok()) {
        reloaded = absl::Status(reloaded.code(), absl::StrCat("reloading '", it->first,
                                                              "': ", reloaded.message()));
      }
    }
    lock.lock();
    if (reloaded.ok()) {
      slots_[slot].process = std::move(process).value();
      spdlog::info("executor {} is back with {} instance(s)", slot, instances.size());
    } else {
      spdlog::error("executor {} restart failed: {}; retrying in 1 s", slot, reloaded.message());
      slots_[slot].needs_restart = true;
      changed_cv_.wait_for(lock, std::chrono::seconds(1));
    }
    changed_cv_.notify_all();
  }
}

StatusOr<int> ExecutorPool::AddExecutor(const ExecutorLaunchOptions& launch) {
  int slot = 0;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return absl::UnavailableError("server is shutting down");
    slot = static_cast<int>(slots_.size());
    slots_.emplace_back();
    slots_.back().launch = launch;
    slots_.back().removed = true;  // not usable until it started
  }
  auto process = Launch(slot, 0);
  std::lock_guard lock(mu_);
  if (!process.ok()) return process.status();
  slots_[slot].process = std::move(process).value();
  slots_[slot].removed = false;
  return slot;
}

void ExecutorPool::RemoveExecutor(int slot) {
  std::shared_ptr<ExecutorProcess> process;
  {
    std::lock_guard lock(mu_);
    if (slot < options_.executors || slot >= static_cast<int>(slots_.size())) return;
    Slot& s = slots_[slot];
    s.removed = true;
    s.needs_restart = false;
    s.instances.clear();
    process = std::move(s.process);
  }
  changed_cv_.notify_all();
  if (process) process->Stop(5000);
}

Status ExecutorPool::LoadInstance(int slot, const ipc::LoadModel& load,
                                  const SharedWeightsHandle* shared_weights, bool* weights_shared) {
  if (weights_shared != nullptr) *weights_shared = false;
  std::shared_ptr<ExecutorProcess> process;
  {
    std::lock_guard lock(mu_);
    process = slots_.at(slot).process;
    // Remember first: if the executor restarts during this load, the supervisor replays it.
    slots_[slot].instances[load.instance_key()] = load;
  }
  Status status =
      process ? process->Load(load, options_.load_timeout_ms, shared_weights, weights_shared)
              : absl::UnavailableError(absl::StrCat("executor ", slot, " is restarting"));
  if (!status.ok()) {
    std::lock_guard lock(mu_);
    slots_[slot].instances.erase(load.instance_key());
  }
  return status;
}

StatusOr<SharedWeightsHandle> ExecutorPool::ExportWeights(int slot,
                                                          const std::string& instance_key) {
  std::shared_ptr<ExecutorProcess> process = Current(slot);
  if (process == nullptr) {
    return absl::UnavailableError(absl::StrCat("executor ", slot, " is restarting"));
  }
  return process->ExportWeights(instance_key, options_.load_timeout_ms);
}

void ExecutorPool::UnloadInstance(int slot, const std::string& instance_key) {
  std::shared_ptr<ExecutorProcess> process;
  {
    std::lock_guard lock(mu_);
    slots_.at(slot).instances.erase(instance_key);
    process = slots_[slot].process;
  }
  if (process && process->alive()) process->Unload(instance_key);
}

StatusOr<std::shared_ptr<ExecutorProcess>> ExecutorPool::Acquire(int slot,
                                                                 const std::string& instance_key) {
  std::unique_lock lock(mu_);
  auto ready = [&] {
    const Slot& s = slots_.at(slot);
    return stopping_ || s.removed || (s.process && s.process->alive() && !s.needs_restart);
  };
  if (!changed_cv_.wait_for(lock, std::chrono::milliseconds(options_.restart_wait_ms), ready)) {
    return absl::UnavailableError(absl::StrCat("executor ", slot, " is restarting and not back after ",
                                               options_.restart_wait_ms, " ms"));
  }
  if (stopping_) return absl::UnavailableError("server is shutting down");
  if (slots_[slot].removed) return absl::UnavailableError(absl::StrCat("executor ", slot, " was removed"));
  if (!slots_[slot].instances.count(instance_key)) {
    return absl::UnavailableError(absl::StrCat("'", instance_key, "' is not loaded on executor ", slot));
  }
  return slots_[slot].process;
}

std::shared_ptr<ExecutorProcess> ExecutorPool::Current(int slot) const {
  std::lock_guard lock(mu_);
  if (slot < 0 || slot >= static_cast<int>(slots_.size())) return nullptr;
  const Slot& s = slots_[slot];
  if (s.removed || s.needs_restart || !s.process || !s.process->alive()) return nullptr;
  return s.process;
}

std::map<int, InputPoolCounters> ExecutorPool::input_pool_counters() const {
  std::vector<std::pair<int, std::shared_ptr<ExecutorProcess>>> running;
  {
    std::lock_guard lock(mu_);
    for (int slot = 0; slot < static_cast<int>(slots_.size()); ++slot) {
      if (!slots_[slot].removed && slots_[slot].process) running.push_back({slot, slots_[slot].process});
    }
  }
  std::map<int, InputPoolCounters> counters;
  for (const auto& [slot, process] : running) counters[slot] = process->input_pool_counters();
  return counters;
}

std::shared_ptr<ExecutorProcess> ExecutorPool::TryAcquire(int slot,
                                                          const std::string& instance_key) const {
  std::lock_guard lock(mu_);
  if (stopping_ || slot < 0 || slot >= static_cast<int>(slots_.size())) return nullptr;
  const Slot& s = slots_[slot];
  if (s.removed || s.needs_restart || !s.process || !s.process->alive()) return nullptr;
  if (!s.instances.count(instance_key)) return nullptr;
  return s.process;
}

uint64_t ExecutorPool::restarts() const {
  std::lock_guard lock(mu_);
  return restarts_;
}

void ExecutorPool::Stop() {
  std::vector<std::shared_ptr<ExecutorProcess>> processes;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (Slot& slot : slots_) processes.push_back(std::move(slot.process));
  }
  changed_cv_.notify_all();
  if (supervisor_.joinable()) supervisor_.join();
  for (auto& process : processes) {
    if (process) process->Stop(5000);
  }
}

}  // namespace tessera::server
