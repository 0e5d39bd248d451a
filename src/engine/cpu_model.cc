// The CPU implementation of Model and LoadOnnxModel: import, check every node against its kernel,
// run the graph passes (graph_passes.h: folding, BatchNorm and activation fusion), then interpret
// the remaining nodes in order on each Run. The first Run with a given tuple of input shapes
// allocates every activation and records sizes and aliases; from that a liveness plan
// (cpu_activation_plan.h) is cached, and later Runs with those shapes place kernel outputs in one
// reused arena. Graph outputs are in the arena too, live to the end and are copied into the
// returned Tensors; graph inputs stay caller-owned, weights stay in graph_.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/ops.h"
#include "engine/cpu_activation_plan.h"
#include "engine/cpu_layout_dispatch.h"
#include "engine/defaulted_inputs_model.h"
#include "engine/float16_interface_model.h"
#include "engine/graph.h"
#include "engine/graph_passes.h"
#include "engine/node_parallelism.h"
#include "engine/onnx_import.h"
#include "engine/prepare_cpu_graph.h"
#include "engine/string_tensor.h"
#include "engine/thread_pool.h"
#include "spdlog/spdlog.h"
#include "tessera/common/bytes_tensor.h"
#include "tessera/engine/engine.h"
#ifdef TESSERA_HAVE_CUDA
#include "engine/cuda/cuda_model.h"
#endif

namespace tessera::engine {
namespace {

Status Prefixed(const Status& status, const std::string& prefix) {
  return Status(status.code(), absl::StrCat(prefix, ": ", status.message()));
}

// Plans are cached per input-shape tuple; past this many (distinct batch sizes, in practice),
// new shapes run unplanned rather than growing the cache without bound.
constexpr size_t kMaxCachedPlans = 64;

// A file's prepared graph and the kernel states made for it, shared by every Model of the file in
// this process (LoadOnnxModel's cache): the weights, and oneDNN's reordered weights and primitives,
// are held once however many instances run. Kernel states are safe for concurrent Runs.
class SharedModelData {
 public:
  explicit SharedModelData(Graph graph) : graph_(std::move(graph)) {}

  // The prepared graph, as every backend gets it.
  const Graph& graph() const { return graph_; }

  // What the CPU model runs, for the own kernels (k = 0) or the oneDNN ones (k = 1), made on
  // first use: a copy of the graph (sharing its weights) where MatMulIntegers absorb the Cast and
  // scale after them, MatMuls (those too) their bias and GELU
  // or a constant scale, Convs their residual Add and the Relu after it, or a LeakyRelu,
  // Sigmoid, Tanh or SiLU, and BatchNormalizations the Concat before and the Relu after them,
  // which only the CPU kernels understand; and
  // per node the kernel's state (null where it keeps none).
  struct CpuVariant {
    Graph graph;
    std::vector<std::unique_ptr<cpu::KernelState>> states;
  };
  const CpuVariant& ForCpu(bool onednn) const {
    const int k = onednn ? 1 : 0;
    std::call_once(made_[k], [&] {
      CpuVariant& v = variants_[k];
      v.graph = graph_;
      const int integer_products = FuseIntegerToFloat(&v.graph);
      const int epilogues = FuseMatMulEpilogues(&v.graph);
      const int residuals = FuseConvResidual(&v.graph);
      if (residuals > 0) FuseConvActivation(&v.graph);
      const int eltwise = FuseConvEltwise(&v.graph);
      const int norm_relus = FuseBatchNormRelu(&v.graph);
      const int concat_norms = FuseConcatBatchNorm(&v.graph);
      const int scales = FuseMatMulScale(&v.graph);
      if (integer_products + epilogues + residuals + eltwise + norm_relus + concat_norms + scales >
          0) {
        RemoveDeadNodes(&v.graph);
      }
      v.states.resize(v.graph.nodes.size());
      for (size_t n = 0; n < v.graph.nodes.size(); ++n) {
        const cpu::OpDef* op = cpu::FindOp(v.graph.nodes[n].op_type, onednn);
        if (op->make_state != nullptr) v.states[n] = op->make_state(v.graph.nodes[n], v.graph);
      }
    });
    return variants_[k];
  }

 private:
  const Graph graph_;
  mutable std::once_flag made_[2];
  mutable CpuVariant variants_[2];  // written once, in call_once
};

class CpuModel final : public Model {
 public:
  CpuModel(std::shared_ptr<const SharedModelData> shared, const ModelOptions& options)
      : shared_(std::move(shared)),
        graph_(shared_->ForCpu(options.onednn).graph),
        states_(shared_->ForCpu(options.onednn).states),
        plan_memory_(options.plan_memory),
        onednn_(options.onednn),
        tune_node_parallelism_(options.tune_node_parallelism),
        pool_(std::make_unique<ThreadPool>(std::max(1, options.num_threads))) {
    const size_t values = graph_.value_names.size();
    last_use_.assign(values, -1);
    keep_.assign(values, false);
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      ops_.push_back(cpu::FindOp(graph_.nodes[n].op_type, onednn_));
      for (int id : graph_.nodes[n].inputs) {
        if (id != kNoValue) last_use_[id] = static_cast<int>(n);
      }
    }
    for (int id : graph_.output_ids) keep_[id] = true;
    weight_bytes_ = graph_.ConstantBytes();
  }

  const std::vector<TensorInfo>& inputs() const override { return graph_.inputs; }
  const std::vector<TensorInfo>& outputs() const override { return graph_.outputs; }
  uint64_t weight_bytes() const override { return weight_bytes_; }

  Status Run(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs) override {
    return GuardedRun(inputs, outputs, nullptr);
  }

  Status RunTimed(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs,
                  std::vector<LayerTiming>* timings) override {
    if (timings == nullptr) return absl::InvalidArgumentError("RunTimed needs a timings vector");
    timings->clear();
    return GuardedRun(inputs, outputs, timings);
  }

  StatusOr<MemoryPlanInfo> PlanMemory(int64_t batch) const override;

 private:
  Status GuardedRun(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs,
                    std::vector<LayerTiming>* timings) {
    try {
      return RunImpl(inputs, outputs, timings);
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory allocating activations");
    }
  }
  // Binds the inputs to their slots; STRING inputs' strings are copied into `strings`.
  Status ValidateInputs(const std::vector<TensorView>& views, std::vector<Value>* slots,
                        StringArena* strings) const;
  Status RunImpl(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs,
                 std::vector<LayerTiming>* timings);
  // Interprets the nodes on `slots` (graph inputs already set). With `plan`, kernel outputs go to
  // `arena` at the planned offsets; with `recording`, what a plan needs is written there. Kernels
  // put the strings they make in `strings`. With `parallelism`, each node gets `pool` or runs
  // alone as it says, and undecided nodes are timed for it.
  Status Execute(std::vector<Value>* slots, ThreadPool* pool, const ActivationPlan* plan,
                 std::byte* arena, Recording* recording, std::vector<LayerTiming>* timings,
                 StringArena* strings, NodeParallelism* parallelism = nullptr) const;
  Status CopyOutputs(const std::vector<Value>& slots, std::vector<Tensor>* outputs) const;
  std::vector<Shape> InputShapes(const std::vector<Value>& slots) const;
  std::shared_ptr<const ActivationPlan> FindPlan(const std::vector<Shape>& key) const;
  void StorePlan(const std::vector<Shape>& key, std::shared_ptr<const ActivationPlan> plan) const;

  const Value* Lookup(const std::vector<Value>& slots, int id) const {
    if (graph_.IsConstant(id)) return &*graph_.constants[id];
    return slots[id].defined() ? &slots[id] : nullptr;
  }

  // Shared with every other Model loaded from the same file in this process.
  const std::shared_ptr<const SharedModelData> shared_;
  const Graph& graph_;
  const std::vector<std::unique_ptr<cpu::KernelState>>& states_;  // per node; may hold nulls
  const bool plan_memory_;
  const bool onednn_;
  const bool tune_node_parallelism_;
  std::vector<const cpu::OpDef*> ops_;  // parallel to graph_.nodes
  std::vector<int> last_use_;           // per value: index of the last node reading it, or -1
  std::vector<bool> keep_;              // per value: a graph output, never released early
  uint64_t weight_bytes_ = 0;
  std::unique_ptr<ThreadPool> pool_;
  Value arena_;  // activation arena, grown to the largest plan run so far; used by Run only

  mutable std::mutex plans_mu_;
  mutable std::map<std::vector<Shape>, std::shared_ptr<const ActivationPlan>> plans_
      ABSL_GUARDED_BY(plans_mu_);
};

Status CpuModel::ValidateInputs(const std::vector<TensorView>& views, std::vector<Value>* slots,
                                StringArena* strings) const {
  std::vector<bool> seen(graph_.inputs.size(), false);
  for (const TensorView& view : views) {
    size_t index = 0;
    while (index < graph_.inputs.size() && graph_.inputs[index].name != view.name) ++index;
    if (index == graph_.inputs.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected input \"", view.name, "\": the model has no such input"));
    }
    if (seen[index]) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", view.name, "\" given twice"));
    }
    seen[index] = true;
    const TensorInfo& info = graph_.inputs[index];
    if (view.dtype != info.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input \"", view.name, "\" has data type ", TypeName(view.dtype),
          ", expected ", TypeName(info.dtype)));
    }
    bool shape_ok = !graph_.input_rank_known[index] || view.shape.size() == info.shape.size();
    for (size_t d = 0; d < view.shape.size(); ++d) {
      if (view.shape[d] < 0) shape_ok = false;
      if (shape_ok && graph_.input_rank_known[index] && info.shape[d] >= 0 &&
          info.shape[d] != view.shape[d]) {
        shape_ok = false;
      }
    }
    if (!shape_ok) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", view.name, "\" has shape ",
                                                     ShapeToString(view.shape), ", expected ",
                                                     ShapeToString(info.shape),
                                                     " (-1 = any size)"));
    }
    if (view.dtype == DataType::kString) {  // serialized (bytes_tensor.h), so no fixed size
      TESSERA_ASSIGN_OR_RETURN((*slots)[graph_.input_ids[index]],
                               BindStrings(absl::StrCat("input \"", view.name, "\""), view.shape,
                                           view.data, view.byte_size, strings));
      continue;
    }
    const size_t expected_bytes =
        static_cast<size_t>(ElementCount(view.shape)) * DataTypeByteSize(view.dtype);
    if (view.byte_size != expected_bytes || (expected_bytes > 0 && view.data == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", view.name, "\" has ",
                                                     view.byte_size, " bytes, expected ",
                                                     expected_bytes, " for shape ",
                                                     ShapeToString(view.shape)));
    }
    (*slots)[graph_.input_ids[index]] = Value::Borrow(view.dtype, view.shape, view.data);
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing input \"", graph_.inputs[i].name, "\"", kNoDefaultNote));
    }
  }
  return absl::OkStatus();
}

namespace {

}  // namespace

Status CpuModel::Execute(std::vector<Value>* slots, ThreadPool* pool, const ActivationPlan* plan,
                         std::byte* arena, Recording* recording, std::vector<LayerTiming>* timings,
                         StringArena* strings, NodeParallelism* parallelism) const {
  cpu::OpContext ctx;
  ctx.pool = pool;
  if (pool == nullptr) parallelism = nullptr;
  ctx.strings = strings;
  ctx.onednn = onednn_ && cpu::UsingOneDnn();
  cpu::Inputs node_inputs;
  cpu::Inputs original_inputs;  // node_inputs before any layout conversion
  std::vector<Value> converted;
  std::vector<Value> node_outputs;
  std::vector<Value> planned;
  std::vector<bool> allocated;
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    const Node& node = graph_.nodes[n];
    node_inputs.clear();
    bool any_channels_last = false;
    for (int id : node.inputs) {
      const Value* v = id == kNoValue ? nullptr : Lookup(*slots, id);
      if (id != kNoValue && v == nullptr) {
        return absl::InternalError(absl::StrCat(node.Describe(graph_.value_names), ": input \"",
                                                graph_.value_names[id], "\" was never computed"));
      }
      if (v != nullptr && v->channels_last()) any_channels_last = true;
      node_inputs.push_back(v);
    }
    original_inputs = node_inputs;
    const KernelLayout layout =
        any_channels_last ? AdaptInputLayouts(ops_[n]->layout, &node_inputs, &converted, pool)
                          : KernelLayout{};
    if (Status refused = cpu::RefuseStrings(*ops_[n], node.op_type, node_inputs); !refused.ok()) {
      return Prefixed(refused, node.Describe(graph_.value_names));
    }
    ctx.state = states_[n].get();
    node_outputs.assign(node.outputs.size(), Value());
    if (plan != nullptr) {
      planned.assign(node.outputs.size(), Value());
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        const int id = node.outputs[i];
        if (plan->offset[id] < 0) continue;
        planned[i] = Value::Borrow(DataType::kUint8, {static_cast<int64_t>(plan->bytes[id])},
                                   arena + plan->offset[id]);
      }
      ctx.planned_outputs = &planned;
    }
    if (recording != nullptr) {
      allocated.assign(node.outputs.size(), false);
      ctx.allocated_outputs = &allocated;
    }
    NodeParallelism::Mode mode = NodeParallelism::Mode::kPool;
    bool tuning = false;
    // Only a pool with threads to spare gives a choice: while other runs take the threads, the
    // node runs alone whatever it is given, and timing it would teach nothing.
    if (parallelism != nullptr && pool->usable_threads() > 1) {
      mode = parallelism->Next(n, &tuning);
    }
    ctx.pool = mode == NodeParallelism::Mode::kPool ? pool : nullptr;
    const bool timed = timings != nullptr || tuning;
    std::chrono::steady_clock::time_point start;
    if (timed) start = std::chrono::steady_clock::now();
    Status status = ops_[n]->run(ctx, node, node_inputs, &node_outputs);
    if (timed) {
      const int64_t nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count();
      if (timings != nullptr) {
        timings->push_back(LayerTiming{node.name, node.op_type, static_cast<uint64_t>(nanos)});
      }
      if (tuning && status.ok()) parallelism->Record(n, mode, nanos);
    }
    if (!status.ok()) return Prefixed(status, node.Describe(graph_.value_names));
    LabelOutputLayouts(layout, &node_outputs);
    if (recording != nullptr) {
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        const int id = node.outputs[i];
        const Value& out = node_outputs[i];
        recording->def_step[id] = static_cast<int>(n);
        if (allocated[i]) {
          recording->root[id] = id;
          recording->bytes[id] = out.byte_size();
          continue;
        }
        // Not allocated by the kernel: an alias of an input (Reshape, Flatten, ...) shares that
        // input's buffer, whose lifetime must then cover the alias's readers too.
        for (size_t j = 0; j < node.inputs.size(); ++j) {
          const int in = node.inputs[j];
          if (in == kNoValue || original_inputs[j] == nullptr || recording->root[in] < 0) continue;
          if (out.byte_size() > 0 && out.raw() == original_inputs[j]->raw()) {
            recording->root[id] = recording->root[in];
            break;
          }
        }
      }
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      (*slots)[node.outputs[i]] = std::move(node_outputs[i]);
    }
    for (int id : node.inputs) {
      if (id != kNoValue && last_use_[id] == static_cast<int>(n) && !keep_[id]) {
        (*slots)[id] = Value();
      }
    }
  }
  return absl::OkStatus();
}

Status CpuModel::CopyOutputs(const std::vector<Value>& slots, std::vector<Tensor>* outputs) const {
  outputs->clear();
  for (size_t i = 0; i < graph_.output_ids.size(); ++i) {
    const Value* v = Lookup(slots, graph_.output_ids[i]);
    const TensorInfo& info = graph_.outputs[i];
    if (v == nullptr || v->dtype() != info.dtype) {
      return absl::InternalError(absl::StrCat("output \"", info.name, "\" was not computed as ",
                                              TypeName(info.dtype)));
    }
    const Value row_major = cpu::ToRowMajor(*v, pool_.get());
    Tensor tensor;
    tensor.name = info.name;
    tensor.dtype = row_major.dtype();
    tensor.shape = row_major.shape();
    if (row_major.dtype() == DataType::kString) {
      SerializeStrings(row_major, &tensor.bytes);
      outputs->push_back(std::move(tensor));
      continue;
    }
    const auto* data = row_major.data<std::byte>();
    tensor.bytes.assign(data, data + row_major.byte_size());
    outputs->push_back(std::move(tensor));
  }
  return absl::OkStatus();
}

std::vector<Shape> CpuModel::InputShapes(const std::vector<Value>& slots) const {
  std::vector<Shape> shapes;
  for (int id : graph_.input_ids) shapes.push_back(slots[id].shape());
  return shapes;
}

std::shared_ptr<const ActivationPlan> CpuModel::FindPlan(const std::vector<Shape>& key) const {
  std::lock_guard<std::mutex> lock(plans_mu_);
  auto it = plans_.find(key);
  return it == plans_.end() ? nullptr : it->second;
}

void CpuModel::StorePlan(const std::vector<Shape>& key,
                         std::shared_ptr<const ActivationPlan> plan) const {
  std::lock_guard<std::mutex> lock(plans_mu_);
  if (plans_.size() < kMaxCachedPlans) plans_.emplace(key, std::move(plan));
}

Status CpuModel::RunImpl(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs,
                         std::vector<LayerTiming>* timings) {
  const ConcurrentRun share;  // the pool shares the threads with runs of other models meanwhile
  StringArena strings;  // declared before `slots`: outlives every Value that points into it
  std::vector<Value> slots(graph_.value_names.size());
  TESSERA_RETURN_IF_ERROR(ValidateInputs(inputs, &slots, &strings));
  if (!plan_memory_) {
    TESSERA_RETURN_IF_ERROR(
        Execute(&slots, pool_.get(), nullptr, nullptr, nullptr, timings, &strings));
    return CopyOutputs(slots, outputs);
  }
  const std::vector<Shape> key = InputShapes(slots);
  std::shared_ptr<const ActivationPlan> plan = FindPlan(key);
  if (plan == nullptr) {
    // First Run with these shapes: run on fresh allocations, learning the sizes to plan from.
    Recording recording(slots.size());
    TESSERA_RETURN_IF_ERROR(
        Execute(&slots, pool_.get(), nullptr, nullptr, &recording, timings, &strings));
    TESSERA_RETURN_IF_ERROR(CopyOutputs(slots, outputs));
    TESSERA_ASSIGN_OR_RETURN(plan, BuildActivationPlan(graph_, ops_, last_use_, keep_, recording));
    StorePlan(key, std::move(plan));
    return absl::OkStatus();
  }
  if (arena_.byte_size() < plan->arena_bytes) {
    arena_ = Value();  // free the old arena before allocating the larger one
    arena_ = Value::Allocate(DataType::kUint8, {static_cast<int64_t>(plan->arena_bytes)});
  }
  // Tuned on planned Runs only: the Run that records a plan allocates afresh and builds oneDNN
  // primitives, which would make its nodes look slower than they are.
  NodeParallelism* parallelism =
      tune_node_parallelism_ && pool_->num_threads() > 1 ? &plan->parallelism : nullptr;
  if (parallelism != nullptr) {
    parallelism->BeginRun(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count());
  }
  const ThreadPool::RunScope in_run(pool_.get(),
                                    /*wake=*/parallelism == nullptr || parallelism->any_pool());
  TESSERA_RETURN_IF_ERROR(Execute(&slots, pool_.get(), plan.get(), arena_.mutable_data<std::byte>(),
                                  nullptr, timings, &strings, parallelism));
  return CopyOutputs(slots, outputs);
}

StatusOr<MemoryPlanInfo> CpuModel::PlanMemory(int64_t batch) const {
  if (batch < 1) return absl::InvalidArgumentError(absl::StrCat("batch ", batch, " < 1"));
  // Zero-filled inputs with every dynamic dim set to `batch`.
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < graph_.inputs.size(); ++i) {
    const TensorInfo& info = graph_.inputs[i];
    if (!graph_.input_rank_known[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("input \"", info.name, "\" has no declared shape to plan from"));
    }
    Tensor t;
    t.name = info.name;
    t.dtype = info.dtype;
    t.shape = info.shape;
    for (int64_t& d : t.shape) {
      if (d < 0) d = batch;
    }
    // Zero bytes are zeros, or for STRING empty strings (each a zero 4-byte length).
    const size_t element_bytes =
        t.dtype == DataType::kString ? kBytesLengthPrefix : DataTypeByteSize(t.dtype);
    t.bytes.assign(static_cast<size_t>(ElementCount(t.shape)) * element_bytes, std::byte{0});
    tensors.push_back(std::move(t));
  }
  std::vector<TensorView> views;
  for (Tensor& t : tensors) views.push_back(t.View());
  std::shared_ptr<const ActivationPlan> plan;
  try {
    StringArena strings;
    std::vector<Value> slots(graph_.value_names.size());
    TESSERA_RETURN_IF_ERROR(ValidateInputs(views, &slots, &strings));
    const std::vector<Shape> key = InputShapes(slots);
    plan = FindPlan(key);
    if (plan == nullptr) {
      // Single-threaded (null pool) and arena-free, so it cannot disturb a concurrent Run.
      Recording recording(slots.size());
      TESSERA_RETURN_IF_ERROR(
          Execute(&slots, nullptr, nullptr, nullptr, &recording, nullptr, &strings));
      TESSERA_ASSIGN_OR_RETURN(plan,
                               BuildActivationPlan(graph_, ops_, last_use_, keep_, recording));
      StorePlan(key, plan);
    }
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory planning activations");
  }
  return MemoryPlanInfo{batch, plan->arena_bytes, plan->naive_bytes, plan->num_values};
}

// Models loaded from the same unchanged file share one prepared graph and so its weights (a
// Value's storage is shared on copy): the instances of a model in one executor hold its weights
// once. Entries are weak: the graph goes when the last Model using it does.
class GraphCache {
 public:
  // `kept`: ModelOptions::overridable_initializers, which change the graph.
  StatusOr<std::shared_ptr<const SharedModelData>> Get(const std::string& path,
                                                       std::vector<std::string> kept = {}) {
    std::sort(kept.begin(), kept.end());
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return PrepareShared(path, kept);  // import reports it
    const std::string key =
        absl::StrCat(path, "|", st.st_dev, ":", st.st_ino, "|", st.st_size, "|", st.st_mtim.tv_sec,
                     ".", st.st_mtim.tv_nsec, "|", kept.size(), ":", absl::StrJoin(kept, "\n"));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = graphs_.find(key); it != graphs_.end()) {
        if (std::shared_ptr<const SharedModelData> shared = it->second.lock()) return shared;
      }
    }
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const SharedModelData> shared,
                             PrepareShared(path, kept));
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = graphs_.begin(); it != graphs_.end();) {
      it = it->second.expired() ? graphs_.erase(it) : std::next(it);
    }
    graphs_[key] = shared;
    return shared;
  }

 private:
  static StatusOr<std::shared_ptr<const SharedModelData>> PrepareShared(
      const std::string& path, const std::vector<std::string>& kept) {
    TESSERA_ASSIGN_OR_RETURN(Graph graph, PrepareCpuGraph(path, kept));
    return std::shared_ptr<const SharedModelData>(
        std::make_shared<SharedModelData>(std::move(graph)));
  }

  std::mutex mu_;
  std::map<std::string, std::weak_ptr<const SharedModelData>> graphs_ ABSL_GUARDED_BY(mu_);
};

GraphCache& SharedGraphs() {
  static auto* cache = new GraphCache();
  return *cache;
}

}  // namespace

StatusOr<std::unique_ptr<Model>> LoadOnnxModel(const std::string& path,
                                               const ModelOptions& options) {
#ifndef TESSERA_HAVE_CUDA
  if (options.backend != Backend::kCpu) {
    return absl::UnimplementedError("only the CPU backend is available in this build");
  }
#endif
  try {
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const SharedModelData> shared,
                             SharedGraphs().Get(path, options.overridable_initializers));
    std::map<std::string, Value> defaults = shared->graph().input_defaults;
    std::map<std::string, DataType> input_float16 = shared->graph().input_float16;
    std::map<std::string, DataType> output_float16 = shared->graph().output_float16;
    std::unique_ptr<Model> model;
#ifdef TESSERA_HAVE_CUDA
    if (options.backend == Backend::kCuda) {
      auto cuda_model = LoadCudaModel(Graph(shared->graph()), options);
      if (!cuda_model.ok()) return Prefixed(cuda_model.status(), path);
      model = *std::move(cuda_model);
    }
#endif
    if (model == nullptr) {
      model = std::make_unique<CpuModel>(std::move(shared), options);
    }
    if (!defaults.empty()) {
      model = std::make_unique<DefaultedInputsModel>(std::move(model), std::move(defaults));
    }
    if (!input_float16.empty() || !output_float16.empty()) {
      model = std::make_unique<Float16InterfaceModel>(std::move(model), std::move(input_float16),
                                                      std::move(output_float16));
    }
    return model;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ": out of memory loading the model"));
  }
}

Status CheckBackendSupport(const std::string& path, Backend backend,
                           const std::vector<Shape>* input_shapes,
                           std::vector<Shape>* output_shapes) {
  try {
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const SharedModelData> shared,
                             SharedGraphs().Get(path));
    if (backend == Backend::kCpu) return absl::OkStatus();
#ifndef TESSERA_HAVE_CUDA
    (void)input_shapes;
    (void)output_shapes;
#endif
#ifdef TESSERA_HAVE_CUDA
    if (backend == Backend::kCuda) {
      Status status = CheckCudaSupport(Graph(shared->graph()), input_shapes, output_shapes);
      return status.ok() ? status : Prefixed(status, path);
    }
#endif
    return absl::UnimplementedError("only the CPU backend is available in this build");
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ": out of memory loading the model"));
  }
}

}  // namespace tessera::engine
