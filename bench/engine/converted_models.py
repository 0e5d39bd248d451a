#!/usr/bin/env python3
"""FP16, QDQ-quantized and dynamically quantized versions of zoo models, to time and check how the engine serves them.

    pip install onnxconverter-common      # for --kind fp16 (PyPI; not a project dependency)
    .venv/bin/python bench/engine/converted_models.py convert --kind fp16 --zoo /tmp/zoo-bench \\
        --out /tmp/f16zoo --models resnet18,mobilenetv2,bert_tiny,gpt2_tiny
    .venv/bin/python bench/engine/converted_models.py convert --kind qdq --zoo /tmp/zoo-bench \\
        --out /tmp/qdq --models resnet18,mobilenetv2
    .venv/bin/python bench/engine/converted_models.py convert --kind dynamic --zoo /tmp/zoo-bench \
        --out /tmp/dyn --models bert_tiny,gpt2_tiny,resnet18
    # time them against onnxruntime on the same files:
    .venv/bin/python bench/engine/engine_vs_onnxruntime.py --zoo /tmp/f16zoo \\
        --models resnet18,resnet18_fp16,mobilenetv2,mobilenetv2_fp16 --batches 1,8 --threads 2
    # serve them and compare the answers:
    build/bin/tessera-server --model-repository /tmp/f16zoo --grpc-port 18001 &
    .venv/bin/python bench/engine/converted_models.py check --kind fp16 --out /tmp/f16zoo \\
        --url 127.0.0.1:18001 --models resnet18,mobilenetv2,bert_tiny,gpt2_tiny

`convert` writes <out>/<model>_<kind>/1/model.onnx and links <out>/<model> to the FP32 original:
- fp16: onnxconverter_common's convert_float_to_float16 (weights, inputs and outputs FLOAT16);
- qdq: onnxruntime.quantization.quantize_static, QDQ format, per-channel INT8 weights, UINT8
  activations, calibrated on 8 random images (the zoo's CNNs, input [1, 3, 224, 224]);
- dynamic: onnxruntime.quantization.quantize_dynamic with INT8 weights, onnxruntime's default
  (DynamicQuantizeLinear of each activation at run time, MatMulInteger and ConvInteger);
- dynamic_u8: the same with UINT8 weights (QuantType.QUInt8, older onnxruntime's default), each
  with a zero point of its own.

`check` sends the same inputs to <model>_<kind> on the server and prints max |difference| / max
|reference| per output:
- fp16: against the FP32 model (onnxruntime), with onnxruntime's own figure on the FP16 file;
- qdq, dynamic, dynamic_u8: against onnxruntime's literal execution of the file (graph optimisations off:
  each node computed as ONNX defines it), with onnxruntime's optimised (fused integer-kernel)
  execution's distance from that same reference.
"""
import argparse
import os

import numpy as np
import onnxruntime as ort


def convert(args):
    import onnx

    os.makedirs(args.out, exist_ok=True)
    for model in args.models.split(","):
        src = os.path.join(args.zoo, model)
        link = os.path.join(args.out, model)
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(src), link)
        dst = os.path.join(args.out, f"{model}_{args.kind}", "1")
        os.makedirs(dst, exist_ok=True)
        path = os.path.join(src, "1", "model.onnx")
        if args.kind == "fp16":
            from onnxconverter_common import float16
            onnx.save(float16.convert_float_to_float16(onnx.load(path)),
                      os.path.join(dst, "model.onnx"))
        elif args.kind in ("dynamic", "dynamic_u8"):
            from onnxruntime.quantization import QuantType, quantize_dynamic
            weights = QuantType.QInt8 if args.kind == "dynamic" else QuantType.QUInt8
            quantize_dynamic(path, os.path.join(dst, "model.onnx"), weight_type=weights)
        else:
            quantize_qdq(path, os.path.join(dst, "model.onnx"))
        print(f"{model}_{args.kind} written")


def quantize_qdq(src, dst):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class RandomImages(CalibrationDataReader):
        def __init__(self, name):
            rng = np.random.default_rng(0)
            self.feeds = iter([{name: rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}
                               for _ in range(8)])

        def get_next(self):
            return next(self.feeds, None)

    prepared = dst + ".pre.onnx"
    quant_pre_process(src, prepared, skip_symbolic_shape=True)
    name = ort.InferenceSession(prepared, providers=["CPUExecutionProvider"]).get_inputs()[0].name
    quantize_static(prepared, dst, RandomImages(name), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    per_channel=True)
    os.remove(prepared)


def feeds_for(session, rng, half, batch=2, seq=16):
    feeds = {}
    for info in session.get_inputs():
        shape = [batch if k == 0 else (d if isinstance(d, int) else seq)
                 for k, d in enumerate(info.shape)]
        if info.type == "tensor(float)":
            feeds[info.name] = rng.standard_normal(shape).astype(np.float16 if half else np.float32)
        elif "ids" in info.name:
            feeds[info.name] = rng.integers(1, 100, size=shape).astype(np.int64)
        else:  # attention masks
            feeds[info.name] = np.ones(shape, np.int64)
    return feeds


def session(path, optimised=True):
    options = ort.SessionOptions()
    if not optimised:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def check(args):
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(args.url)
    rng = np.random.default_rng(0)
    half = args.kind == "fp16"
    for model in args.models.split(","):
        converted = os.path.join(args.out, f"{model}_{args.kind}", "1", "model.onnx")
        fp32 = session(os.path.join(args.out, model, "1", "model.onnx"))
        feeds = feeds_for(fp32, rng, half)
        if half:
            reference = fp32.run(None, {k: v.astype(np.float32) if v.dtype == np.float16 else v
                                        for k, v in feeds.items()})
            peer_name = "onnxruntime on the FP16 file"
        else:
            reference = session(converted, optimised=False).run(None, feeds)
            peer_name = "onnxruntime optimised (integer kernels)"
        try:
            peer = session(converted).run(None, feeds)
        except Exception:  # noqa: BLE001 - a converter output onnxruntime refuses (bert_tiny)
            peer = [None] * len(reference)
        inputs = []
        for name, value in feeds.items():
            wire = {np.float16: "FP16", np.float32: "FP32", np.int64: "INT64"}[value.dtype.type]
            inp = grpcclient.InferInput(name, list(value.shape), wire)
            inp.set_data_from_numpy(value)
            inputs.append(inp)
        result = client.infer(f"{model}_{args.kind}", inputs)
        for info, want, theirs in zip(fp32.get_outputs(), reference, peer):
            got = result.as_numpy(info.name)
            scale = float(np.abs(want).max())
            ours = np.abs(got.astype(np.float32) - want).max() / scale
            peer_err = ("n/a (not loaded)" if theirs is None else
                        f"{np.abs(theirs.astype(np.float32) - want).max() / scale:.1e}")
            print(f"{model:12s} {info.name:18s} {got.dtype}  tessera {ours:.1e}  "
                  f"{peer_name} {peer_err}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("convert", "check"):
        p = sub.add_parser(name)
        p.add_argument("--kind", choices=["fp16", "qdq", "dynamic", "dynamic_u8"], required=True)
        p.add_argument("--out", required=True)
        p.add_argument("--models", default="resnet18,mobilenetv2")
        if name == "convert":
            p.add_argument("--zoo", required=True)
        else:
            p.add_argument("--url", default="127.0.0.1:18001")
    args = parser.parse_args()
    convert(args) if args.command == "convert" else check(args)


if __name__ == "__main__":
    main()
