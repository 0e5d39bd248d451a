// The engine's graph IR: values (numbered), constant values (weights and folded subgraphs), and
// nodes in topological order. Built by onnx_import, run by the CPU model; backend independent.
//
// Thread-safety: a Graph is immutable once built and may be read from any number of threads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/value.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {

// One node attribute; which members are meaningful depends on `kind`.
struct Attribute {
  enum class Kind { kInt, kFloat, kInts, kFloats, kString, kStrings, kTensor };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::string s;
  std::vector<std::string> strings;
  Value tensor;
};

class Attributes {
 public:
  void Set(const std::string& name, Attribute attribute) { map_[name] = std::move(attribute); }
  bool Has(const std::string& name) const { return map_.count(name) != 0; }
  const Attribute* Find(const std::string& name) const;

  // Typed getters return `fallback` when the attribute is absent.
  int64_t GetInt(const std::string& name, int64_t fallback) const;
  float GetFloat(const std::string& name, float fallback) const;
  std::vector<int64_t> GetInts(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::string GetString(const std::string& name, std::string fallback = "") const;
  std::vector<std::string> GetStrings(const std::string& name) const;  // empty when absent

  const std::map<std::string, Attribute>& all() const { return map_; }

 private:
  std::map<std::string, Attribute> map_;
};

inline constexpr int kNoValue = -1;  // an omitted optional input

struct Node {
  std::string name;     // as in the model file; may be empty
  // ONNX op type. Default domain: as in the file ("Conv"); ai.onnx.ml: prefixed with the domain
  // ("ai.onnx.ml.LabelEncoder"), so one name space serves both. No other domain is imported.
  std::string op_type;
  int opset = 0;  // the model's opset of the node's domain (semantics differ across versions)
  Attributes attributes;
  std::vector<int> inputs;   // value ids; kNoValue for an omitted optional input
  std::vector<int> outputs;  // value ids

  // `node "name" (Op)` for error messages; uses the first output when the node has no name.
  std::string Describe(const std::vector<std::string>& value_names) const;
};

// Dims in Graph::shapes: >= 0 static; kBatchDim is the batch (the graph inputs' dynamic leading
// dim, one symbol shared by every input); kUnknownDim is any other size known only at Run.
inline constexpr int64_t kBatchDim = -1;
inline constexpr int64_t kUnknownDim = -2;

struct Graph {
  std::vector<std::string> value_names;        // indexed by value id
  std::vector<std::optional<Value>> constants;  // indexed by value id; set for weights/folded values
  std::vector<Node> nodes;                      // topological order
  std::vector<int> input_ids;                   // runtime graph inputs, declaration order
  std::vector<TensorInfo> inputs;
  std::vector<bool> input_rank_known;  // false when the file declares no shape for the input
  std::vector<int> output_ids;
  std::vector<TensorInfo> outputs;
  int opset = 0;     // default domain
  int ml_opset = 0;  // ai.onnx.ml; 0 when the model imports none

  // Graph inputs that also have an initializer (ONNX's overridable initializers, as IR < 4
  // exporters list every weight). They are constants unless KeepInitializerInputs makes them
  // inputs, whose values then move to `input_defaults`.
  struct InitializerInput {
    int id = kNoValue;
    TensorInfo info;
    bool rank_known = false;
    DataType file_dtype = DataType::kInvalid;  // the declared type (see input_float16)
  };
  std::vector<InitializerInput> initializer_inputs;
  // By input name: the value a Run that leaves the input out runs with.
  std::map<std::string, Value> input_defaults;

  // Graph inputs and outputs the file declares FLOAT16 or BFLOAT16, by name, with that type. The
  // engine computes them in FP32, as onnxruntime's CPU provider does for ops without 16-bit
  // kernels: `inputs`/`outputs` say kFp32, weights and constants of those types are widened
  // (exactly) at import, and a Cast or EyeLike to them gives FP32. The Model converts at its
  // interface (Float16InterfaceModel), so callers see the declared types.
  std::map<std::string, DataType> input_float16;
  std::map<std::string, DataType> output_float16;

  // Filled by InferShapes (graph_passes.h), indexed by value id: the static shape (dims as above;
  // nullopt = rank unknown) and dtype (kInvalid = unknown). Never wrong, possibly incomplete.
  std::vector<std::optional<Shape>> shapes;
  std::vector<DataType> dtypes;
  // True when some graph input's leading dim is dynamic, i.e. Run accepts any batch size. False
  // for files that declare a fixed leading dim (e.g. 1) and after the passes pinned the batch to 1
  // because a Reshape hard-codes it (see graph_passes.h).
  bool dynamic_batch = false;

  // Adds a value (not constant, shape unknown) and returns its id.
  int AddValue(const std::string& name);
  bool IsConstant(int id) const { return id >= 0 && constants[id].has_value(); }
  // Bytes of the constants (a STRING constant: its handles and its strings' bytes).
  uint64_t ConstantBytes() const;
};

// Ends a backend's "missing input" error: only an input with a default may be left out.
inline constexpr char kNoDefaultNote[] =
    " (it has no default: the model file has no initializer of that name, or the loader did not "
    "keep it as an input)";

// The domain prefix of ai.onnx.ml op types in Node::op_type.
inline constexpr char kMlDomainPrefix[] = "ai.onnx.ml.";

// onnxruntime's contrib op for MatMulInteger -> Cast -> Mul by the scales (-> Add bias), which
// quantize_dynamic writes for every MatMul with weights: Y = (A - a_zero)(B - b_zero) * a_scale *
// b_scale + bias in FP32. Only the CPU model's FuseIntegerToFloat makes it (the import
// refuses com.microsoft ops in files).
inline constexpr char kMatMulIntegerToFloat[] = "com.microsoft.MatMulIntegerToFloat";
// The same for ConvInteger (no onnxruntime op means it): inputs x, w, x_scale, w_scale,
// x_zero_point, w_zero_point, an FP32 bias of one value per output channel and a residual of the
// output's shape added after it, ConvInteger's attributes, and a fused Relu or Clip
// (graph_passes.h's tessera_activation, tessera_clip_min, tessera_clip_max) when it absorbed one.
// Also made only by FuseIntegerToFloat; the domain is the engine's own.
inline constexpr char kConvIntegerToFloat[] = "tessera.ConvIntegerToFloat";

// The name of some STRING (BYTES) tensor of the graph (input, output, constant, or a value
// InferShapes typed kString), or nullopt when there is none: for backends without string kernels.
std::optional<std::string> FindStringTensor(const Graph& graph);

}  // namespace tessera::engine
