#!/usr/bin/env python3
"""Tessera's CUDA engine (FP16) against PyTorch eager FP16 and torch.compile on ResNet-50 and BERT-base.

Issue 3, item 8 (GPU half). Runs on the GPU machine with its python3 (torch, onnx); nothing is
compiled there: the engine is the carried `tessera-engine-bench` binary (scripts/gpu_check_engine.sh
runs this script with the bundle's binary and library path; see docs/engine-cuda.md).

    python3 bench/gpu/engine_vs_torch.py --bench build-cuda/gpu-bundle/bin/tessera-engine-bench
        [--models resnet50,bert_base] [--batches 1,8,32] [--resnet-extra-batches 256]
        [--warmup 10] [--iterations 50] [--compile default|max-autotune-no-cudagraphs|off]
        [--compile-timeout 240] [--out results.md] [--flops-only]

What is compared, for every (model, batch): median latency of one inference call that starts with
FP32 (images) / INT64 (token ids, mask) inputs in host memory and ends with FP32 outputs in host
memory. Both sides pay the same copies:
  * tessera: `tessera-engine-bench --backend cuda --precision fp16` (a subprocess per point): one
    Model::Run = host->device input copies, FP32->FP16 conversion on the device, the kernels (a
    replayed CUDA graph), FP16->FP32, device->host copies, stream sync.
  * PyTorch eager: `model.half().cuda()`, `torch.inference_mode()`, `cudnn.benchmark = True`; one
    call = inputs `.cuda()` (+ `.half()` for images), the forward, outputs `.float().cpu()`.
  * torch.compile (the same call around a compiled module; mode from --compile) runs in a child
    process per model with a time limit (--compile-timeout), so a slow or broken compile is
    reported as skipped with its reason instead of stalling the run.
Speed = PyTorch eager latency / tessera latency (> 1: the engine is faster); the issue's target is
speed >= 1.0 at every point. Throughput: FLOPs of the ONNX graph (2 x the multiply-accumulates of
Conv, Gemm and MatMul, from onnx shape inference; elementwise ops, softmax, normalisation and
embedding lookups are not counted) / latency, and that as a share of the GPU's dense FP16
tensor-core peak (PEAK_FP16_TFLOPS below).

The models are built here with the zoo's definitions (tools/zoo_models.py; torchvision's ResNet-50,
or an equivalent definition below when torchvision is missing), seeded random weights, and exported
to FP32 ONNX (opset --opset, dynamic batch; BERT at the zoo's sequence length 128) into --zoo
(default /tmp/zoo-gpu). The engine converts to FP16 itself. The same torch module (same weights)
is the PyTorch side.
"""

import argparse
import inspect
import io
import json
import os
import re
import statistics
import subprocess
import sys
import time
import types

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = 1.0
SEED = 20240601

# Dense (no sparsity) FP16 tensor-core peak with FP32 accumulation... NVIDIA quotes FP16 tensor
# TFLOP/s with sparsity and states dense = half; the values below are the dense ones.
# Source: NVIDIA H100 Tensor Core GPU datasheet (H100 SXM 1,979 / PCIe 1,513 / NVL 1,671 sparse)
# and NVIDIA H200 datasheet (1,979 sparse); A100 datasheet (312 dense). Matched in order on
# torch.cuda.get_device_name().
PEAK_FP16_TFLOPS = [
    ("H200", 989.0),
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # SXM5 ("NVIDIA H100 80GB HBM3")
    ("A100", 312.0),
]


def peak_for(device_name):
    for key, tflops in PEAK_FP16_TFLOPS:
        if key.lower() in device_name.lower():
            return key, tflops
    return None, None


# ---- models ----------------------------------------------------------------------------------


def _zoo_models():
    """tools/zoo_models.py; it imports torchvision at the top (only its SSD uses it)."""
    sys.path.insert(0, os.path.join(REPO, "tools"))
    try:
        import torchvision  # noqa: F401
    except ImportError:
        sys.modules["torchvision"] = types.ModuleType("torchvision")
    import zoo_models
    return zoo_models


def _resnet50_without_torchvision():
    """ResNet-50 v1.5 (stride on the 3x3 conv), layer for layer the network torchvision builds."""
    import torch.nn as nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
                nn.ReLU(inplace=True),
                nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            skip = x if self.down is None else self.down(x)
            return self.relu(self.body(x) + skip)

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers)


def build_model(name):
    """(eval-mode FP32 torch module, example inputs builder(batch) -> [cpu tensors], input names,
    output names). Seeded, so the engine and PyTorch see the same weights."""
    import torch
    zm = _zoo_models()
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    if name == "resnet50":
        try:
            import torchvision
            model = torchvision.models.resnet50(weights=None)
        except (ImportError, AttributeError):
            model = _resnet50_without_torchvision()
        model.eval()

        def inputs(batch):
            return [torch.randn(batch, 3, 224, 224, generator=gen)]
        return model, inputs, ["input"], ["output"]
    if name == "bert_base":
        cfg = zm.BERT_BASE
        model = zm.BertModel(cfg)
        with torch.no_grad():
            zm.init_transformer(model, gen)
        model.eval()

        def inputs(batch):
            ids = torch.randint(3, cfg.vocab_size, (batch, cfg.seq_len), generator=gen)
            return [ids, torch.ones(batch, cfg.seq_len, dtype=torch.long)]
        return model, inputs, ["input_ids", "attention_mask"], ["last_hidden_state",
                                                                 "pooler_output"]
    raise SystemExit(f"unknown model {name!r} (resnet50, bert_base)")


def onnx_bytes(model, example, in_names, out_names, opset, dynamic_batch):
    """FP32 ONNX through the TorchScript exporter (torch >= 2.5 would otherwise pick the dynamo
    exporter, which needs onnxscript and exports differently)."""
    import torch
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    if dynamic_batch:
        kwargs["dynamic_axes"] = {n: {0: "batch"} for n in in_names + out_names}
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(model, tuple(example), buffer, opset_version=opset,
                          do_constant_folding=True, input_names=in_names, output_names=out_names,
                          **kwargs)
    return buffer.getvalue()


def export(model, inputs, in_names, out_names, path, opset):
    """The file the engine runs: dynamic batch dim. Kept across runs (same seed, same bytes)."""
    if os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = onnx_bytes(model, inputs(2), in_names, out_names, opset, dynamic_batch=True)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


# ---- FLOPs -----------------------------------------------------------------------------------


def count_macs(data):
    """Multiply-accumulates of Conv, Gemm and MatMul in an ONNX graph with static shapes.

    onnx shape inference gives every operand's shape (the graph must have no dynamic dims: the
    exporter's Shape -> Gather -> Concat -> Reshape chains of a dynamic batch defeat it, so the
    caller counts on a static batch-1 export and scales by the batch, which is exact for these
    models). Conv: N*Cout*prod(out spatial) * Cin/groups * prod(kernel). Gemm: M*N*K. MatMul: the
    output's element count * K (broadcast batch dims included). Returns (macs, {op: macs}); a
    missing shape is an error (the count would silently be low).
    """
    import onnx
    import onnx.shape_inference
    model = onnx.shape_inference.infer_shapes(onnx.load_from_string(data), data_prop=True)
    shapes = {}
    for value in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        tensor_type = value.type.tensor_type
        if tensor_type.HasField("shape") and all(d.HasField("dim_value")
                                                 for d in tensor_type.shape.dim):
            shapes[value.name] = [d.dim_value for d in tensor_type.shape.dim]
    for init in model.graph.initializer:
        shapes[init.name] = list(init.dims)

    def shape(name, node):
        if name not in shapes:
            raise ValueError(f"no inferred shape for {name!r} ({node.op_type} "
                             f"node {node.name!r}); cannot count its FLOPs")
        return shapes[name]

    def prod(xs):
        p = 1
        for x in xs:
            p *= x
        return p

    by_op = {}
    for node in model.graph.node:
        if node.op_type == "Conv":
            w = shape(node.input[1], node)
            y = shape(node.output[0], node)
            macs = prod(y) * prod(w[1:])  # Cin/groups * kernel per output element
        elif node.op_type == "Gemm":
            a = shape(node.input[0], node)
            y = shape(node.output[0], node)
            trans_a = any(at.name == "transA" and at.i for at in node.attribute)
            macs = prod(y) * (a[0] if trans_a else a[1])
        elif node.op_type == "MatMul":
            a = shape(node.input[0], node)
            y = shape(node.output[0], node)
            macs = prod(y) * a[-1]
        else:
            continue
        by_op[node.op_type] = by_op.get(node.op_type, 0) + macs
    return sum(by_op.values()), by_op


# ---- timing ----------------------------------------------------------------------------------


def time_tessera(bench, path, batch, warmup, iterations, graphs, timeout):
    cmd = [bench, "--model", path, "--backend", "cuda", "--precision", "fp16", "--batches",
           str(batch), "--warmup", str(warmup), "--iterations", str(iterations)]
    if not graphs:
        cmd.append("--no-cuda-graphs")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s", ""
    match = re.search(r"median_ms=([0-9.]+)", out.stdout)
    if out.returncode != 0 or match is None:
        why = (out.stderr.strip() or out.stdout.strip() or f"exit {out.returncode}")
        return None, why.splitlines()[-1][:300], out.stdout + out.stderr
    return float(match.group(1)), None, out.stdout


def torch_call(module, host_inputs, half_float_inputs):
    """One serving-like call: host inputs to the device, forward, outputs back to the host."""
    import torch
    dev = [t.cuda() for t in host_inputs]
    if half_float_inputs:
        dev = [t.half() if t.is_floating_point() else t for t in dev]
    out = module(*dev)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.float().cpu() for o in outs]  # .cpu() synchronises


def time_torch(module, host_inputs, warmup, iterations):
    import torch
    with torch.inference_mode():
        for _ in range(warmup):
            torch_call(module, host_inputs, True)
        torch.cuda.synchronize()
        samples = []
        for _ in range(iterations):
            start = time.perf_counter()
            torch_call(module, host_inputs, True)
            samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def compile_worker(args):
    """Child process: torch.compile on one model, every batch; prints one JSON line per batch."""
    import torch
    torch.backends.cudnn.benchmark = True
    model, inputs, _, _ = build_model(args.compile_worker)
    model = model.half().cuda().eval()
    compiled = torch.compile(model, mode=None if args.compile == "default" else args.compile)
    for batch in [int(b) for b in args.worker_batches.split(",")]:
        host = inputs(batch)
        start = time.monotonic()
        try:
            ms = time_torch(compiled, host, args.warmup, args.iterations)
            print(json.dumps({"batch": batch, "ms": ms,
                              "first_s": round(time.monotonic() - start, 1)}), flush=True)
        except Exception as e:  # noqa: BLE001 - reported per batch, the run goes on
            print(json.dumps({"batch": batch, "error": f"{type(e).__name__}: {e}"[:300]}),
                  flush=True)


def time_compiled(args, name, batches):
    """{batch: (ms or None, reason)} from a compile_worker child with a time limit."""
    cmd = [sys.executable, os.path.abspath(__file__), "--compile-worker", name, "--worker-batches",
           ",".join(map(str, batches)), "--compile", args.compile, "--warmup", str(args.warmup),
           "--iterations", str(args.iterations)]
    results = {}
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.compile_timeout)
        stdout, why = out.stdout, (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        why = f"compile + timing exceeded --compile-timeout {args.compile_timeout} s"
    for line in stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            results[r["batch"]] = (r.get("ms"), r.get("error"))
    return {b: results.get(b, (None, why[:300])) for b in batches}


# ---- report ----------------------------------------------------------------------------------


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def write_markdown(path, header, rows, notes):
    with open(path + ".tmp", "w") as f:
        f.write(f"{header}\n\n")
        f.write("| model | batch | GFLOP | tessera ms | eager ms | compile ms | speed vs eager "
                "(target >= 1.0) | speed vs compile | tessera TFLOP/s | % of peak | eager % of "
                "peak |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['model']} | {r['batch']} | {r['gflop']:.1f} | {fmt(r['ours'], '.3f')} | "
                    f"{fmt(r['eager'], '.3f')} | {fmt(r['compiled'], '.3f')} | "
                    f"{fmt(r['speed'], '.2f')} {r['verdict']} | {fmt(r['speed_c'], '.2f')} | "
                    f"{fmt(r['tflops'], '.1f')} | {fmt(r['share'], '.1f')} | "
                    f"{fmt(r['eager_share'], '.1f')} |\n")
        if notes:
            f.write("\nNotes:\n\n" + "".join(f"- {n}\n" for n in notes))
    os.replace(path + ".tmp", path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench", default=os.path.join(REPO, "build-cuda", "gpu-bundle", "bin",
                                                        "tessera-engine-bench"))
    parser.add_argument("--zoo", default="/tmp/zoo-gpu", help="where the ONNX files are exported")
    parser.add_argument("--models", default="resnet50,bert_base")
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--resnet-extra-batches", default="256",
                        help="further batch sizes for resnet50 only ('' for none)")
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--no-cuda-graphs", action="store_true", help="engine: eager launches")
    parser.add_argument("--engine-timeout", type=int, default=240,
                        help="seconds per engine subprocess (load + warm-up + timing)")
    parser.add_argument("--compile", default="default",
                        help="torch.compile mode: default, reduce-overhead, max-autotune, "
                             "max-autotune-no-cudagraphs, or off")
    parser.add_argument("--compile-timeout", type=int, default=240,
                        help="seconds for one model's torch.compile child (all its batches)")
    parser.add_argument("--out", default=None,
                        help="Markdown file (default $OUT/engine_vs_torch.md when $OUT is set)")
    parser.add_argument("--flops-only", action="store_true",
                        help="export and print FLOPs per model and batch; no GPU needed")
    parser.add_argument("--compile-worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker-batches", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.compile_worker:
        compile_worker(args)
        return 0

    import torch
    models = [m for m in args.models.split(",") if m]
    base = [int(b) for b in args.batches.split(",") if b]
    extra = [int(b) for b in args.resnet_extra_batches.split(",") if b]
    out_md = args.out or (os.path.join(os.environ["OUT"], "engine_vs_torch.md")
                          if os.environ.get("OUT") else None)

    built = {}
    gflop = {}
    for name in models:
        model, inputs, in_names, out_names = build_model(name)
        path = os.path.join(args.zoo, name, f"model-opset{args.opset}.onnx")
        start = time.monotonic()
        export(model, inputs, in_names, out_names, path, args.opset)
        print(f"{name}: {path} ({os.path.getsize(path) / 1e6:.0f} MB, "
              f"{time.monotonic() - start:.1f} s)", flush=True)
        built[name] = (model, inputs, path)
        # FLOPs from the same graph exported at a static batch 1 (see count_macs), times batch.
        macs, by_op = count_macs(onnx_bytes(model, inputs(1), in_names, out_names, args.opset,
                                            dynamic_batch=False))
        for batch in (base + extra if name == "resnet50" else base):
            gflop[(name, batch)] = 2 * macs * batch / 1e9
        print(f"{name}: {macs / 1e9:.3f} GMAC = {2 * macs / 1e9:.3f} GFLOP per sample "
              f"({', '.join(f'{k} {v / 1e9:.3f}' for k, v in sorted(by_op.items()))} GMAC)",
              flush=True)
    if args.flops_only:
        return 0

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible to torch; --flops-only runs without one")
    if not os.access(args.bench, os.X_OK):
        raise SystemExit(f"{args.bench} not found: build tessera-engine-bench with TESSERA_CUDA "
                         "and carry it (scripts/gpu_check_engine.sh bundle)")
    torch.backends.cudnn.benchmark = True
    device = torch.cuda.get_device_name()
    peak_key, peak = peak_for(device)
    header = (f"GPU engine (FP16) vs PyTorch {torch.__version__} FP16 on {device}; median of "
              f"{args.iterations} runs after {args.warmup} warm-up; every call includes the "
              f"host->device input and device->host output copies on both sides; engine CUDA "
              f"graphs {'off' if args.no_cuda_graphs else 'on'}; torch.compile mode "
              f"{args.compile}. GFLOP = 2 x MACs of Conv/Gemm/MatMul; peak = "
              + (f"{peak:.0f} TFLOP/s dense FP16 tensor ({peak_key}, NVIDIA datasheet)"
                 if peak else "unknown for this GPU (no share computed)") + ".")
    print(header, flush=True)
    notes = []
    rows = []
    cols = (f"{'model':<10}{'batch':>6}{'GFLOP':>8}{'tessera ms':>12}{'eager ms':>10}"
            f"{'compile ms':>12}{'speed':>7}{'TFLOP/s':>9}{'%peak':>7}{'eager%':>8}  target")

    def emit(r):
        print(f"{r['model']:<10}{r['batch']:>6}{r['gflop']:>8.1f}{fmt(r['ours'], '.3f'):>12}"
              f"{fmt(r['eager'], '.3f'):>10}{fmt(r['compiled'], '.3f'):>12}"
              f"{fmt(r['speed'], '.2f'):>7}{fmt(r['tflops'], '.1f'):>9}{fmt(r['share'], '.1f'):>7}"
              f"{fmt(r['eager_share'], '.1f'):>8}  >= {TARGET}x eager: {r['verdict']}", flush=True)

    print(cols, flush=True)
    for name in models:
        model, inputs, path = built[name]
        half = model.half().cuda().eval()
        for batch in (base + extra if name == "resnet50" else base):
            g = gflop[(name, batch)]
            ours, why, log = time_tessera(args.bench, path, batch, args.warmup, args.iterations,
                                          not args.no_cuda_graphs, args.engine_timeout)
            if why:
                notes.append(f"tessera {name} batch {batch} failed: {why}")
            try:
                eager = time_torch(half, inputs(batch), args.warmup, args.iterations)
            except Exception as e:  # noqa: BLE001 - e.g. out of memory; the run goes on
                eager = None
                notes.append(f"eager {name} batch {batch} failed: {type(e).__name__}: {e}"[:300])
                torch.cuda.empty_cache()
            r = {"model": name, "batch": batch, "gflop": g, "ours": ours, "eager": eager,
                 "compiled": None, "speed_c": None}
            r["speed"] = eager / ours if ours and eager else None
            r["verdict"] = ("FAILED" if r["speed"] is None else
                            "ok" if r["speed"] >= TARGET else "MISSED")
            r["tflops"] = g / ours if ours else None  # GFLOP / ms = TFLOP/s
            r["share"] = 100 * r["tflops"] / peak if ours and peak else None
            r["eager_share"] = 100 * g / eager / peak if eager and peak else None
            rows.append(r)
            emit(r)
            if out_md:
                write_markdown(out_md, header, rows, notes)
        del half
        torch.cuda.empty_cache()

    if args.compile != "off":
        print(f"torch.compile (mode {args.compile}, {args.compile_timeout} s per model):",
              flush=True)
        for name in models:
            mine = [r for r in rows if r["model"] == name]
            start = time.monotonic()
            result = time_compiled(args, name, [r["batch"] for r in mine])
            for r in mine:
                ms, why = result[r["batch"]]
                r["compiled"] = ms
                r["speed_c"] = ms / r["ours"] if ms and r["ours"] else None
                if why:
                    notes.append(f"torch.compile {name} batch {r['batch']} skipped: {why}")
                emit(r)
            print(f"  ({name}: {time.monotonic() - start:.0f} s)", flush=True)
            if out_md:
                write_markdown(out_md, header, rows, notes)
    for n in notes:
        print(f"note: {n}")
    if out_md:
        print(f"wrote {out_md}")
    ok = all(r["verdict"] == "ok" for r in rows)
    return 0 if ok else 3  # 3: ran, some point missed the target or failed (1: the script failed)


if __name__ == "__main__":
    sys.exit(main())
