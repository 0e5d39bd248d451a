// Load-time graph passes, run by LoadOnnxModel between the per-node checks and building the
// backend model. Backend independent: they rewrite the Graph IR only (constant folding evaluates
// nodes with the CPU reference kernels, which every build has). RunGraphPasses runs them all:
//
//   1. InferShapes — static dtype and shape per value (Graph::shapes/dtypes); the batch is the
//      symbol kBatchDim. Unknown stays unknown (nullopt / kUnknownDim), never guessed.
//   2. FoldConstants — nodes whose inputs are all constants run once; their outputs become
//      constants (weights, Constant nodes, shape arithmetic on them).
//   3. FoldShapeSubgraphs — int64 shape tensors (Shape→Gather→Unsqueeze→Concat chains of PyTorch
//      exports) are tracked element by element; those whose elements are all statically known
//      become constants, and a Reshape target whose only runtime elements are the batch, at the
//      position where the Reshape's input has the batch, becomes a constant with 0 there ("copy
//      this input dim"). Steps 1–3 repeat until nothing changes.
//   4. RemoveDeadNodes — nodes no graph output needs, and constants nothing reads any more.
//   5. Batch check (dynamic batch, below); when it pins the batch, 1–4 run again (all static now).
//   6. FoldBatchNormIntoConv — inference BatchNormalization whose input is a Conv output read by
//      nothing else (not a graph output), with constant FP32 weights:
//        W' = W·γ/√(var+ε),  b' = (b−μ)·γ/√(var+ε) + β   (computed in double).
//      Any other BatchNormalization stays as it is.
//   7. FuseConvActivation — Conv followed by Relu, or by Clip with constant bounds (ReLU6), where
//      the Conv output has no other reader and is not a graph output, becomes one Conv node with
//      the internal attributes below; the Conv takes over the activation's output value id.
//   Then RemoveDeadNodes frees the replaced weights and InferShapes refreshes Graph::shapes.
//
// Fused-activation convention (read by every Conv kernel, and by the MatMul kernels for "Gelu"
// and "GeluTanh", which only FuseMatMulEpilogues below sets):
//   tessera_activation  kString  "Relu", "Clip", "Gelu" or "GeluTanh"; on the CPU Conv also
//                                "LeakyRelu" (tessera_alpha, kFloat), "Sigmoid", "Tanh", "Swish";
//                                on the CPU BatchNormalization "Relu" (FuseBatchNormRelu)
//   tessera_clip_min    kFloat   Clip only; -infinity when the Clip has no min
//   tessera_clip_max    kFloat   Clip only; +infinity when the Clip has no max
//   tessera_residual    kInt     FuseConvResidual below (CPU and CUDA Conv): input 3 is added to
//                                the output before the activation
//   tessera_scale       kFloat   FuseMatMulScale below (CPU MatMul): the product is multiplied by
//                                it before any bias
//   tessera_concat      kInt     FuseConcatBatchNorm below (CPU BatchNormalization): X and
//                                inputs 5.. are this many parts joined on axis 1
//
// Dynamic batch: the graph inputs' leading dim is the batch. A file declaring a fixed leading dim
// (e.g. 1, an export without dynamic_axes) keeps it: Graph::dynamic_batch is false and Run accepts
// only that size. With a dynamic leading dim, a Reshape whose input has the batch as dim 0 and
// whose (constant) target starts with a literal size k > 0 (e.g. [1, -1] from a trace at batch 1)
// is right only for batch k: for other sizes it mixes samples, silently or with an obscure kernel
// error. The simplest correct behaviour, chosen here: pin the model to batch k. The inputs' leading
// dims become k, Graph::dynamic_batch false, PassSummary::batch_pinned_by names the Reshape and the
// load logs a warning; a Run with another batch then fails with the usual clear input-shape error,
// and the executor's signature check rejects a config with max_batch_size > k at load.
//
// Thread-safety: the passes mutate one Graph; no shared state.
#pragma once

#include <string>

#include "engine/graph.h"
#include "tessera/common/status.h"

namespace tessera::engine {

// What one RunGraphPasses did (logged per load, asserted by tests).
struct PassSummary {
  int nodes_before = 0;
  int nodes_after = 0;
  int constant_folded = 0;      // nodes evaluated once at load (all inputs constant)
  int shape_values_folded = 0;  // runtime int64 values made constant from static shapes
  int reshapes_rewritten = 0;   // Reshape targets made constant with 0 for the batch
  int dead_removed = 0;         // nodes removed because no output needs them
  int batchnorms_folded = 0;
  int activations_fused = 0;
  int layernorms_fused = 0;     // decomposed LayerNorms (opset < 17 exports) made one node
  int gemm_weights_transposed = 0;  // Gemm B constants stored as [K, N] (transB = 0)
  int qdq_convs_fused = 0;          // QDQ convolutions made QLinearConv (FuseQdqConv)
  int qdq_adds_fused = 0;           // QDQ Adds made com.microsoft.QLinearAdd (FuseQdqAdd)
  std::string batch_pinned_by;  // the Reshape that pinned the batch; empty if none

  std::string ToString() const;
};

// Fills graph->shapes and graph->dtypes (resized to the value count) from the graph inputs, the
// constants and the node semantics. Sets graph->dynamic_batch from the inputs.
void InferShapes(Graph* graph);

// Returns the number of nodes folded. Errors come from a kernel, prefixed with the node.
StatusOr<int> FoldConstants(Graph* graph);

// Uses (and refreshes) graph->shapes. Returns values folded + Reshape targets rewritten.
int FoldShapeSubgraphs(Graph* graph, int* reshapes_rewritten = nullptr);

// Returns the number of nodes removed.
int RemoveDeadNodes(Graph* graph);

// Replaces PyTorch's decomposed LayerNorm over the last axis (ReduceMean, Sub, Pow 2, ReduceMean,
// Add eps, Sqrt, Div, Mul gamma, Add beta; constant eps/gamma/beta, no other readers of the
// intermediates) with one LayerNormalization node, which both backends run as one kernel. Needs
// graph->shapes. Returns the number fused.
int FuseLayerNorm(Graph* graph);

// Run by RunGraphPasses before the first constant folding (which would fold the weights'
// DequantizeLinear) when GraphPassOptions::fuse_qdq_convs says the backend runs QLinearConv as an
// integer convolution (cpu::FastQLinearConv). The QDQ form of a statically quantized convolution,
//   QuantizeLinear(Conv(DequantizeLinear(x), DequantizeLinear(W), B) [-> Relu])
// with a per-tensor scale and zero point on x and on the output, constant INT8 W with zero point
// 0 and a scale per tensor or per output channel (axis 0), and B a constant FP32 [M] or
// DequantizeLinear of a constant INT32 [M], becomes one QLinearConv node (a Relu in between: with
// tessera_activation = "Relu") that takes over the QuantizeLinear's output. B is converted to the
// integer sums' unit x_scale * w_scale[m] (kept as it is when quantized with exactly that scale,
// as onnxruntime's quantizer does). The values differ from the unfused graph's only where a
// rounding boundary falls between the integer and the FP32 sums. Needs graph->dtypes. Returns
// the number fused.
int FuseQdqConv(Graph* graph);

// Run by RunGraphPasses with FuseQdqConv, when GraphPassOptions::fuse_qdq_adds is set (the CPU
// always sets it): QuantizeLinear(Add(DequantizeLinear(a), DequantizeLinear(b))) with per-tensor
// constant scales and zero points, a and b of one static shape (the batch may be symbolic), and
// the Add read by the QuantizeLinear alone, becomes one com.microsoft.QLinearAdd node
// (onnxruntime's contrib op of that meaning), which computes the same FP32 operations in one pass
// over the 8-bit values instead of four over FP32 ones: ResNet's residual joins. Needs
// graph->shapes/dtypes. Returns the number fused.
int FuseQdqAdd(Graph* graph);

// Not in RunGraphPasses: each backend applies it to its own copy of the graph (the CPU model, and
// LoadCudaModel), since the fused form exists only for their kernels. A MatMul by a constant 2-D
// FP32 weight absorbs the Add of a constant bias of its output's width, then GELU as PyTorch
// exports it: erf form (Div by sqrt 2, Erf, Add 1, Mul, Mul 0.5) or tanh form
// (nn.GELU(approximate="tanh"): x + 0.044715 x^3, times sqrt(2/pi), Tanh, Add 1, Mul, Mul 0.5); a
// bias-free MatMul can absorb the GELU alone. The MatMul gets the bias as input 2 and
// tessera_activation = "Gelu" or "GeluTanh", and the backend's kernel applies both in one pass over
// the product instead of up to ten. Intermediates with other readers, or that are graph outputs,
// block the fusion. FuseIntegerToFloat's MatMul nodes (constant 2-D B) absorb the same, the bias
// as their input 6. Needs graph->shapes/dtypes. Returns the MatMuls that absorbed something.
int FuseMatMulEpilogues(Graph* graph);

// CPU only, before FuseMatMulEpilogues: MatMulInteger or ConvInteger -> Cast to FLOAT -> Mul by a
// scale, each read by the next alone, the scale one FP32 value or one per column of the product
// (MatMul) or per output channel (Conv) of static shape (what quantize_dynamic writes for a MatMul
// or Conv with weights), becomes one kMatMulIntegerToFloat or kConvIntegerToFloat node (graph.h)
// in the last absorbed node's place. When the scale is Mul(a_scale, b_scale) read by it alone,
// with a_scale one value, the node takes both and that Mul goes too; otherwise the scale is its
// a_scale and a constant 1 its b_scale. A Conv's node also absorbs an Add of a constant bias of
// one value per output channel, then an Add of a computed value of the sum's exact static shape
// (a residual), then a Relu or a Clip with constant bounds ("tessera_activation", with
// "tessera_clip_min" and "tessera_clip_max" for a Clip); a MatMul's get theirs from
// FuseMatMulEpilogues. The kernels compute the same FP32 operations in the same order (Cast,
// a_scale * b_scale, the product of the two, the bias). Returns the number fused.
int FuseIntegerToFloat(Graph* graph);

// Like FuseMatMulEpilogues, applied by each backend to its own copy: a 2-D Conv without a fused
// activation whose output's only reader is an Add with another value of exactly its (static) shape,
// computed before the Conv, takes that value as input 3 ("tessera_residual" = 1; a missing bias
// becomes kNoValue) and the Add's output. Running FuseConvActivation again afterwards then fuses a
// following Relu, applied after the residual (ResNet's Conv, BN, Add, Relu). Returns the Convs that
// took a residual.
int FuseConvResidual(Graph* graph);

// CPU only (the CUDA Conv takes Relu and Clip alone): a Conv without a fused activation whose
// output's only reader is a LeakyRelu, Sigmoid or Tanh, or whose output x is read only by
// Sigmoid(x) and by Mul(x, Sigmoid(x)) (SiLU / Swish, as PyTorch exports it), takes that
// activation ("tessera_activation" = "LeakyRelu" with "tessera_alpha", "Sigmoid", "Tanh",
// "Swish") and the last node's output. After a residual, the activation still comes last.
// Returns the Convs that took one.
int FuseConvEltwise(Graph* graph);

// CPU only: a BatchNormalization (not folded into a Conv: DenseNet's and pre-activation ResNets'
// come before theirs) whose output's only reader is a Relu takes it ("tessera_activation" =
// "Relu") and the Relu's output, so the activation is applied in the normalisation's pass.
// Returns the BatchNormalizations that took one.
int FuseBatchNormRelu(Graph* graph);

// CPU only: a BatchNormalization whose X is a Concat on the channel axis read by it alone
// (DenseNet's dense layers normalise the concatenation of every earlier layer's features) takes
// the Concat's inputs: the first as X, the others as inputs 5.. ("tessera_concat" = their count),
// and normalises them into its output directly, so the joined tensor is never written (a Concat
// of one input, a copy, is skipped the same way). Returns
// the BatchNormalizations that took one.
int FuseConcatBatchNorm(Graph* graph);

// CPU only: a MatMul without an epilogue whose output's only reader is a Div by a constant scalar
// c, or a Mul by one (attention's scores / sqrt(d)), takes "tessera_scale" = 1/c or c (kFloat) and
// that node's output: the scale becomes the GEMM's alpha instead of a pass over the scores.
// Returns the MatMuls that took one.
int FuseMatMulScale(Graph* graph);

int FoldBatchNormIntoConv(Graph* graph);
int FuseConvActivation(Graph* graph);

// A Gemm with transB = 1 whose B is an FP32 constant read by it alone (PyTorch's Linear layers,
// a CNN's classifier) gets B stored transposed, [K, N], and transB = 0; the old constant is left
// for RemoveDeadNodes to free. GEMM libraries pack a transposed B on every call: oneDNN's sgemm
// took twice as long for 8 rows against 1280 x 1000 weights, and the CUDA backend takes either.
// Returns the Gemms changed.
int TransposeGemmWeights(Graph* graph);

// What RunGraphPasses may do beyond 1–7, by what the backend runs well.
struct GraphPassOptions {
  bool fuse_qdq_convs = false;  // FuseQdqConv, first
  bool fuse_qdq_adds = false;   // FuseQdqAdd, after it
};

// Runs 1–7 in order; the graph is ready for a backend afterwards (shapes refreshed). Errors:
// a kernel failing on constant inputs while folding (the node is named).
StatusOr<PassSummary> RunGraphPasses(Graph* graph, const GraphPassOptions& options = {});

}  // namespace tessera::engine
