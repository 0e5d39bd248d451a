"""Writes one-op ONNX models in the model zoo's layout (OUT/<name>/1/model.onnx), for timing
single op shapes with engine_vs_onnxruntime.py: a Conv (+ Relu) per CONVS entry, and a Linear
layer as PyTorch exports it (Gemm with transB = 1, W [N, K]) per GEMMS entry.

    .venv/bin/python bench/engine/make_single_op_models.py --out /tmp/single
    .venv/bin/python bench/engine/engine_vs_onnxruntime.py --zoo /tmp/single \
        --models pw16_48,pw24_72,first,fc2048_1000_tb --batches 1,8

A one-node model pays the layout conversions of its graph input and output, which a whole CNN
pays once, so the Conv models measure a Conv shape in the worst setting, not a model.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# name: (input channels, output channels, input height = width, kernel, stride, group)
CONVS = {
    "first": (3, 32, 224, 3, 2, 1),  # MobileNet's and MNASNet's stem
    "pw16_48": (16, 48, 112, 1, 1, 1),
    "pw24_72": (24, 72, 56, 1, 1, 1),
    "pw192_1152": (192, 1152, 7, 1, 1, 1),
    "dw5_1152": (1152, 1152, 7, 5, 1, 1152),
}

# name: (K, N)
GEMMS = {
    "fc1280_1000_tb": (1280, 1000),  # MobileNetV2's and MNASNet's classifier
    "fc2048_1000_tb": (2048, 1000),  # ResNet-50's
}
# Written only with --large: VGG-16's first classifier layer, 411 MB of weights.
LARGE_GEMMS = {"fc25088_4096_tb": (25088, 4096)}


def gemm_model(k, n, rng):
    w = numpy_helper.from_array((rng.random((n, k)) - 0.5).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.random(n).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], "single_gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", n])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def conv_model(cin, cout, hw, k, stride, group, rng):
    ho = (hw + 2 * (k // 2) - k) // stride + 1
    w = numpy_helper.from_array(
        ((rng.random((cout, cin // group, k, k)) - 0.5) * 0.1).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.random(cout).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k],
                         strides=[stride, stride], pads=[k // 2] * 4, group=group),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "single_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", cin, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", cout, ho, ho])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--large", action="store_true", help="also the LARGE_GEMMS models")
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    models = {name: conv_model(*shape, rng) for name, shape in CONVS.items()}
    gemms = {**GEMMS, **(LARGE_GEMMS if args.large else {})}
    models.update({name: gemm_model(*shape, rng) for name, shape in gemms.items()})
    for name, model in models.items():
        path = os.path.join(args.out, name, "1", "model.onnx")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        onnx.save(model, path)
        print(path)


if __name__ == "__main__":
    main()
