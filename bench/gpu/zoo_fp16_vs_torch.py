#!/usr/bin/env python3
"""The peer for the engine's FP16 error on the zoo: PyTorch's own FP16 error on the same models.

For each model of a zoo made by scripts/make_zoo.sh, rebuilds the PyTorch module with the seeded
weights the ONNX file was exported from (tools/export_zoo.py build_model), runs it in FP16 on the GPU
(model.half(), as PyTorch serves FP16) on the zoo's reference inputs, and prints the error against
onnxruntime's FP32 reference outputs with the metric engine_zoo_test uses (max |out - ref| over
max(1, max |ref|)). Put beside engine_zoo_test's FP16 lines (TESSERA_ZOO_PRECISION=fp16), it says whether a
large engine FP16 error is the model's (PyTorch's FP16 is as far off) or the engine's.

    python3 bench/gpu/zoo_fp16_vs_torch.py --zoo DIR [--models a,b] [--device cuda]

Needs torch, torchvision and onnx (the GPU machine's python3 has them).
"""

import argparse
import glob
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))
import export_zoo  # noqa: E402


def read(path):
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return onnx.numpy_helper.to_array(tensor)


def numbered(folder, prefix):
    paths = glob.glob(os.path.join(folder, f"{prefix}_*.pb"))
    return sorted(paths, key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", required=True)
    parser.add_argument("--models", default="")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    names = [m for m in args.models.split(",") if m] or sorted(
        d for d in os.listdir(args.zoo) if os.path.isdir(os.path.join(args.zoo, d, "reference")))
    half = args.device != "cpu"  # CPU FP16 convolutions are missing in older torch: FP32 there
    print(f"PyTorch {torch.__version__} {'FP16 (model.half())' if half else 'FP32'} on "
          f"{torch.cuda.get_device_name() if half else 'cpu'} vs onnxruntime's FP32 reference")
    print(f"{'model':14} {'output':18} {'max_abs':>9} {'max|ref|':>9} {'rel':>9}")
    for name in names:
        if name not in export_zoo.SPECS:
            print(f"{name}: not a zoo model", file=sys.stderr)
            continue
        ref = os.path.join(args.zoo, name, "reference")
        model, _ = export_zoo.build_model(name)
        model = model.to(args.device)
        if half:
            model = model.half()
        inputs = []
        for path in numbered(ref, "input"):
            value = torch.from_numpy(np.array(read(path))).to(args.device)
            inputs.append(value.half() if half and value.is_floating_point() else value)
        with torch.no_grad():
            outputs = model(*inputs)
        outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        for i, (out, path) in enumerate(zip(outputs, numbered(ref, "output"))):
            want = read(path).astype(np.float64)
            got = out.float().cpu().numpy().astype(np.float64)
            max_abs = float(np.max(np.abs(got - want)))
            max_ref = float(np.max(np.abs(want)))
            label = export_zoo.SPECS[name].outputs[i]
            print(f"{name:14} {label:18} {max_abs:9.3g} {max_ref:9.3g} "
                  f"{max_abs / max(max_ref, 1.0):9.3g}")


if __name__ == "__main__":
    main()
