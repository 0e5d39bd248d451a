// Per-shape planning of the CUDA Model (see cuda_model.cc): host nodes, op plan steps, uploads of
// host values, and the arena layout from the liveness planner.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_model_impl.h"
#include "engine/memory_planner.h"

namespace tessera::engine::cuda {

StatusOr<std::shared_ptr<Plan>> CudaModel::BuildPlan(const std::vector<Shape>& key) const {
  const size_t values = graph_.value_names.size();
  const int steps = static_cast<int>(graph_.nodes.size()) + 1;  // the output step
  auto plan = std::make_shared<Plan>();
  NodePlans nodes;
  TESSERA_RETURN_IF_ERROR(PlanNodes(graph_, nodes_, device_, key, &nodes));
  plan->meta = std::move(nodes.meta);  // moved buffers: meta[id].host stays valid
  plan->host_values = std::move(nodes.host_values);
  plan->states = std::move(nodes.states);
  plan->arena_offset.assign(values, -1);
  plan->fixed.assign(values, nullptr);
  plan->workspace.assign(graph_.nodes.size(), -1);
  std::vector<int> root(values, -1), def_step(values, 0);
  for (size_t v = 0; v < values; ++v) {
    if (nodes_.place[v] == Place::kConstant) plan->fixed[v] = const_ptr_[v];
  }
  for (int id : graph_.input_ids) root[id] = id;
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    if (nodes_.host_node[n]) continue;
    const Node& node = graph_.nodes[n];
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      const int id = node.outputs[j];
      def_step[id] = static_cast<int>(n) + 1;
      if (nodes_.ops[n]->launch == nullptr && j == 0) {  // alias of input 0
        const int in = node.inputs[0];
        root[id] = root[in];
        plan->fixed[id] = root[in] < 0 ? plan->fixed[in] : nullptr;
      } else {
        root[id] = id;
      }
    }
  }

  // Host values read by device nodes: uploaded once per plan (they depend only on shapes).
  TESSERA_RETURN_IF_ERROR(Upload(plan.get()));
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {  // aliases of uploaded values
    if (nodes_.host_node[n] || nodes_.ops[n]->launch != nullptr) continue;
    const int out = graph_.nodes[n].outputs[0], in = graph_.nodes[n].inputs[0];
    if (root[out] < 0) plan->fixed[out] = plan->fixed[in];
  }

  // Arena requests: activations (by root, living to the last reader of any alias), workspaces,
  // and FP32 staging of floating inputs/outputs in FP16 mode.
  std::vector<int> last(values, -1);
  for (size_t v = 0; v < values; ++v) {
    if (root[v] < 0) continue;
    const int until = is_output_[v] ? steps : last_use_[v] + 1;
    last[root[v]] = std::max({last[root[v]], until, def_step[root[v]]});
  }
  std::vector<BufferRequest> requests;
  std::vector<std::pair<int, int>> owners;  // (kind, index): 0 value, 1 workspace, 2 in, 3 out
  for (size_t v = 0; v < values; ++v) {
    if (root[v] != static_cast<int>(v)) continue;
    const ValueMeta& m = plan->meta[v];
    const uint64_t bytes =
        static_cast<uint64_t>(ElementCount(m.shape)) * device_.StorageBytes(m.dtype);
    requests.push_back(BufferRequest{bytes, def_step[v], last[v]});
    owners.emplace_back(0, static_cast<int>(v));
  }
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    if (plan->states[n].workspace_bytes == 0) continue;
    const int step = static_cast<int>(n) + 1;
    requests.push_back(BufferRequest{plan->states[n].workspace_bytes, step, step});
    owners.emplace_back(1, static_cast<int>(n));
  }
  plan->in_stage.assign(graph_.input_ids.size(), -1);
  plan->out_stage.assign(graph_.output_ids.size(), -1);
  if (device_.fp16) {
    for (size_t i = 0; i < graph_.input_ids.size(); ++i) {
      if (graph_.inputs[i].dtype != DataType::kFp32) continue;
      requests.push_back(BufferRequest{static_cast<uint64_t>(ElementCount(key[i])) * 4, 0, 0});
      owners.emplace_back(2, static_cast<int>(i));
    }
    for (size_t i = 0; i < graph_.output_ids.size(); ++i) {
      const int id = graph_.output_ids[i];
      if (nodes_.place[id] != Place::kDevice || plan->meta[id].dtype != DataType::kFp32) continue;
      requests.push_back(BufferRequest{
          static_cast<uint64_t>(ElementCount(plan->meta[id].shape)) * 4, steps, steps});
      owners.emplace_back(3, static_cast<int>(i));
    }
  }
  TESSERA_ASSIGN_OR_RETURN(ArenaPlan arena, PlanArena(requests, kAlign));
  for (size_t r = 0; r < requests.size(); ++r) {
    const auto [kind, index] = owners[r];
    const auto offset = static_cast<int64_t>(arena.offsets[r]);
    if (kind == 0) plan->arena_offset[index] = offset;
    if (kind == 1) plan->workspace[index] = offset;
    if (kind == 2) plan->in_stage[index] = offset;
    if (kind == 3) plan->out_stage[index] = offset;
  }
  for (size_t v = 0; v < values; ++v) {
    if (root[v] >= 0) plan->arena_offset[v] = plan->arena_offset[root[v]];
  }
  plan->arena_bytes = arena.arena_bytes;
  plan->naive_bytes = arena.naive_bytes;
  for (const auto& owner : owners) plan->num_values += owner.first == 0 ? 1 : 0;
  return plan;
}

Status CudaModel::Upload(Plan* plan) const {
  std::vector<int> ids;
  std::vector<uint64_t> offsets;
  uint64_t total = 0;
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    if (nodes_.host_node[n]) continue;
    for (int id : graph_.nodes[n].inputs) {
      if (id == kNoValue || nodes_.place[id] != Place::kHost) continue;
      if (std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
      ids.push_back(id);
      offsets.push_back(total);
      const Value& h = plan->host_values[id];
      total += AlignUp(static_cast<uint64_t>(h.num_elements()) * device_.StorageBytes(h.dtype()));
    }
  }
  if (total == 0) return absl::OkStatus();
  TESSERA_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&plan->uploads, total), "cudaMalloc(uploads)"));
  std::vector<std::byte> staging(total);
  for (size_t i = 0; i < ids.size(); ++i) {
    const Value& h = plan->host_values[ids[i]];
    std::byte* dst = staging.data() + offsets[i];
    if (device_.fp16 && h.dtype() == DataType::kFp32) {
      auto* half = reinterpret_cast<__half*>(dst);
      for (int64_t e = 0; e < h.num_elements(); ++e) half[e] = __float2half(h.data<float>()[e]);
    } else if (h.byte_size() > 0) {
      std::memcpy(dst, h.raw(), h.byte_size());
    }
    plan->fixed[ids[i]] = static_cast<char*>(plan->uploads) + offsets[i];
  }
  // Pageable source: the call returns once `staging` is consumed; the stream orders the copy
  // before every kernel of this model.
  TESSERA_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(plan->uploads, staging.data(), total, cudaMemcpyHostToDevice,
                      device_.stream),
      "upload host values"));
  return CudaStatus(cudaStreamSynchronize(device_.stream), "upload host values");
}

StatusOr<std::shared_ptr<Plan>> CudaModel::GetPlan(const std::vector<Shape>& key) const {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Plan> plan, BuildPlan(key));
  // Past the cap, new shapes run from a transient plan (no graph) rather than growing the cache.
  if (plans_.size() < kMaxCachedPlans) plans_.emplace(key, plan);
  return plan;
}


StatusOr<MemoryPlanInfo> CudaModel::PlanMemory(int64_t batch) const {
  if (batch < 1) return absl::InvalidArgumentError(absl::StrCat("batch ", batch, " < 1"));
  std::vector<Shape> key;
  for (size_t i = 0; i < graph_.inputs.size(); ++i) {
    if (!graph_.input_rank_known[i]) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", graph_.inputs[i].name,
                                                     "\" has no declared shape to plan from"));
    }
    Shape shape = graph_.inputs[i].shape;
    for (int64_t& d : shape) {
      if (d < 0) d = batch;
    }
    key.push_back(shape);
  }
  std::lock_guard<std::mutex> lock(mu_);
  TESSERA_RETURN_IF_ERROR(UseDevice());
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Plan> plan, GetPlan(key));
  return MemoryPlanInfo{batch, plan->arena_bytes, plan->naive_bytes, plan->num_values};
}


}  // namespace tessera::engine::cuda
