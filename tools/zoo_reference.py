#!/usr/bin/env python3
"""Computes the model zoo's reference outputs with onnxruntime (CPU) and checks them against PyTorch.

Run with the virtualenv's interpreter (onnxruntime and onnx; no torch), after tools/export_zoo.py:

    .venv/bin/python tools/zoo_reference.py --out build/zoo [--set ci|full | --models a,b]

For every selected model in <out> it runs reference/input_<i>.pb through onnxruntime's CPU provider
(one thread, so the bits do not depend on the machine's cores) and writes reference/output_<i>.pb,
named as the graph outputs. It then prints, per output, the error between onnxruntime and the
PyTorch outputs written by the export (torch_output_<i>.pb):
    max_abs = max |ort - torch|,   rel = max_abs / max(1, max |torch|)
and exits non-zero when any rel exceeds --max-rel (default 1e-3): an export that disagrees with
PyTorch that much is broken, and an engine test against it would be meaningless.
A model whose outputs are newer than its model and inputs is not re-run (--force re-runs it).
"""

import argparse
import glob
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_sets  # noqa: E402


def read_tensor(path):
    proto = onnx.TensorProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    return proto.name, onnx.numpy_helper.to_array(proto)


def numbered(ref_dir, prefix):
    paths = []
    while os.path.exists(os.path.join(ref_dir, f"{prefix}_{len(paths)}.pb")):
        paths.append(os.path.join(ref_dir, f"{prefix}_{len(paths)}.pb"))
    return paths


def up_to_date(model_path, inputs, outputs):
    if not outputs:
        return False
    newest_source = max(os.path.getmtime(p) for p in [model_path] + inputs)
    return min(os.path.getmtime(p) for p in outputs) >= newest_source


def reference(name, out, max_rel, force):
    model_dir = os.path.join(out, name)
    model_path = os.path.join(model_dir, "1", "model.onnx")
    ref_dir = os.path.join(model_dir, "reference")
    if not os.path.exists(model_path):
        sys.exit(f"{name}: {model_path} not found (run tools/export_zoo.py first)")
    inputs = numbered(ref_dir, "input")
    torch_outputs = numbered(ref_dir, "torch_output")
    if not inputs or not torch_outputs:
        sys.exit(f"{name}: no reference inputs or torch outputs in {ref_dir}")

    outputs = numbered(ref_dir, "output")
    if force or len(outputs) != len(torch_outputs) or not up_to_date(model_path, inputs, outputs):
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
        feeds = dict(read_tensor(p) for p in inputs)
        names = [o.name for o in session.get_outputs()]
        results = session.run(names, feeds)
        for stale in glob.glob(os.path.join(ref_dir, "output_*.pb")):
            os.remove(stale)
        for i, (output_name, value) in enumerate(zip(names, results)):
            path = os.path.join(ref_dir, f"output_{i}.pb")
            with open(path + ".tmp", "wb") as f:
                f.write(onnx.numpy_helper.from_array(value, output_name).SerializeToString())
            os.replace(path + ".tmp", path)
        outputs = numbered(ref_dir, "output")
        state = "computed"
    else:
        state = "up to date"

    worst = 0.0
    parts = []
    for ort_path, torch_path in zip(outputs, torch_outputs):
        output_name, got = read_tensor(ort_path)
        _, want = read_tensor(torch_path)
        if got.shape != want.shape:
            sys.exit(f"{name}: {output_name} is {got.shape} from onnxruntime, {want.shape} from torch")
        got, want = got.astype(np.float64), want.astype(np.float64)
        max_abs = float(np.max(np.abs(got - want))) if got.size else 0.0
        rel = max_abs / max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
        worst = max(worst, rel)
        parts.append(f"{output_name} {list(got.shape)} max_abs {max_abs:.3g} rel {rel:.3g}")
    print(f"{name}: onnxruntime {state}; vs torch: " + "; ".join(parts))
    return worst <= max_rel


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="model repository written by export_zoo.py")
    parser.add_argument("--set", default="ci", help=f"model set: {', '.join(zoo_sets.SETS)}")
    parser.add_argument("--models", help="comma-separated model names (overrides --set)")
    parser.add_argument("--max-rel", type=float, default=1e-3,
                        help="largest torch-vs-onnxruntime rel error accepted")
    parser.add_argument("--force", action="store_true", help="re-run even when up to date")
    args, _ = parser.parse_known_args()  # export-only options (--opset, --batch) pass through
    bad = [name for name in zoo_sets.select(args.models, args.set)
           if not reference(name, args.out, args.max_rel, args.force)]
    if bad:
        sys.exit(f"torch and onnxruntime disagree beyond rel {args.max_rel} on: {', '.join(bad)}")


if __name__ == "__main__":
    main()
