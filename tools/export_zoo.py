#!/usr/bin/python3
"""Exports the standard model set (DESIGN.md) to ONNX with seeded random weights, as a model repository.

Run with Debian's interpreter, which has torch 1.13 and torchvision 0.14 (the virtualenv has no torch):

    /usr/bin/python3 tools/export_zoo.py --out build/zoo [--set ci|full | --models a,b]
                                         [--opset 13] [--batch 2] [--force]

For every model it writes
  <out>/<name>/1/model.onnx                  dynamic batch dim; transformers at a fixed sequence length
  <out>/<name>/config.yaml                   model config (docs/model-config.md)
  <out>/<name>/reference/input_<i>.pb        a batch of --batch inputs (onnx TensorProto, named)
  <out>/<name>/reference/torch_output_<i>.pb PyTorch's eval-mode outputs for that batch
The reference outputs proper (`output_<i>.pb`, from onnxruntime) are written by tools/zoo_reference.py;
scripts/make_zoo.sh runs both. Weights and inputs are seeded, so re-running gives byte-identical files;
a model whose stamp (sources, options, torch version) is unchanged is skipped unless --force.
"""

import argparse
import hashlib
import io
import os
import sys
import time
import warnings

import numpy as np
import onnx
import onnx.checker
import onnx.numpy_helper
import torch
import torch.nn as nn
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_models as zm  # noqa: E402
import zoo_sets  # noqa: E402

SEED = 20240601


class Spec:
    """One zoo model: how to build it, its interface and its serving config."""

    def __init__(self, build, inputs, outputs, max_batch_size, slo_ms, kind="cnn", config=None):
        self.build = build              # () -> nn.Module
        self.inputs = inputs            # [(name, per-sample dims)]
        self.outputs = outputs          # [name]; dims come from the traced outputs
        self.max_batch_size = max_batch_size
        self.slo_ms = slo_ms
        self.kind = kind                # cnn | bert | roberta | gpt2
        self.config = config            # zm.TransformerConfig for transformers


def tv(ctor, **kwargs):
    return lambda: ctor(weights=None, **kwargs)


def image(size, channels=3):
    return [("input", [channels, size, size])]


def bert_like(config, kind):
    ctor = (lambda: zm.BertModel(config, roberta=(kind == "roberta")))
    seq = config.seq_len
    return Spec(ctor, [("input_ids", [seq]), ("attention_mask", [seq])],
                ["last_hidden_state", "pooler_output"], 8, 200 if config.layers > 2 else 20,
                kind=kind, config=config)


def gpt2(config):
    return Spec(lambda: zm.Gpt2Model(config), [("input_ids", [config.seq_len])], ["logits"], 8,
                300 if config.layers > 2 else 20, kind="gpt2", config=config)


SPECS = {
    "lenet": Spec(zm.LeNet5, image(28, channels=1), ["output"], 64, 10),
    "googlenet": Spec(tv(torchvision.models.googlenet, aux_logits=False, init_weights=True),
                      image(224), ["output"], 32, 100),
    "resnet18": Spec(tv(torchvision.models.resnet18), image(224), ["output"], 32, 100),
    "resnet50": Spec(tv(torchvision.models.resnet50), image(224), ["output"], 32, 150),
    "vgg16": Spec(tv(torchvision.models.vgg16), image(224), ["output"], 16, 300),
    "mobilenetv2": Spec(tv(torchvision.models.mobilenet_v2), image(224), ["output"], 32, 50),
    "mnasnet": Spec(tv(torchvision.models.mnasnet1_0), image(224), ["output"], 32, 50),
    "densenet161": Spec(tv(torchvision.models.densenet161), image(224), ["output"], 16, 300),
    "ssd_mobilenet": Spec(zm.SsdMobileNet, image(320), ["boxes", "scores"], 16, 100),
    "unet_tiny": Spec(zm.UNetTiny, image(64), ["mask"], 16, 50),
    "bert_base": bert_like(zm.BERT_BASE, "bert"),
    "bert_tiny": bert_like(zm.BERT_TINY, "bert"),
    "roberta_base": bert_like(zm.ROBERTA_BASE, "roberta"),
    "roberta_tiny": bert_like(zm.ROBERTA_TINY, "roberta"),
    "gpt2": gpt2(zm.GPT2_BASE),
    "gpt2_tiny": gpt2(zm.GPT2_TINY),
}
assert sorted(SPECS) == sorted(zoo_sets.ALL_MODELS)


def seed_for(name):
    # Each model has its own seed, so adding a model never changes another model's weights.
    return SEED + sum(ord(c) * (i + 1) for i, c in enumerate(name))


def calibrate_batchnorm(model, generator, spec):
    """Gives BatchNorm layers real statistics and random affine parameters.

    Fresh BatchNorm layers are the identity in eval mode, and random statistics alone let the
    activations of deep nets drift by orders of magnitude. So: one training-mode pass over a random
    batch sets the running statistics (cumulative average, i.e. exactly that batch's), then gamma and
    beta are randomised so the folded scales are not trivial.
    """
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    with torch.no_grad():
        model(torch.randn([4] + spec.inputs[0][1], generator=generator))
        for bn in bns:
            n = bn.num_features
            bn.weight.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
            bn.bias.copy_(torch.randn(n, generator=generator) * 0.1)
    model.eval()


def make_inputs(spec, batch, generator):
    if spec.kind == "cnn":
        return [torch.randn([batch] + spec.inputs[0][1], generator=generator)]
    c = spec.config
    seq = c.seq_len
    ids = torch.randint(3, c.vocab_size, (batch, seq), generator=generator, dtype=torch.long)
    if spec.kind == "gpt2":
        return [ids]
    # Odd rows are padded over their last quarter, so the mask matters.
    mask = torch.ones(batch, seq, dtype=torch.long)
    for r in range(1, batch, 2):
        mask[r, seq - seq // 4:] = 0
    ids = torch.where(mask.bool(), ids, torch.full_like(ids, c.pad_token_id))
    return [ids, mask]


def export_onnx(model, inputs, spec, opset):
    names = [n for n, _ in spec.inputs]
    dynamic = {n: {0: "batch"} for n in names + spec.outputs}
    buffer = io.BytesIO()
    torch.onnx.export(model, tuple(inputs), buffer, opset_version=opset, do_constant_folding=True,
                      input_names=names, output_names=spec.outputs, dynamic_axes=dynamic)
    return buffer.getvalue()


def fix_output_shapes(onnx_bytes, output_dims):
    """Declares the outputs' non-batch dims as the static values they are.

    The exporter's shape inference leaves some of them symbolic (e.g. a sequence length that flows
    through Slice), although the model only runs at the sizes it was exported for.
    """
    model = onnx.load_from_string(onnx_bytes)
    for output, dims in zip(model.graph.output, output_dims):
        shape = output.type.tensor_type.shape
        del shape.dim[1:]
        for d in dims:
            shape.dim.add().dim_value = d
    return model.SerializeToString()


def check_export(name, onnx_bytes, spec, output_dims):
    """The bytes parse, pass the checker and declare the expected interface; returns op counts."""
    model = onnx.load_from_string(onnx_bytes)
    onnx.checker.check_model(model, full_check=True)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if [i.name for i in inputs] != [n for n, _ in spec.inputs] or \
            [o.name for o in model.graph.output] != spec.outputs:
        sys.exit(f"{name}: unexpected graph interface {[i.name for i in inputs]} -> "
                 f"{[o.name for o in model.graph.output]}")
    expected = [d for _, d in spec.inputs] + output_dims
    for value, dims in zip(inputs + list(model.graph.output), expected):
        shape = value.type.tensor_type.shape.dim
        if not shape[0].dim_param or [d.dim_value for d in shape[1:]] != dims:
            sys.exit(f"{name}: {value.name} has shape {shape}, expected [batch] + {dims}")
    counts = {}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def config_yaml(name, spec, output_dims):
    def dims(d):
        return "[" + ", ".join(str(x) for x in d) + "]"

    dtype = "TYPE_FP32" if spec.kind == "cnn" else "TYPE_INT64"
    lines = [f"name: {name}", "platform: onnx", f"max_batch_size: {spec.max_batch_size}", "input:"]
    for n, d in spec.inputs:
        lines += [f"  - name: {n}", f"    data_type: {dtype}", f"    dims: {dims(d)}"]
    lines.append("output:")
    for n, d in zip(spec.outputs, output_dims):
        lines += [f"  - name: {n}", "    data_type: TYPE_FP32", f"    dims: {dims(d)}"]
    lines += ["dynamic_batching:", "  max_queue_delay_microseconds: 2000",
              "instance_group:", "  - count: 1", "    kind: KIND_AUTO", f"slo_ms: {spec.slo_ms}"]
    return ("\n".join(lines) + "\n").encode()


def write_if_changed(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)
    return True


def stamp_for(name, opset, batch):
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for source in ("export_zoo.py", "zoo_models.py"):
        with open(os.path.join(here, source), "rb") as f:
            h.update(f.read())
    h.update(f"{name} opset={opset} batch={batch} torch={torch.__version__} "
             f"torchvision={torchvision.__version__} onnx={onnx.__version__}".encode())
    return h.hexdigest()


def build_model(name):
    """The zoo model `name` with its seeded weights, in eval mode, and the generator its inputs
    come from next (bench/gpu/zoo_fp16_vs_torch.py rebuilds the exported models with it)."""
    spec = SPECS[name]
    torch.manual_seed(seed_for(name))
    generator = torch.Generator().manual_seed(seed_for(name))
    model = spec.build()
    if spec.kind == "cnn":
        calibrate_batchnorm(model, generator, spec)
    else:
        with torch.no_grad():
            zm.init_transformer(model, generator)
    model.eval()
    return model, generator


def export_model(name, out, opset, batch, force):
    spec = SPECS[name]
    model_dir = os.path.join(out, name)
    stamp_path = os.path.join(model_dir, ".export-stamp")
    stamp = stamp_for(name, opset, batch)
    if not force and os.path.exists(stamp_path) and os.path.exists(
            os.path.join(model_dir, "1", "model.onnx")):
        with open(stamp_path) as f:
            if f.read().strip() == stamp:
                print(f"{name}: up to date")
                return
    start = time.monotonic()
    model, generator = build_model(name)
    inputs = make_inputs(spec, batch, generator)
    with torch.no_grad():
        outputs = model(*inputs)
        outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
        onnx_bytes = export_onnx(model, inputs, spec, opset)
    output_dims = [list(o.shape[1:]) for o in outputs]
    onnx_bytes = fix_output_shapes(onnx_bytes, output_dims)
    counts = check_export(name, onnx_bytes, spec, output_dims)

    files = {
        os.path.join(model_dir, "1", "model.onnx"): onnx_bytes,
        os.path.join(model_dir, "config.yaml"): config_yaml(name, spec, output_dims),
    }
    ref = os.path.join(model_dir, "reference")
    for i, ((input_name, _), t) in enumerate(zip(spec.inputs, inputs)):
        files[os.path.join(ref, f"input_{i}.pb")] = \
            onnx.numpy_helper.from_array(t.numpy(), input_name).SerializeToString()
    for i, (output_name, t) in enumerate(zip(spec.outputs, outputs)):
        files[os.path.join(ref, f"torch_output_{i}.pb")] = \
            onnx.numpy_helper.from_array(t.numpy().astype(np.float32), output_name).SerializeToString()
    changed = sum(write_if_changed(path, data) for path, data in files.items())
    write_if_changed(stamp_path, (stamp + "\n").encode())
    params = sum(p.numel() for p in model.parameters())
    ops = ", ".join(f"{op}×{n}" for op, n in sorted(counts.items()))
    print(f"{name}: {params / 1e6:.2f}M params, {len(onnx_bytes) / 1e6:.1f} MB, "
          f"{sum(counts.values())} nodes [{ops}]; {changed} file(s) changed, "
          f"{time.monotonic() - start:.1f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="model repository directory to write")
    parser.add_argument("--set", default="ci", help=f"model set: {', '.join(zoo_sets.SETS)}")
    parser.add_argument("--models", help="comma-separated model names (overrides --set)")
    parser.add_argument("--opset", type=int, default=13, choices=range(11, 18), metavar="11..17")
    parser.add_argument("--batch", type=int, default=2, help="batch size of the reference data")
    parser.add_argument("--force", action="store_true", help="re-export even when up to date")
    args = parser.parse_args()
    if args.batch < 1:
        parser.error("--batch must be >= 1")

    warnings.filterwarnings("ignore", category=UserWarning)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # summation order, hence the reference bits, must not depend on cores
    for name in zoo_sets.select(args.models, args.set):
        export_model(name, args.out, args.opset, args.batch, args.force)


if __name__ == "__main__":
    main()
