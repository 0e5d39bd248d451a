// Builds small ONNX models in tests (protobufs written to the test temp dir). For tests only.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace tessera::engine {

class OnnxBuilderForTest {
 public:
  OnnxBuilderForTest() {
    model_.set_ir_version(8);
    model_.add_opset_import()->set_version(13);
    graph_ = model_.mutable_graph();
    graph_->set_name("onednn_test");
  }

  // Replaces the default-domain opset (13); with `ml_opset` > 0 also imports ai.onnx.ml.
  void Opsets(int opset, int ml_opset = 0) {
    model_.mutable_opset_import(0)->set_version(opset);
    if (ml_opset > 0) {
      auto* ml = model_.add_opset_import();
      ml->set_domain("ai.onnx.ml");
      ml->set_version(ml_opset);
    }
  }

  // A graph input; a negative dim is the symbolic "batch".
  void Input(const std::string& name, std::vector<int64_t> dims,
             int elem_type = onnx::TensorProto::FLOAT) {
    SetInfo(graph_->add_input(), name, dims, elem_type);
  }
  void Output(const std::string& name, int elem_type = onnx::TensorProto::FLOAT) {
    auto* info = graph_->add_output();
    info->set_name(name);
    info->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
  }
  // A constant FP32 tensor of seeded random values (scaled to keep activations O(1)).
  void Weight(const std::string& name, std::vector<int64_t> dims, float scale) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t count = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      count *= d;
    }
    std::normal_distribution<float> dist(0.0f, scale);
    for (int64_t i = 0; i < count; ++i) t->add_float_data(dist(rng_));
  }
  void FloatConstant(const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
  }
  void StringConstant(const std::string& name, std::vector<int64_t> dims,
                      std::vector<std::string> values) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::STRING);
    for (int64_t d : dims) t->add_dims(d);
    for (const std::string& v : values) t->add_string_data(v);
  }
  // A new initializer for the caller to fill (types the helpers above do not write).
  onnx::TensorProto* AddInitializer() { return graph_->add_initializer(); }
  void Int64Constant(const std::string& name, std::vector<int64_t> values) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  onnx::NodeProto* Node(const std::string& op, std::vector<std::string> inputs,
                        std::vector<std::string> outputs, const std::string& domain = "") {
    auto* node = graph_->add_node();
    node->set_op_type(op);
    node->set_domain(domain);
    node->set_name(outputs[0] + "_node");
    for (const auto& in : inputs) node->add_input(in);
    for (const auto& out : outputs) node->add_output(out);
    return node;
  }
  static void Ints(onnx::NodeProto* node, const std::string& name, std::vector<int64_t> values) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  static void String(onnx::NodeProto* node, const std::string& name, const std::string& value) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
  }
  static void Strings(onnx::NodeProto* node, const std::string& name,
                      std::vector<std::string> values) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRINGS);
    for (const auto& v : values) a->add_strings(v);
  }
  static void Int(onnx::NodeProto* node, const std::string& name, int64_t value) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  static void Float(onnx::NodeProto* node, const std::string& name, float value) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(value);
  }

  // Into a folder of this process: CTest runs the cases of one binary at once, and two of them
  // writing one file name would read each other's half-written models.
  std::string Write(const std::string& file) {
    const std::filesystem::path folder = std::filesystem::path(::testing::TempDir()) /
                                         ("tessera-onnx-" + std::to_string(::getpid()));
    std::filesystem::create_directories(folder);
    std::string path = (folder / file).string();
    std::ofstream out(path, std::ios::binary);
    model_.SerializeToOstream(&out);
    return path;
  }

 private:
  static void SetInfo(onnx::ValueInfoProto* info, const std::string& name,
                      const std::vector<int64_t>& dims, int elem_type) {
    info->set_name(name);
    auto* tensor = info->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(elem_type);
    for (int64_t d : dims) {
      auto* dim = tensor->mutable_shape()->add_dim();
      if (d < 0) {
        dim->set_dim_param("batch");
      } else {
        dim->set_dim_value(d);
      }
    }
  }

  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
  std::mt19937 rng_{42};
};

}  // namespace tessera::engine
