#!/usr/bin/python3
"""Exports small PyTorch models that exercise the engine's transformer and CNN operators, as
test cases in the ONNX node-test layout (model.onnx, test_data_set_0/input_N.pb, output_N.pb)
with torch's own outputs as the expected values.

  /usr/bin/python3 tools/export_op_cases.py OUT_DIR

then run them with
  TESSERA_EXPORTED_CASES=OUT_DIR build/bin/engine_conformance_test \
      --gtest_filter='*ExportedCases*'

Models (random weights, exported at opsets 13 and 17 with a dynamic batch dim): a 2-layer tiny
BERT-like encoder with an attention-mask input (GELU via Erf, LayerNorm, masked softmax), a tiny
GPT-2-like decoder with a causal mask from a registered bool tril buffer and masked_fill, a
RoBERTa-like encoder (cumsum position ids), and torchvision's MobileNetV2/V3-small, MnasNet,
GoogLeNet, DenseNet-121 and VGG-11-BN at 64x64. Needs torch (Debian's 1.13) and torchvision.
"""
import math
import os
import sys

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper


class Attention(nn.Module):
    def __init__(self, dim, heads, causal, max_len=64, mask_dtype=torch.bool):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.causal = causal
        if causal:
            # As GPT-2 does: a lower-triangular buffer (bool, or uint8 in older HF versions)
            # sliced to the sequence length.
            self.register_buffer(
                "bias", torch.tril(torch.ones(max_len, max_len, dtype=mask_dtype)).view(
                    1, 1, max_len, max_len))

    def forward(self, x, mask=None):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        shape = (b, s, self.heads, d // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        if self.causal:
            causal = self.bias[:, :, :s, :s].bool()
            scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
        if mask is not None:
            scores = scores + mask
        probs = scores.softmax(dim=-1)
        y = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, d)
        return self.out(y)


class Block(nn.Module):
    def __init__(self, dim, heads, causal, pre_norm, mask_dtype=torch.bool):
        super().__init__()
        self.attn = Attention(dim, heads, causal, mask_dtype=mask_dtype)
        self.ln1 = nn.LayerNorm(dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.pre_norm = pre_norm
        self.drop = nn.Dropout(0.1)

    def mlp(self, x):
        # BERT's exact GELU exports as Erf; GPT-2's tanh form as Pow/Tanh.
        if self.pre_norm:
            h = self.fc1(x)
            h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                            (h + 0.044715 * torch.pow(h, 3.0))))
        else:
            h = F.gelu(self.fc1(x))
        return self.drop(self.fc2(h))

    def forward(self, x, mask=None):
        if self.pre_norm:
            x = x + self.attn(self.ln1(x), mask)
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x, mask))
        return self.ln2(x + self.mlp(x))


class TinyBert(nn.Module):
    def __init__(self, vocab=100, dim=32, heads=4, layers=2, max_len=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.typ = nn.Embedding(2, dim)
        self.ln = nn.LayerNorm(dim, eps=1e-12)
        self.blocks = nn.ModuleList(Block(dim, heads, False, False) for _ in range(layers))
        self.pool = nn.Linear(dim, dim)

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        pos = torch.arange(s, dtype=torch.long).unsqueeze(0)
        x = self.ln(self.tok(input_ids) + self.pos(pos) + self.typ(torch.zeros_like(input_ids)))
        # HF BERT's extended mask: (1 - mask) * large negative, broadcast over heads and queries.
        ext = attention_mask[:, None, None, :].to(torch.float32)
        ext = (1.0 - ext) * torch.finfo(torch.float32).min
        for block in self.blocks:
            x = block(x, ext)
        return x, torch.tanh(self.pool(x[:, 0]))


class TinyRoberta(TinyBert):
    """BERT plus RoBERTa's position ids: cumsum over the non-padding tokens, offset by pad."""

    def __init__(self, pad=1, **kwargs):
        super().__init__(**kwargs)
        self.pad = pad

    def forward(self, input_ids, attention_mask):
        mask = input_ids.ne(self.pad).int()
        pos = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + self.pad
        x = self.ln(self.tok(input_ids) + self.pos(pos) + self.typ(torch.zeros_like(input_ids)))
        ext = attention_mask[:, None, None, :].to(torch.float32)
        ext = (1.0 - ext) * torch.finfo(torch.float32).min
        for block in self.blocks:
            x = block(x, ext)
        return (x,)


class TinyGpt2(nn.Module):
    def __init__(self, vocab=100, dim=32, heads=4, layers=2, max_len=64, mask_dtype=torch.bool):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(
            Block(dim, heads, True, True, mask_dtype) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, input_ids):
        s = input_ids.size(-1)
        pos = torch.arange(0, s, dtype=torch.long).unsqueeze(0)
        x = self.tok(input_ids) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        return torch.matmul(x, self.tok.weight.t())  # tied LM head


def save_case(out_dir, name, model, arg_sets, input_names, output_names, dynamic_axes, opset):
    """Exports with arg_sets[0]; writes one test_data_set_N per entry (other batch/seq sizes)."""
    case = os.path.join(out_dir, f"{name}_opset{opset}")
    os.makedirs(case, exist_ok=True)
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, arg_sets[0], os.path.join(case, "model.onnx"),
                          opset_version=opset, input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic_axes,
                          do_constant_folding=True)
    for n, args in enumerate(arg_sets):
        data = os.path.join(case, f"test_data_set_{n}")
        os.makedirs(data, exist_ok=True)
        with torch.no_grad():
            outputs = model(*args)
        if not isinstance(outputs, tuple):
            outputs = (outputs,)
        for i, t in enumerate(args):
            with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(t.numpy(), input_names[i]).SerializeToString())
        for i, t in enumerate(outputs):
            with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(t.numpy(), output_names[i]).SerializeToString())
    ops = sorted({n.op_type for n in onnx.load(os.path.join(case, "model.onnx")).graph.node})
    print(f"{case}: {' '.join(ops)}")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "exported_cases"
    torch.manual_seed(0)
    if "--bert-base" in sys.argv:
        # One BERT-base-sized case (hidden 768, 12 heads, 2 of its 12 layers, seq 128) for
        # profiling: TESSERA_PROFILE_OPS=1 prints per-op kernel time.
        ids = torch.randint(2, 100, (1, 128))
        save_case(out_dir, "bert_base_2layer", TinyBert(dim=768, heads=12, max_len=128),
                  [(ids, torch.ones(1, 128, dtype=torch.long))], ["input_ids", "attention_mask"],
                  ["last_hidden_state", "pooler_output"],
                  {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
                  17)
        return
    import torchvision
    text_sets, image_sets = [], []
    for batch, seq in ((2, 7), (3, 12), (1, 1)):
        ids = torch.randint(2, 100, (batch, seq))
        mask = torch.ones(batch, seq, dtype=torch.long)
        mask[-1, seq // 2 + 1:] = 0
        ids[-1, seq // 2 + 1:] = 1  # padding token, for RoBERTa's position ids
        text_sets.append((ids, mask))
        image_sets.append((torch.randn(batch, 3, 64, 64),))
    bert, gpt2, roberta = TinyBert(), TinyGpt2(), TinyRoberta()
    gpt2_uint8 = TinyGpt2(mask_dtype=torch.uint8)
    cnns = {
        "mobilenet_v2_64": torchvision.models.mobilenet_v2(num_classes=10),
        "mnasnet_64": torchvision.models.mnasnet0_5(num_classes=10),
        "googlenet_64": torchvision.models.googlenet(num_classes=10, aux_logits=False,
                                                     transform_input=True, init_weights=False),
        "densenet121_64": torchvision.models.densenet121(num_classes=10),
        "vgg11_bn_64": torchvision.models.vgg11_bn(num_classes=10),
        "mobilenet_v3_small_64": torchvision.models.mobilenet_v3_small(num_classes=10),
    }
    # VGG's 7x7 adaptive pool does not export at 64x64 (2x2 maps) and its 25088x4096 classifier
    # would be 0.5 GB: keep the conv stack, pool globally, one small Linear.
    cnns["vgg11_bn_64"].avgpool = nn.AdaptiveAvgPool2d((1, 1))
    cnns["vgg11_bn_64"].classifier = nn.Linear(512, 10)
    # Non-trivial BatchNorm statistics, so inference BN is actually tested.
    for cnn in cnns.values():
        for m in cnn.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
    for opset in (13, 17):
        save_case(out_dir, "tiny_bert", bert, text_sets, ["input_ids", "attention_mask"],
                  ["last_hidden_state", "pooler_output"],
                  {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                   "last_hidden_state": {0: "batch", 1: "seq"}, "pooler_output": {0: "batch"}},
                  opset)
        save_case(out_dir, "tiny_gpt2", gpt2, [(t[0],) for t in text_sets], ["input_ids"],
                  ["logits"],
                  {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}, opset)
        save_case(out_dir, "tiny_gpt2_uint8_mask", gpt2_uint8, [(t[0],) for t in text_sets],
                  ["input_ids"], ["logits"],
                  {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}, opset)
        save_case(out_dir, "tiny_roberta", roberta, text_sets, ["input_ids", "attention_mask"],
                  ["last_hidden_state"],
                  {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                   "last_hidden_state": {0: "batch", 1: "seq"}}, opset)
        for name, cnn in cnns.items():
            save_case(out_dir, name, cnn, image_sets, ["input"], ["output"],
                      {"input": {0: "batch"}, "output": {0: "batch"}}, opset)


if __name__ == "__main__":
    main()
