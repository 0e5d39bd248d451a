"""PyTorch definitions of the model zoo's models that torchvision does not have (export_zoo.py).

LeNet-5, an SSDLite-style detector on a MobileNetV2 backbone, a small U-Net, and BERT / RoBERTa / GPT-2 written as
small torch modules (no `transformers` package here). The transformers follow the structure of the
Hugging Face implementations so that their ONNX exports contain the same operator patterns: word +
position (+ token type) embeddings, LayerNorm, multi-head self-attention with an additive attention
mask (BERT, RoBERTa) or a causal mask taken from a registered lower-triangular buffer (GPT-2), GELU
(erf for BERT/RoBERTa, tanh approximation for GPT-2), a tanh pooler (BERT, RoBERTa) or an LM head
tied to the word embeddings (GPT-2). Dropout is left out: the zoo is exported in eval mode.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torchvision


# ---- CNNs ----------------------------------------------------------------------------------------

class LeNet5(nn.Module):
    """LeNet-5 on 1x28x28 (MNIST-sized; the first conv pads by 2 as for the original 32x32)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class UNetTiny(nn.Module):
    """A two-level U-Net on 3x64x64 giving a per-pixel mask: the decoder operators of segmentation
    and image-to-image models (ConvTranspose, bilinear and nearest Resize, InstanceNorm, LeakyReLU,
    skip connections by Concat), which the classifiers and transformers do not use."""

    def __init__(self, classes=2):
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1),
                                 nn.InstanceNorm2d(cout, affine=True), nn.LeakyReLU(0.1))

        self.enc1, self.enc2, self.mid = block(3, 8), block(8, 16), block(16, 32)
        self.up = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.lateral = nn.Conv2d(32, 16, 1)
        self.dec2, self.dec1 = block(32, 16), block(24, 8)
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(nn.functional.max_pool2d(e1, 2))
        m = self.mid(nn.functional.max_pool2d(e2, 2))
        # Learned and nearest-neighbour upsampling side by side, as FPN-style decoders mix them.
        up = self.up(m) + nn.functional.interpolate(self.lateral(m), scale_factor=2, mode="nearest")
        d2 = self.dec2(torch.cat([up, e2], 1))
        d1 = nn.functional.interpolate(d2, scale_factor=2, mode="bilinear", align_corners=False)
        return torch.sigmoid(self.head(self.dec1(torch.cat([d1, e1], 1))))


def _separable(cin, cout, stride):
    """SSDLite's depthwise 3x3 (+BN+ReLU6) then pointwise 1x1 (+BN+ReLU6)."""
    return nn.Sequential(
        nn.Conv2d(cin, cin, 3, stride=stride, padding=1, groups=cin, bias=False),
        nn.BatchNorm2d(cin), nn.ReLU6(),
        nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU6())


def _head(cin, cout):
    """A prediction head: depthwise 3x3 + BN + ReLU6, then a 1x1 conv with bias to the outputs."""
    return nn.Sequential(
        nn.Conv2d(cin, cin, 3, padding=1, groups=cin, bias=False), nn.BatchNorm2d(cin), nn.ReLU6(),
        nn.Conv2d(cin, cout, 1))


class SsdMobileNet(nn.Module):
    """SSDLite-style detector without post-processing (no anchors decoding, no NMS).

    MobileNetV2 features at stride 16 (96 channels, after block 13) and stride 32 (1280 channels),
    four extra separable down-sampling stages, and on each of the six maps a box head (A*4) and a
    class head (A*num_classes). Outputs `boxes` [N, anchors, 4] and `scores` [N, anchors, classes],
    each concatenated over the six maps.
    """

    def __init__(self, num_classes=91, anchors_per_cell=6):
        super().__init__()
        features = torchvision.models.mobilenet_v2(weights=None).features
        self.stage16 = features[:14]
        self.stage32 = features[14:]
        self.extras = nn.ModuleList([
            _separable(1280, 512, 2), _separable(512, 256, 2), _separable(256, 256, 2),
            _separable(256, 128, 2)])
        channels = [96, 1280, 512, 256, 256, 128]
        self.box_heads = nn.ModuleList([_head(c, anchors_per_cell * 4) for c in channels])
        self.cls_heads = nn.ModuleList([_head(c, anchors_per_cell * num_classes) for c in channels])
        self.num_classes = num_classes

    def forward(self, x):
        maps = [self.stage16(x)]
        maps.append(self.stage32(maps[0]))
        for extra in self.extras:
            maps.append(extra(maps[-1]))
        boxes, scores = [], []
        for m, box_head, cls_head in zip(maps, self.box_heads, self.cls_heads):
            n = m.size(0)
            # NCHW -> NHWC -> [N, H*W*A, k]: the anchor order of torchvision's SSD heads.
            boxes.append(box_head(m).permute(0, 2, 3, 1).reshape(n, -1, 4))
            scores.append(cls_head(m).permute(0, 2, 3, 1).reshape(n, -1, self.num_classes))
        return torch.cat(boxes, 1), torch.cat(scores, 1)


# ---- Transformers --------------------------------------------------------------------------------

@dataclass
class TransformerConfig:
    vocab_size: int
    hidden: int
    layers: int
    heads: int
    intermediate: int
    max_positions: int
    seq_len: int  # the fixed sequence length the model is exported (and served) at
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0


BERT_BASE = TransformerConfig(30522, 768, 12, 12, 3072, 512, 128)
BERT_TINY = TransformerConfig(1000, 64, 2, 2, 256, 64, 32)
ROBERTA_BASE = TransformerConfig(50265, 768, 12, 12, 3072, 514, 128, type_vocab_size=1,
                                 layer_norm_eps=1e-5, pad_token_id=1)
ROBERTA_TINY = TransformerConfig(1000, 64, 2, 2, 256, 66, 32, type_vocab_size=1,
                                 layer_norm_eps=1e-5, pad_token_id=1)
GPT2_BASE = TransformerConfig(50257, 768, 12, 12, 3072, 1024, 128, layer_norm_eps=1e-5)
GPT2_TINY = TransformerConfig(1000, 64, 2, 2, 256, 64, 32, layer_norm_eps=1e-5)


def _split_heads(x, heads):
    n, s, h = x.size(0), x.size(1), x.size(2)
    return x.view(n, s, heads, h // heads).transpose(1, 2)  # [N, heads, S, head_dim]


def _merge_heads(x):
    n, s = x.size(0), x.size(2)
    return x.transpose(1, 2).contiguous().view(n, s, -1)


class BertLayer(nn.Module):
    """Post-LayerNorm encoder layer (BERT and RoBERTa)."""

    def __init__(self, c: TransformerConfig):
        super().__init__()
        self.heads = c.heads
        self.scale = math.sqrt(c.hidden // c.heads)
        self.query = nn.Linear(c.hidden, c.hidden)
        self.key = nn.Linear(c.hidden, c.hidden)
        self.value = nn.Linear(c.hidden, c.hidden)
        self.attn_out = nn.Linear(c.hidden, c.hidden)
        self.attn_norm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.intermediate = nn.Linear(c.hidden, c.intermediate)
        self.gelu = nn.GELU()  # erf form
        self.output = nn.Linear(c.intermediate, c.hidden)
        self.out_norm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)

    def forward(self, x, additive_mask):
        q = _split_heads(self.query(x), self.heads)
        k = _split_heads(self.key(x), self.heads)
        v = _split_heads(self.value(x), self.heads)
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.scale
        probs = torch.softmax(scores + additive_mask, dim=-1)
        context = _merge_heads(torch.matmul(probs, v))
        x = self.attn_norm(self.attn_out(context) + x)
        return self.out_norm(self.output(self.gelu(self.intermediate(x))) + x)


class BertModel(nn.Module):
    """BERT (roberta=False) or RoBERTa (roberta=True) encoder with the tanh pooler.

    Inputs input_ids and attention_mask, both int64 [N, S] (mask 1 = attend, 0 = padding).
    Outputs last_hidden_state [N, S, hidden] and pooler_output [N, hidden].
    RoBERTa differs in its position ids (counted over non-padding tokens, starting after
    pad_token_id, as Hugging Face's create_position_ids_from_input_ids), one token type, and eps.
    """

    def __init__(self, c: TransformerConfig, roberta=False):
        super().__init__()
        self.roberta = roberta
        self.pad_token_id = c.pad_token_id
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(
            c.max_positions, c.hidden, padding_idx=c.pad_token_id if roberta else None)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden)
        self.embed_norm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.layers = nn.ModuleList([BertLayer(c) for _ in range(c.layers)])
        self.pooler = nn.Linear(c.hidden, c.hidden)
        # Registered buffers like Hugging Face's, so the export reads them as constants.
        self.register_buffer("position_ids", torch.arange(c.max_positions).unsqueeze(0),
                             persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(1, c.max_positions, dtype=torch.long),
                             persistent=False)

    def forward(self, input_ids, attention_mask):
        seq = input_ids.size(1)
        if self.roberta:
            not_pad = input_ids.ne(self.pad_token_id).int()
            position_ids = (torch.cumsum(not_pad, dim=1).type_as(not_pad) * not_pad).long() \
                + self.pad_token_id
        else:
            position_ids = self.position_ids[:, :seq]
        x = (self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
             + self.token_type_embeddings(self.token_type_ids[:, :seq]))
        x = self.embed_norm(x)
        # [N, S] {0,1} -> [N, 1, 1, S] {-10000, 0}, added to every head's scores.
        additive_mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, additive_mask)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled


class Gpt2Block(nn.Module):
    """Pre-LayerNorm decoder block with fused QKV projection and causal self-attention."""

    def __init__(self, c: TransformerConfig):
        super().__init__()
        self.heads = c.heads
        self.scale = math.sqrt(c.hidden // c.heads)
        self.hidden = c.hidden
        self.ln_1 = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.c_attn = nn.Linear(c.hidden, 3 * c.hidden)
        self.c_proj = nn.Linear(c.hidden, c.hidden)
        self.ln_2 = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.c_fc = nn.Linear(c.hidden, c.intermediate)
        self.gelu = nn.GELU(approximate="tanh")
        self.mlp_proj = nn.Linear(c.intermediate, c.hidden)
        self.register_buffer(
            "bias", torch.tril(torch.ones(c.max_positions, c.max_positions, dtype=torch.bool))
            .view(1, 1, c.max_positions, c.max_positions), persistent=False)

    def forward(self, x):
        q, k, v = self.c_attn(self.ln_1(x)).split(self.hidden, dim=2)
        q, k, v = (_split_heads(t, self.heads) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.scale
        s = scores.size(-1)
        causal = self.bias[:, :, :s, :s]
        scores = scores.masked_fill(~causal, -10000.0)
        context = _merge_heads(torch.matmul(torch.softmax(scores, dim=-1), v))
        x = x + self.c_proj(context)
        return x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))


class Gpt2Model(nn.Module):
    """GPT-2 prefill: input_ids int64 [N, S] -> logits [N, S, vocab] (LM head tied to wte)."""

    def __init__(self, c: TransformerConfig):
        super().__init__()
        self.wte = nn.Embedding(c.vocab_size, c.hidden)
        self.wpe = nn.Embedding(c.max_positions, c.hidden)
        self.blocks = nn.ModuleList([Gpt2Block(c) for _ in range(c.layers)])
        self.ln_f = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)
        self.register_buffer("position_ids", torch.arange(c.max_positions).unsqueeze(0),
                             persistent=False)

    def forward(self, input_ids):
        x = self.wte(input_ids) + self.wpe(self.position_ids[:, :input_ids.size(1)])
        for block in self.blocks:
            x = block(x)
        return torch.matmul(self.ln_f(x), self.wte.weight.t())


def init_transformer(model, generator):
    """Hugging Face's initialisation (normal(0, 0.02) weights, zero biases, unit LayerNorm), with
    LayerNorm affine parameters then perturbed so that the reference checks them too."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * 0.02)
            if isinstance(module, nn.Linear):
                module.bias.copy_(torch.randn(module.bias.shape, generator=generator) * 0.02)
        elif isinstance(module, nn.LayerNorm):
            n = module.normalized_shape[0]
            module.weight.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
            module.bias.copy_(torch.randn(n, generator=generator) * 0.05)
