// Small ONNX graphs for the CUDA op tests (built here, written to the test temp dir) and the
// comparison of a graph's CUDA outputs with the CPU engine's. For tests only.
#pragma once

#include <cmath>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "engine/cuda/cuda_test_util.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace tessera::engine {

// A one-graph ONNX model assembled in the test.
class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 17) {
    model_.set_ir_version(8);
    model_.add_opset_import()->set_version(opset);
  }
  // A FLOAT graph input; -1 dims are dynamic.
  ModelBuilder& Input(const std::string& name, const Shape& shape,
                      onnx::TensorProto::DataType type = onnx::TensorProto::FLOAT) {
    auto* t = graph()->add_input()->mutable_type()->mutable_tensor_type();
    graph()->mutable_input(graph()->input_size() - 1)->set_name(name);
    t->set_elem_type(type);
    for (int64_t d : shape) {
      auto* dim = t->mutable_shape()->add_dim();
      if (d >= 0)
        dim->set_dim_value(d);
      else
        dim->set_dim_param("batch");
    }
    return *this;
  }
  ModelBuilder& IntInput(const std::string& name, const Shape& shape) {
    return Input(name, shape, onnx::TensorProto::INT64);
  }
  ModelBuilder& Output(const std::string& name,
                       onnx::TensorProto::DataType type = onnx::TensorProto::FLOAT) {
    auto* out = graph()->add_output();
    out->set_name(name);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    return *this;
  }
  ModelBuilder& FloatInit(const std::string& name, const Shape& shape, std::vector<float> data) {
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t->add_dims(d);
    for (float v : data) t->add_float_data(v);
    return *this;
  }
  ModelBuilder& IntInit(const std::string& name, const Shape& shape, std::vector<int64_t> data) {
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : shape) t->add_dims(d);
    for (int64_t v : data) t->add_int64_data(v);
    return *this;
  }
  onnx::NodeProto* Node(const std::string& op, std::vector<std::string> inputs,
                        std::vector<std::string> outputs) {
    auto* node = graph()->add_node();
    node->set_op_type(op);
    node->set_name(op + "_" + std::to_string(graph()->node_size()));
    for (auto& i : inputs) node->add_input(i);
    for (auto& o : outputs) node->add_output(o);
    return node;
  }
  std::string Write(const std::string& file) {
    const std::string path = ::testing::TempDir() + "/" + file + ".onnx";
    std::ofstream out(path, std::ios::binary);
    model_.SerializeToOstream(&out);
    return path;
  }

 private:
  onnx::GraphProto* graph() { return model_.mutable_graph(); }
  onnx::ModelProto model_;
};

inline void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void IntsAttr(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void StringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

struct Feed {
  std::string name;
  Shape shape;
  float lo = -1.0f, hi = 1.0f;
  bool int64 = false;  // INT64 values in [lo, hi) (integral)
  // > 0: values rounded to multiples of it, exact in FP16 too (step functions such as Floor would
  // otherwise see an FP16 run's rounded input cross an integer the FP32 reference does not).
  float step = 0;
};

inline Tensor FeedTensor(const Feed& f, uint32_t seed) {
  std::vector<float> values = Pattern(ElementCount(f.shape), seed, f.lo, f.hi);
  if (f.step > 0) {
    for (float& v : values) v = std::round(v / f.step) * f.step;
  }
  if (!f.int64) return FloatTensor(f.name, f.shape, values);
  Tensor t;
  t.name = f.name;
  t.dtype = DataType::kInt64;
  t.shape = f.shape;
  t.bytes.resize(values.size() * sizeof(int64_t));
  auto* out = reinterpret_cast<int64_t*>(t.bytes.data());
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<int64_t>(std::floor(values[i]));
  return t;
}

// Runs `path` on the CPU and on CUDA (FP32 and FP16, graphs on, three Runs each so the replayed
// graph is checked too) and compares every output. `post` may adjust the CPU outputs first.
inline void CompareWithCpu(const std::string& path, const std::vector<Feed>& feeds,
                           const std::function<void(std::vector<Tensor>*)>& post = nullptr) {
  auto cpu_model = LoadOnnxModel(path, ModelOptions{});
  if (!cpu_model.ok() && cpu_model.status().code() == absl::StatusCode::kUnimplemented) {
    GTEST_SKIP() << "the CPU reference of this build lacks the op: " << cpu_model.status();
  }
  ASSERT_TRUE(cpu_model.ok()) << cpu_model.status();
  std::vector<Tensor> inputs;
  uint32_t seed = 1;
  for (const Feed& f : feeds) {
    inputs.push_back(FeedTensor(f, seed++));
  }
  std::vector<TensorView> views;
  for (Tensor& t : inputs) views.push_back(t.View());
  std::vector<Tensor> want;
  ASSERT_TRUE((*cpu_model)->Run(views, &want).ok());
  if (post) post(&want);
  for (Precision precision : {Precision::kFp32, Precision::kFp16}) {
    auto gpu = LoadOnnxModel(path, CudaOptions(precision, true));
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    for (int run = 0; run < 3; ++run) {
      if (run == 2) {  // the second Run captured the graph; the third replays it
        auto captured = CudaGraphsCaptured(**gpu);
        ASSERT_TRUE(captured.ok()) << captured.status();
        EXPECT_EQ(*captured, 1);
      }
      std::vector<Tensor> got;
      Status status = (*gpu)->Run(views, &got);
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ExpectTensorsClose(got[i], want[i], Tolerance(precision),
                           std::string(precision == Precision::kFp16 ? "fp16 " : "fp32 ") + "run " +
                               std::to_string(run) + " output " + want[i].name);
      }
    }
  }
}

}  // namespace tessera::engine
