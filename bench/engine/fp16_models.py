#!/usr/bin/env python3
"""FP16 versions of zoo models, to time and check the engine's 16-bit float models.

    pip install onnxconverter-common      # PyPI; not a project dependency
    .venv/bin/python bench/engine/fp16_models.py convert --zoo /tmp/zoo-bench --out /tmp/f16zoo \\
        --models resnet18,mobilenetv2,bert_tiny,gpt2_tiny
    # time them against onnxruntime on the same files:
    .venv/bin/python bench/engine/engine_vs_onnxruntime.py --zoo /tmp/f16zoo \\
        --models resnet18,resnet18_fp16,mobilenetv2,mobilenetv2_fp16 --batches 1,8 --threads 2
    # serve them and compare each output with the FP32 model's (onnxruntime):
    build/bin/tessera-server --model-repository /tmp/f16zoo --grpc-port 18001 &
    .venv/bin/python bench/engine/fp16_models.py check --out /tmp/f16zoo --url 127.0.0.1:18001 \\
        --models resnet18,mobilenetv2,bert_tiny,gpt2_tiny

`convert` writes <out>/<model>_fp16/1/model.onnx (onnxconverter_common's
convert_float_to_float16: weights, inputs and outputs FLOAT16) and links <out>/<model> to the
FP32 original. `check` sends the same inputs to <model>_fp16 on the server and to the FP32 model
in onnxruntime, and prints max |difference| / max |FP32 output| per output, with onnxruntime's own
figure on the FP16 file where onnxruntime loads it.
"""
import argparse
import os

import numpy as np
import onnxruntime as ort


def convert(args):
    import onnx
    from onnxconverter_common import float16

    for model in args.models.split(","):
        src = os.path.join(args.zoo, model)
        link = os.path.join(args.out, model)
        os.makedirs(args.out, exist_ok=True)
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(src), link)
        half = float16.convert_float_to_float16(onnx.load(os.path.join(src, "1", "model.onnx")))
        os.makedirs(os.path.join(args.out, f"{model}_fp16", "1"), exist_ok=True)
        onnx.save(half, os.path.join(args.out, f"{model}_fp16", "1", "model.onnx"))
        print(f"{model}_fp16 written")


def feeds_for(session, rng, batch=2, seq=16):
    feeds = {}
    for info in session.get_inputs():
        shape = [batch if k == 0 else (d if isinstance(d, int) else seq)
                 for k, d in enumerate(info.shape)]
        if info.type == "tensor(float)":
            feeds[info.name] = rng.standard_normal(shape).astype(np.float16)
        elif "ids" in info.name:
            feeds[info.name] = rng.integers(1, 100, size=shape).astype(np.int64)
        else:  # attention masks
            feeds[info.name] = np.ones(shape, np.int64)
    return feeds


def check(args):
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(args.url)
    rng = np.random.default_rng(0)
    for model in args.models.split(","):
        fp32 = ort.InferenceSession(os.path.join(args.out, model, "1", "model.onnx"),
                                    providers=["CPUExecutionProvider"])
        feeds = feeds_for(fp32, rng)
        expected = fp32.run(None, {k: v.astype(np.float32) if v.dtype == np.float16 else v
                                   for k, v in feeds.items()})
        try:
            half = ort.InferenceSession(os.path.join(args.out, f"{model}_fp16", "1", "model.onnx"),
                                        providers=["CPUExecutionProvider"])
            ort_half = half.run(None, feeds)
        except Exception:  # noqa: BLE001 - converter output onnxruntime refuses (bert_tiny)
            ort_half = [None] * len(expected)
        inputs = []
        for name, value in feeds.items():
            inp = grpcclient.InferInput(name, list(value.shape),
                                        "FP16" if value.dtype == np.float16 else "INT64")
            inp.set_data_from_numpy(value)
            inputs.append(inp)
        result = client.infer(f"{model}_fp16", inputs)
        for info, want, theirs in zip(fp32.get_outputs(), expected, ort_half):
            got = result.as_numpy(info.name)
            scale = float(np.abs(want).max())
            ours = np.abs(got.astype(np.float32) - want).max() / scale
            ort_err = ("n/a (not loaded)" if theirs is None else
                       f"{np.abs(theirs.astype(np.float32) - want).max() / scale:.1e}")
            print(f"{model:12s} {info.name:18s} {got.dtype}  tessera {ours:.1e}  "
                  f"onnxruntime on the FP16 file {ort_err}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert")
    c.add_argument("--zoo", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--models", default="resnet18,mobilenetv2,bert_tiny,gpt2_tiny")
    k = sub.add_parser("check")
    k.add_argument("--out", required=True)
    k.add_argument("--url", default="127.0.0.1:18001")
    k.add_argument("--models", default="resnet18,mobilenetv2,bert_tiny,gpt2_tiny")
    args = parser.parse_args()
    convert(args) if args.command == "convert" else check(args)


if __name__ == "__main__":
    main()
