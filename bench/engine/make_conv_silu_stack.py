#!/usr/bin/env python3
"""Writes a YOLO-style stack of Conv + SiLU blocks as ONNX (SiLU as PyTorch exports it: Sigmoid
and Mul), seeded random weights, for comparing the CPU engine's Conv + activation fusion with
onnxruntime (bench/engine/engine_vs_onnxruntime.py --zoo) or with an older engine build.

    .venv/bin/python bench/engine/make_conv_silu_stack.py --out DIR [--channels 64] [--size 56]
        [--blocks 8] [--activation silu|leakyrelu|sigmoid|tanh]

DIR/conv_<activation>_stack/1/model.onnx: input "input" [batch, C, S, S], output "output".
"""

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--size", type=int, default=56)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--activation", default="silu",
                        choices=["silu", "leakyrelu", "sigmoid", "tanh"])
    args = parser.parse_args()
    rng = np.random.default_rng(3)
    c = args.channels
    nodes, weights = [], []
    x = "input"
    for i in range(args.blocks):
        w = (rng.standard_normal((c, c, 3, 3)) * (1.0 / np.sqrt(9 * c))).astype(np.float32)
        b = (rng.standard_normal(c) * 0.1).astype(np.float32)
        weights += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        conv = f"conv{i}"
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [conv], pads=[1, 1, 1, 1]))
        y = "output" if i + 1 == args.blocks else f"act{i}"
        if args.activation == "silu":
            nodes.append(helper.make_node("Sigmoid", [conv], [f"sig{i}"]))
            nodes.append(helper.make_node("Mul", [conv, f"sig{i}"], [y]))
        elif args.activation == "leakyrelu":
            nodes.append(helper.make_node("LeakyRelu", [conv], [y], alpha=0.1))
        else:
            nodes.append(helper.make_node(args.activation.capitalize(), [conv], [y]))
        x = y
    shape = ["batch", c, args.size, args.size]
    graph = helper.make_graph(nodes, "conv_stack",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)],
                              weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # what onnxruntime releases of the last years all read
    onnx.checker.check_model(model)
    folder = Path(args.out) / f"conv_{args.activation}_stack" / "1"
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(folder / "model.onnx"))
    print(folder / "model.onnx")


if __name__ == "__main__":
    main()
