#!/usr/bin/env python3
"""Writes a YOLO-style stack of Conv + SiLU blocks as ONNX (SiLU as PyTorch exports it: Sigmoid
and Mul), seeded random weights, for comparing the CPU engine's Conv + activation fusion with
onnxruntime (bench/engine/engine_vs_onnxruntime.py --zoo) or with an older engine build.

    .venv/bin/python bench/engine/make_conv_silu_stack.py --out DIR [--channels 64] [--size 56]
        [--blocks 8] [--activation silu|leakyrelu|sigmoid|tanh] [--c2f | --se]

DIR/conv_<activation>_stack/1/model.onnx: input "input" [batch, C, S, S], output "output".
With --c2f each block is YOLOv8's C2f instead (DIR/c2f_<activation>_stack): a 1x1 Conv, a Split
of its channels in two halves, a bottleneck of two 3x3 Convs with a residual Add on the second
half, a Concat of the two halves and the bottleneck's output, and a 1x1 Conv back to C channels.
With --se each block's output is multiplied by a squeeze-excitation gate (DIR/se_<activation>_stack).
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
    parser.add_argument("--c2f", action="store_true", help="YOLOv8 C2f blocks (see above)")
    parser.add_argument("--se", action="store_true",
                        help="a squeeze-excitation gate after every block (see above)")
    args = parser.parse_args()
    rng = np.random.default_rng(3)
    c = args.channels
    nodes, weights = [], []

    def conv_act(x, cin, cout, k, name, y=None):
        """Conv k x k (cin -> cout) + the activation; returns the activation's output name."""
        w = (rng.standard_normal((cout, cin, k, k)) * (1.0 / np.sqrt(k * k * cin))).astype(
            np.float32)
        b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
        weights.extend([numpy_helper.from_array(w, f"w_{name}"),
                        numpy_helper.from_array(b, f"b_{name}")])
        conv = f"conv_{name}"
        pad = k // 2
        nodes.append(helper.make_node("Conv", [x, f"w_{name}", f"b_{name}"], [conv],
                                      pads=[pad, pad, pad, pad]))
        y = y or f"act_{name}"
        if args.activation == "silu":
            nodes.append(helper.make_node("Sigmoid", [conv], [f"sig_{name}"]))
            nodes.append(helper.make_node("Mul", [conv, f"sig_{name}"], [y]))
        elif args.activation == "leakyrelu":
            nodes.append(helper.make_node("LeakyRelu", [conv], [y], alpha=0.1))
        else:
            nodes.append(helper.make_node(args.activation.capitalize(), [conv], [y]))
        return y

    x = "input"
    for i in range(args.blocks):
        last = "output" if i + 1 == args.blocks else None
        if args.se:
            # EfficientNet's and MobileNetV3's gate: x * Sigmoid(expand(Relu(reduce(GAP(x))))).
            y = conv_act(x, c, c, 3, str(i))
            nodes.append(helper.make_node("GlobalAveragePool", [y], [f"gap{i}"]))
            for name, cin, cout in ((f"se{i}_r", c, c // 4), (f"se{i}_e", c // 4, c)):
                w = (rng.standard_normal((cout, cin, 1, 1)) / np.sqrt(cin)).astype(np.float32)
                weights.append(numpy_helper.from_array(w, f"w_{name}"))
            nodes.append(helper.make_node("Conv", [f"gap{i}", f"w_se{i}_r"], [f"red{i}"]))
            nodes.append(helper.make_node("Relu", [f"red{i}"], [f"relu{i}"]))
            nodes.append(helper.make_node("Conv", [f"relu{i}", f"w_se{i}_e"], [f"exp{i}"]))
            nodes.append(helper.make_node("Sigmoid", [f"exp{i}"], [f"gate{i}"]))
            x = last or f"excited{i}"
            nodes.append(helper.make_node("Mul", [y, f"gate{i}"], [x]))
            continue
        if not args.c2f:
            x = conv_act(x, c, c, 3, str(i), last)
            continue
        half = c // 2
        y = conv_act(x, c, c, 1, f"{i}_cv1")
        nodes.append(helper.make_node("Split", [y], [f"a{i}", f"b{i}"], axis=1))
        m = conv_act(conv_act(f"b{i}", half, half, 3, f"{i}_m1"), half, half, 3, f"{i}_m2")
        nodes.append(helper.make_node("Add", [f"b{i}", m], [f"res{i}"]))
        nodes.append(helper.make_node("Concat", [f"a{i}", f"b{i}", f"res{i}"], [f"cat{i}"],
                                      axis=1))
        x = conv_act(f"cat{i}", 3 * half, c, 1, f"{i}_cv2", last)
    shape = ["batch", c, args.size, args.size]
    graph = helper.make_graph(nodes, "conv_stack",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)],
                              weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # what onnxruntime releases of the last years all read
    onnx.checker.check_model(model)
    kind = "c2f" if args.c2f else "se" if args.se else "conv"
    folder = Path(args.out) / f"{kind}_{args.activation}_stack" / "1"
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(folder / "model.onnx"))
    print(folder / "model.onnx")


if __name__ == "__main__":
    main()
