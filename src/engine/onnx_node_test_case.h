// Running one ONNX node test case (model.onnx + test_data_set_N/{input,output}_K.pb, the layout of
// Debian's libonnx-testdata and of tools/export_op_cases.py) on the engine: shared by the CPU
// conformance test and the CUDA one. Test support only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/onnx_import.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "tessera/common/float16.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {

namespace fs = std::filesystem;

// The ONNX node tests: $TESSERA_ONNX_NODE_TESTS when set (a GPU machine gets them carried in the
// bundle), else Debian's libonnx-testdata.
inline fs::path NodeTestsDir() {
  const char* env = std::getenv("TESSERA_ONNX_NODE_TESTS");
  return env != nullptr && env[0] != '\0' ? fs::path(env)
                                           : fs::path("/usr/share/libonnx-testdata/data/node");
}

// How close an output must be: |actual - expected| <= abs + rel * |expected|.
struct CaseTolerance {
  double abs = 1e-5;
  double rel = 1e-4;
};

// Op types used by the case's model, or empty when the file does not parse.
inline std::set<std::string> OpTypes(const fs::path& model_path) {
  std::ifstream in(model_path, std::ios::binary);
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in)) return {};
  std::set<std::string> ops;
  for (const auto& node : model.graph().node()) {
    ops.insert(node.domain().empty() ? node.op_type() : node.domain() + "." + node.op_type());
  }
  return ops;
}

// Element k of a tensor of any dtype the engine produces, as a double for comparison.
inline double ElementAsDouble(const Tensor& t, int64_t k) {
  const std::byte* p = t.bytes.data();
  switch (t.dtype) {
    case DataType::kFp32:
      return reinterpret_cast<const float*>(p)[k];
    case DataType::kInt64:
      return static_cast<double>(reinterpret_cast<const int64_t*>(p)[k]);
    case DataType::kInt32:
      return reinterpret_cast<const int32_t*>(p)[k];
    case DataType::kBool:
      return reinterpret_cast<const uint8_t*>(p)[k] != 0 ? 1.0 : 0.0;
    case DataType::kUint8:
      return reinterpret_cast<const uint8_t*>(p)[k];
    case DataType::kFp16:
      return static_cast<double>(reinterpret_cast<const _Float16*>(p)[k]);
    case DataType::kBf16:
      return Bf16ToFloat(reinterpret_cast<const uint16_t*>(p)[k]);
    default:
      ADD_FAILURE() << "unexpected output dtype " << static_cast<int>(t.dtype);
      return std::nan("");
  }
}

// ONNX 1.12's test data stores BFLOAT16 tensors as UINT16 (numpy has no bfloat16): the same bits.
inline void AsBf16IfUint16(DataType model_dtype, Tensor* tensor) {
  if (model_dtype == DataType::kBf16 && tensor->dtype == DataType::kUint16) {
    tensor->dtype = DataType::kBf16;
  }
}

// Runs one case (its data set `data_set`) with `options` (the backend); returns "" on success,
// "SKIP: reason" to skip (UNIMPLEMENTED at load: an op, dtype or attribute the backend lacks), or
// the failure. `max_error`, when given, receives the largest |actual - expected| / (1 + |expected|).
inline std::string RunCase(const fs::path& dir, const std::string& data_set = "test_data_set_0",
                           double* max_error = nullptr, const ModelOptions& options = {},
                           CaseTolerance tolerance = {}) {
  auto loaded = LoadOnnxModel((dir / "model.onnx").string(), options);
  if (!loaded.ok()) {
    if (loaded.status().code() == absl::StatusCode::kUnimplemented) {
      return "SKIP: " + std::string(loaded.status().message());
    }
    return "load failed: " + std::string(loaded.status().message());
  }
  Model& model = **loaded;
  // UINT8 and INT8 are imported for mask buffers (older GPT-2 exports), which are sliced and
  // cast, and for quantized models, whose (de)quantizing and integer convolution and matrix
  // product ops take them; no other kernel computes on them: other cases that feed them into the
  // graph are out of scope.
  static const std::set<std::string> kEightBitOps = {
      "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv",
      "QLinearMatMul",  "ConvInteger",      "MatMulInteger"};
  const std::set<std::string> ops = OpTypes(dir / "model.onnx");
  const bool only_qdq = std::all_of(ops.begin(), ops.end(),
                                    [](const std::string& op) { return kEightBitOps.count(op); });
  for (const TensorInfo& info : model.inputs()) {
    if ((info.dtype == DataType::kUint8 || info.dtype == DataType::kInt8) && !only_qdq) {
      return "SKIP: " + std::string(DataTypeToWireName(info.dtype)) + " graph input \"" +
             info.name +
             "\" (8-bit integers are moved, cast, (de)quantized and convolved, not computed on)";
    }
  }
  const fs::path data = dir / data_set;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < model.inputs().size(); ++i) {
    auto tensor = ReadTensorProtoFile((data / ("input_" + std::to_string(i) + ".pb")).string());
    if (!tensor.ok()) {
      if (tensor.status().code() == absl::StatusCode::kUnimplemented) {
        return "SKIP: " + std::string(tensor.status().message());
      }
      return "bad input: " + std::string(tensor.status().message());
    }
    tensor->name = model.inputs()[i].name;
    AsBf16IfUint16(model.inputs()[i].dtype, &*tensor);
    inputs.push_back(*std::move(tensor));
  }
  std::vector<TensorView> views;
  for (Tensor& t : inputs) views.push_back(t.View());
  // Twice: the first Run records and plans memory, the second runs in the planned arena.
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<Tensor> outputs;
    Status status = model.Run(views, &outputs);
    if (!status.ok()) {
      return "run " + std::to_string(pass) + " failed: " + std::string(status.message());
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      auto expected =
          ReadTensorProtoFile((data / ("output_" + std::to_string(i) + ".pb")).string());
      if (!expected.ok()) return "bad output file: " + std::string(expected.status().message());
      AsBf16IfUint16(outputs[i].dtype, &*expected);
      if (expected->dtype != outputs[i].dtype || expected->shape != outputs[i].shape) {
        return "output " + std::to_string(i) + " is " + ShapeToString(outputs[i].shape) +
               ", expected " + ShapeToString(expected->shape);
      }
      if (expected->dtype == DataType::kString) {  // both serialized (bytes_tensor.h): exact
        if (expected->bytes != outputs[i].bytes) {
          return "output " + std::to_string(i) + ": the strings differ";
        }
        continue;
      }
      const int64_t count = ElementCount(expected->shape);
      for (int64_t k = 0; k < count; ++k) {
        const double a = ElementAsDouble(outputs[i], k);
        const double e = ElementAsDouble(*expected, k);
        const bool both_nan = std::isnan(a) && std::isnan(e);
        if (max_error != nullptr && a != e && !both_nan) {
          *max_error = std::max(*max_error, std::fabs(a - e) / (1.0 + std::fabs(e)));
        }
        if (a != e && !both_nan &&
            !(std::fabs(a - e) <= tolerance.abs + tolerance.rel * std::fabs(e))) {
          return "output " + std::to_string(i) + "[" + std::to_string(k) +
                 "] = " + std::to_string(a) + ", expected " + std::to_string(e);
        }
      }
    }
  }
  return "";
}

// Upstream cases whose expected data are wrong (name -> why), for RunClaimedNodeTests' list.
inline std::map<std::string, std::string> KnownBadNodeTestData() {
  // ONNX 1.12's window-function data is up to 7.4e-5 off the exact formulas (e.g. Hann(10)[8]:
  // 0.345562 against 0.5 - 0.5 cos(1.6 pi) = 0.345492, which the engine gives); only the
  // *_expanded forms (Cos, Range, ...) are claimed.
  const std::string window = "up to 7.4e-5 off the exact window formula";
  // FLOAT -> STRING: ONNX 1.12's expected strings are numpy's shortest round-trip form
  // ("0.2961402"); the engine formats as onnxruntime does, printf's %.8g ("0.29614019"), see
  // docs/engine.md. The STRING -> FLOAT cases run.
  const std::string float_format = "numpy's float repr, not onnxruntime's %.8g";
  // ONNX 1.12 made its FLOAT -> BFLOAT16 data by truncating; onnxruntime (1.23 checked) and the
  // engine round to nearest even (0.48033667 -> 0.48046875, not 0.47851562).
  const std::string truncated_bf16 = "BFLOAT16 truncated, not rounded to nearest even";
  // The CastLike BFLOAT16 cases' data give `like` shape [1]; their models declare [3, 4].
  const std::string like_shape = "`like` data of shape [1] for a declared [3, 4]";
  return {{"test_blackmanwindow_expanded", window},
          {"test_blackmanwindow_symmetric_expanded", window},
          {"test_hammingwindow_expanded", window},
          {"test_hammingwindow_symmetric_expanded", window},
          {"test_hannwindow_expanded", window},
          {"test_hannwindow_symmetric_expanded", window},
          {"test_cast_FLOAT_to_STRING", float_format},
          {"test_castlike_FLOAT_to_STRING", float_format},
          {"test_castlike_FLOAT_to_STRING_expanded", float_format},
          {"test_cast_FLOAT_to_BFLOAT16", truncated_bf16},
          {"test_castlike_BFLOAT16_to_FLOAT", like_shape},
          {"test_castlike_BFLOAT16_to_FLOAT_expanded", like_shape},
          {"test_castlike_FLOAT_to_BFLOAT16", like_shape},
          {"test_castlike_FLOAT_to_BFLOAT16_expanded", like_shape}};
}

// What running every claimed case gave.
struct NodeTestRun {
  int passed = 0;
  std::vector<std::string> skipped;      // "name (reason)"
  std::set<std::string> ops_exercised;  // ops of the passing cases
};

// Runs test_data_set_0 of every case under NodeTestsDir() whose ops are all in `claimed`, with
// `options`; a case that neither passes nor skips is a test failure naming it. Cases named in
// `bad_expected_data` (name -> why) are not run but listed as skipped: their upstream expected
// outputs are wrong. Prints the counts, the skipped cases with reasons and the ops exercised,
// under `label`.
inline NodeTestRun RunClaimedNodeTests(
    const std::set<std::string>& claimed, const ModelOptions& options, CaseTolerance tolerance,
    const std::string& label, const std::map<std::string, std::string>& bad_expected_data = {}) {
  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(NodeTestsDir())) {
    if (fs::exists(entry.path() / "model.onnx")) cases.push_back(entry.path());
  }
  std::sort(cases.begin(), cases.end());
  NodeTestRun run;
  for (const fs::path& dir : cases) {
    std::set<std::string> ops = OpTypes(dir / "model.onnx");
    if (ops.empty()) continue;
    if (!std::all_of(ops.begin(), ops.end(),
                     [&](const std::string& op) { return claimed.count(op) != 0; })) {
      continue;
    }
    const std::string name = dir.filename().string();
    if (auto it = bad_expected_data.find(name); it != bad_expected_data.end()) {
      run.skipped.push_back(name + " (wrong upstream expected data: " + it->second + ")");
      continue;
    }
    const std::string result = RunCase(dir, "test_data_set_0", nullptr, options, tolerance);
    if (result.empty()) {
      ++run.passed;
      run.ops_exercised.insert(ops.begin(), ops.end());
    } else if (result.rfind("SKIP: ", 0) == 0) {
      run.skipped.push_back(name + " (" + result.substr(6) + ")");
    } else {
      ADD_FAILURE() << name << ": " << result;
    }
  }
  std::cout << label << ": " << run.passed << " passed, " << run.skipped.size() << " skipped\n";
  for (const std::string& s : run.skipped) std::cout << "  skipped " << s << "\n";
  std::cout << "  ops exercised:";
  for (const std::string& op : run.ops_exercised) std::cout << " " << op;
  std::cout << "\n";
  return run;
}

}  // namespace tessera::engine
