#!/usr/bin/python3
"""Exports Tessera's bundled test models to ONNX, with configs and reference data.

Run with Debian's interpreter, which has torch 1.13, torchvision, onnx and numpy:

    /usr/bin/python3 tools/export_models.py [--models-dir configs/models]
                                            [--reference-dir tests/data/reference]

For every model it writes
  <models-dir>/<name>/1/model.onnx      opset 13, dynamic batch dim, input "input", output "output"
  <models-dir>/<name>/config.yaml       model config (docs/model-config.md, Triton field names)
  <reference-dir>/<name>/input_0.pb     a batch of 4 inputs  (onnx TensorProto, like libonnx-testdata)
  <reference-dir>/<name>/output_0.pb    torch's eval-mode outputs for that batch

Weights are random but seeded, so re-running the script gives byte-identical files.
"""

import argparse
import io
import os
import sys
import warnings

import numpy as np
import onnx
import onnx.checker
import onnx.numpy_helper
import torch
import torch.nn as nn

OPSET = 13
REFERENCE_BATCH = 4
SEED = 20240601


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(128, 10)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        return self.softmax(self.fc2(self.relu(self.fc1(x))))


def conv_bn(cin, cout, stride=1, groups=1):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, groups=groups, bias=False),
        nn.BatchNorm2d(cout))


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.a = conv_bn(channels, channels)
        self.b = conv_bn(channels, channels)

    def forward(self, x):
        return torch.relu(self.b(torch.relu(self.a(x))) + x)


class SmallCnn(nn.Module):
    """LeNet/ResNet-ish: conv+bn+relu, maxpool, residual block, strided conv, grouped conv, GAP, fc."""

    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 16)
        self.pool = nn.MaxPool2d(2)
        self.block = ResidualBlock(16)
        self.down = conv_bn(16, 32, stride=2)
        self.grouped = nn.Conv2d(32, 32, 3, padding=1, groups=4, bias=True)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.stem(x)))
        x = self.block(x)
        x = torch.relu(self.down(x))
        x = torch.relu(self.grouped(x))
        x = self.gap(x)
        # view(size(0), -1) rather than flatten: PyTorch emits the Shape/Gather/Unsqueeze/Concat
        # chain for the dynamic batch dim, which the engine must handle.
        x = x.view(x.size(0), -1)
        return self.fc(x)


def randomize_batchnorm(model, generator):
    # Fresh BatchNorm layers are the identity in eval mode; random statistics make the reference
    # actually check the engine's BatchNormalization.
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            n = module.num_features
            module.running_mean.copy_(torch.randn(n, generator=generator) * 0.5)
            module.running_var.copy_(torch.rand(n, generator=generator) * 1.5 + 0.25)
            module.weight.data.copy_(torch.rand(n, generator=generator) + 0.5)
            module.bias.data.copy_(torch.randn(n, generator=generator) * 0.2)


MODELS = [
    # name, constructor, per-sample input dims, output dims, max_batch_size, slo_ms
    ("mlp", Mlp, [64], [10], 8, 50),
    ("small_cnn", SmallCnn, [3, 32, 32], [10], 8, 100),
]


def config_yaml(name, input_dims, output_dims, max_batch_size, slo_ms):
    def dims(d):
        return "[" + ", ".join(str(x) for x in d) + "]"

    return (f"name: {name}\n"
            "platform: onnx\n"
            f"max_batch_size: {max_batch_size}\n"
            "input:\n"
            "  - name: input\n"
            "    data_type: TYPE_FP32\n"
            f"    dims: {dims(input_dims)}\n"
            "output:\n"
            "  - name: output\n"
            "    data_type: TYPE_FP32\n"
            f"    dims: {dims(output_dims)}\n"
            "dynamic_batching:\n"
            "  max_queue_delay_microseconds: 2000\n"
            "instance_group:\n"
            "  - count: 1\n"
            "    kind: KIND_AUTO\n"
            f"slo_ms: {slo_ms}\n")


def export_onnx(model, example):
    buffer = io.BytesIO()
    # PRESERVE keeps BatchNormalization nodes (EVAL would fold them into the convolutions), so the
    # bundled model exercises the engine's BatchNormalization kernel.
    torch.onnx.export(model, example, buffer, opset_version=OPSET,
                      training=torch.onnx.TrainingMode.PRESERVE,
                      do_constant_folding=True,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    return buffer.getvalue()


def check_export(name, onnx_bytes, input_dims, output_dims):
    """Round trip: the exported bytes parse, pass the checker and declare the expected interface."""
    model = onnx.load_from_string(onnx_bytes)
    onnx.checker.check_model(model, full_check=True)
    ops = sorted({node.op_type for node in model.graph.node})
    graph_inputs = [i for i in model.graph.input
                    if i.name not in {t.name for t in model.graph.initializer}]
    if [i.name for i in graph_inputs] != ["input"] or [o.name for o in model.graph.output] != ["output"]:
        sys.exit(f"{name}: unexpected graph interface")
    for value, dims in ((graph_inputs[0], input_dims), (model.graph.output[0], output_dims)):
        shape = value.type.tensor_type.shape.dim
        if not shape[0].dim_param or [d.dim_value for d in shape[1:]] != dims:
            sys.exit(f"{name}: {value.name} has shape {shape}, expected [batch] + {dims}")
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            if len(node.output) != 1:
                sys.exit(f"{name}: BatchNormalization exported in training mode")
    return ops


def write_if_changed(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    with open(path, "wb") as f:
        f.write(data)
    return True


def export_model(entry, models_dir, reference_dir):
    name, ctor, input_dims, output_dims, max_batch_size, slo_ms = entry
    # Each model gets its own seed so adding a model never changes another model's weights.
    torch.manual_seed(SEED + sum(ord(c) for c in name))
    generator = torch.Generator().manual_seed(SEED)
    model = ctor()
    with torch.no_grad():
        randomize_batchnorm(model, generator)
    model.eval()

    example = torch.randn([REFERENCE_BATCH] + input_dims, generator=generator)
    with torch.no_grad():
        expected = model(example)
        onnx_bytes = export_onnx(model, example)
        # The export traces the model; the traced graph must still compute the eager result.
        traced = torch.jit.trace(model, example)
        if not torch.allclose(traced(example), expected, rtol=1e-5, atol=1e-6):
            sys.exit(f"{name}: traced model disagrees with eager model")
    ops = check_export(name, onnx_bytes, input_dims, output_dims)

    changed = []
    files = {
        os.path.join(models_dir, name, "1", "model.onnx"): onnx_bytes,
        os.path.join(models_dir, name, "config.yaml"):
            config_yaml(name, input_dims, output_dims, max_batch_size, slo_ms).encode(),
        os.path.join(reference_dir, name, "input_0.pb"):
            onnx.numpy_helper.from_array(example.numpy().astype(np.float32), "input").SerializeToString(),
        os.path.join(reference_dir, name, "output_0.pb"):
            onnx.numpy_helper.from_array(expected.numpy().astype(np.float32), "output").SerializeToString(),
    }
    for path, data in files.items():
        if write_if_changed(path, data):
            changed.append(path)
    print(f"{name}: {len(onnx_bytes)} bytes, ops {', '.join(ops)}; "
          f"{len(changed)} file(s) changed")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", default=os.path.join(root, "configs", "models"))
    parser.add_argument("--reference-dir", default=os.path.join(root, "tests", "data", "reference"))
    parser.add_argument("--only", nargs="*", help="export only these models")
    args = parser.parse_args()

    # torch warns that PRESERVE may constant-fold trainable parameters; the model is in eval mode,
    # where folding is exactly what we want.
    warnings.filterwarnings("ignore", message="It is recommended that constant folding")
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # summation order, hence the reference bits, must not depend on cores
    for entry in MODELS:
        if args.only and entry[0] not in args.only:
            continue
        export_model(entry, args.models_dir, args.reference_dir)


if __name__ == "__main__":
    main()
