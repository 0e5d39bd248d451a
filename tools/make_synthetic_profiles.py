#!/usr/bin/env python3
"""Writes the SYNTHETIC profile set profiles/synthetic-2080ti/ (docs/profile-format.md).

Nothing here is measured. The numbers are made up so that the scheduler, the planners and the
simulator have an RTX 2080 Ti-like device to work on before tessera-profile has measured a real
one. They are shaped like the published curves: seed 001 Fig. 4 (latency vs GPU % for batches 1..32
on a 2080 Ti) and seed 000 Tables 4.2 / 6.2 (the "knee" GPU % past which a model stops getting
faster, rising with the batch). Every file says `synthetic: true`.

Latency model (all times in ms):

    L(b, p) = S + P(b) * g(D(b) / p) / g(D(b) / 100)

    L100(b) = L1 + (L32 - L1) * (b - 1) / 31     latency on the whole GPU, affine in the batch
    S       = serial * L1                        launch / CPU-side part; does not shrink with p
    P(b)    = L100(b) - S                        the part that parallelises over SMs
    D(b)    = min(100, knee16 * 80/68 * (b/16)^0.35)
                                                 parallelism demand in GPU %: the knee
    g(x)    = (1 + x^4)^(1/4)                    a smooth max(1, x)

so L(b, 100) = L100(b); above the knee D(b) latency is flat, below it the parallel part grows as
D/p (seed 000 §4.1-4.3). knee16 is the V100 knee at batch 16 of seed 000 Table 4.2 / 6.2 (or of the
closest model there), scaled by 80/68 because a 2080 Ti has 68 SMs to the V100's 80; the exponent
0.35 makes the batch-1 knee about 0.38x and the batch-32 knee 1.27x the batch-16 one. L1 / L32 are
plausible PyTorch fp32 figures for a 2080 Ti. g is monotone, so L never rises with p.

Utilisation (L2 and DRAM bandwidth, fractions of peak, on the whole GPU): rises linearly in
log2(batch) from the batch-1 to the batch-32 value of each model. DRAM follows the guidance of the
issue (VGG / ResNet and the depthwise nets high, LeNet ~0.05, BERT 0.2-0.4); L2 is set per model so
that L2 and DRAM are not proportional across models (a fit needs them to vary independently, and
real nets differ: BERT's GEMMs reuse L2, VGG streams weights from DRAM).

Interference: interference_truth.yaml holds the gpulet artifact's RTX 2080 Ti coefficients (seed
001 digest §3), the simulator's ground truth. interference_samples.csv holds 1,250 synthetic
co-locations (2,500 samples, as seed 001 §4.4): a random pair of distinct models, batches from
{2,4,8,16,32}, a split from (20:80) (40:60) (50:50) (60:40) (80:20); each side's slowdown is the
truth factor over the partition-scaled utilisations times exp(noise), clamped to >= 1, where
noise ~ N(0, 0.06) plus, for 10 % of samples, an upward outlier |N(0, 0.2)| (the long tail of seed
001 Fig. 7). The noise is chosen so that a fit's validation error lands near the paper's (90 %
within 10.26 %, 95 % within 13.98 %, seed 001 Fig. 10), and the L2 utilisations so that 90 % of
the samples are slowed by less than about 19 % (seed 001 Fig. 7: 18 %).

Usage:
    python3 tools/make_synthetic_profiles.py [--out DIR] [--seed N] [--fit-binary PATH]
With --fit-binary (build/bin/tessera-fit-interference) it also writes DIR/interference.yaml;
without, it prints the command that does. Standard library only; the output depends only on the
seed.
"""

import argparse
import math
import os
import random
import subprocess
import sys

DEVICE = "synthetic-2080ti"
DEVICE_MEMORY_MB = 11000  # RTX 2080 Ti, as the gpulet artifact's device-config.json
PARTITIONS = [20, 40, 50, 60, 80, 100]  # seed 001 §2.7: 20 % steps plus 50 %
BATCHES = list(range(1, 33))
UTIL_BATCHES = [1, 2, 4, 8, 16, 32]
SMS_V100, SMS_2080TI = 80, 68
KNEE_BATCH_EXPONENT = 0.35
SMOOTH_MAX_POWER = 4

# name: (memory_mb, L1 ms, L32 ms, serial fraction of L1, V100 knee % at batch 16,
#        (l2 b1, l2 b32), (dram b1, dram b32), where the knee comes from)
# memory_mb: the gpulet artifact's resource/mem-config.json (seed 001 digest §1.3).
MODELS = {
    "lenet": (50, 0.3, 0.6, 0.8, 10, (0.04, 0.06), (0.03, 0.05),
              "tiny: launch-bound, knee below the smallest partition"),
    "googlenet": (1720, 5.0, 20.0, 0.5, 40, (0.18, 0.24), (0.20, 0.38),
                  "knee as Inception, seed 000 Table 6.2"),
    "resnet50": (1820, 6.0, 44.0, 0.35, 40, (0.10, 0.22), (0.42, 0.56),
                 "knee as ResNet-50, seed 000 Table 4.2"),
    "ssd_mobilenet": (640, 6.0, 45.0, 0.45, 30, (0.19, 0.22), (0.30, 0.48),
                      "300x300 input; knee between MobileNet and ResNet-50"),
    "vgg16": (2920, 6.0, 90.0, 0.15, 50, (0.08, 0.14), (0.48, 0.66),
              "knee as VGG-19, seed 000 Table 4.2"),
    "mnasnet": (1550, 4.2, 15.0, 0.55, 22, (0.21, 0.24), (0.38, 0.58),
                "depthwise, memory-bound; knee near MobileNet's"),
    "mobilenet_v2": (464, 3.8, 13.5, 0.55, 20, (0.19, 0.22), (0.36, 0.56),
                     "knee as MobileNet, seed 000 Table 4.2"),
    "densenet161": (1220, 18.0, 100.0, 0.6, 45, (0.22, 0.29), (0.25, 0.42),
                    "launch-bound at batch 1; knee as ResNeXt-50 less a little"),
    "bert_base": (500, 5.0, 10.0, 0.5, 30, (0.24, 0.34), (0.20, 0.32),
                  "sequence length 14; knee as BERT, seed 000 Table 4.2"),
}

# seed 001 digest §3: the gpulet artifact's INT_MODEL_CONSTANT.CSV for the RTX 2080 Ti.
TRUTH = {"l2_self": 0.11291, "l2_other": 0.71596, "dram_self": 0.35487,
         "dram_other": 0.08820, "constant": 0.89537}

CO_LOCATIONS = 1250  # 2 samples each: 2,500 as seed 001 §4.4
SAMPLE_BATCHES = [2, 4, 8, 16, 32]
SPLITS = [(20, 80), (40, 60), (50, 50), (60, 40), (80, 20)]
NOISE_SIGMA = 0.06  # of the log-slowdown
OUTLIER_PROBABILITY = 0.1
OUTLIER_SIGMA = 0.2  # an outlier adds |N(0, OUTLIER_SIGMA)| to the log-slowdown

HEADER = (
    "# SYNTHETIC: the numbers are made up by tools/make_synthetic_profiles.py, NOT measured.\n"
    "# Shaped like seed 001 Fig. 4 and seed 000 Tables 4.2 / 6.2. Format: docs/profile-format.md.\n"
)


def smooth_max(x):
    return (1 + x ** SMOOTH_MAX_POWER) ** (1 / SMOOTH_MAX_POWER)


def knee_pct(knee16, batch):
    return min(100.0, knee16 * SMS_V100 / SMS_2080TI * (batch / 16) ** KNEE_BATCH_EXPONENT)


def latency_ms(params, batch, partition):
    _, l1, l32, serial, knee16 = params[:5]
    whole = l1 + (l32 - l1) * (batch - 1) / 31
    s = serial * l1
    demand = knee_pct(knee16, batch)
    return s + (whole - s) * smooth_max(demand / partition) / smooth_max(demand / 100)


def utilisation(params):
    l2, dram = params[5], params[6]
    points = []
    for b in UTIL_BATCHES:
        w = math.log2(b) / 5
        points.append((b, round(l2[0] + (l2[1] - l2[0]) * w, 3),
                       round(dram[0] + (dram[1] - dram[0]) * w, 3)))
    return points


def number(x):
    """Shortest text for a value already rounded: 12.0 -> 12, 0.250 -> 0.25."""
    text = repr(x)
    return text[:-2] if text.endswith(".0") else text


def flow(values):
    return "[" + ", ".join(number(v) for v in values) + "]"


def profile_yaml(name, params):
    memory_mb, l1, l32, serial, knee16, _, _, why = params
    source = (f"synthetic, NOT measured: L(b,p) = S + P(b)*g(D(b)/p)/g(D(b)/100) with "
              f"L(1,100) = {number(l1)} ms, L(32,100) = {number(l32)} ms, serial "
              f"{round(serial * 100)} % of L(1,100), knee D(16) = "
              f"{knee_pct(knee16, 16):.0f} % ({why}); tools/make_synthetic_profiles.py")
    lines = [HEADER.rstrip("\n"),
             "# latency_ms.rows[i][j] = L(batches[j], partitions[i]) in ms.",
             f"model: {name}", f"device: {DEVICE}", "synthetic: true",
             f"source: \"{source}\"", f"memory_mb: {memory_mb}", "latency_ms:",
             f"  partitions: {flow(PARTITIONS)}", f"  batches: {flow(BATCHES)}", "  rows:"]
    for p in PARTITIONS:
        row = [round(latency_ms(params, b, p), 3) for b in BATCHES]
        chunks = [", ".join(number(v) for v in row[i:i + 8]) for i in range(0, len(row), 8)]
        lines.append(f"    # partition {p} %")
        lines.append("    - [" + ",\n       ".join(chunks) + "]")
    lines.append("utilisation:  # standalone, whole device (100 %), fractions of peak")
    for b, l2, dram in utilisation(params):
        lines.append(f"  - {{batch: {b}, l2: {number(l2)}, dram: {number(dram)}}}")
    return "\n".join(lines) + "\n"


def device_yaml():
    return (HEADER + f"name: {DEVICE}\nmemory_mb: {DEVICE_MEMORY_MB}\nsynthetic: true\n"
            "source: \"synthetic RTX 2080 Ti-like device (11 GB, 68 SMs), the GPU of seed 001 "
            "sec. 5.1; NOT measured\"\n")


def truth_yaml():
    lines = [HEADER.rstrip("\n"),
             "# Ground truth of the simulator: the gpulet artifact's RTX 2080 Ti coefficients",
             "# (seed 001 digest sec. 3, INT_MODEL_CONSTANT.CSV). interference_samples.csv is drawn",
             "# from it; planners read the fit in interference.yaml instead.",
             "kind: linear", "coefficients:"]
    for i, key in enumerate(TRUTH):
        lines.append(f"  {key}: {number(TRUTH[key])}  # c{i + 1}")
    lines += ["synthetic: true",
              "source: \"gpulet artifact (github.com/casys-kaist/glet) resource/2080ti/"
              "INT_MODEL_CONSTANT.CSV, via seed 001 digest sec. 3\""]
    return "\n".join(lines) + "\n"


def truth_factor(l2_self, l2_other, dram_self, dram_other):
    t = TRUTH
    return (t["l2_self"] * l2_self + t["l2_other"] * l2_other + t["dram_self"] * dram_self +
            t["dram_other"] * dram_other + t["constant"])


def samples_csv(rng):
    util = {name: {b: (l2, dram) for b, l2, dram in utilisation(params)}
            for name, params in MODELS.items()}
    names = sorted(MODELS)
    rows = []
    for _ in range(CO_LOCATIONS):
        a, b = rng.sample(names, 2)
        batch_a, batch_b = rng.choice(SAMPLE_BATCHES), rng.choice(SAMPLE_BATCHES)
        part_a, part_b = rng.choice(SPLITS)
        # Each side alone on its partition: utilisation scaled by partition / 100 (seed 001 §4.4).
        side_a = tuple(u * part_a / 100 for u in util[a][batch_a])
        side_b = tuple(u * part_b / 100 for u in util[b][batch_b])
        for (m, bm, pm, (l2s, ds)), (o, bo, po, (l2o, do)) in (
                ((a, batch_a, part_a, side_a), (b, batch_b, part_b, side_b)),
                ((b, batch_b, part_b, side_b), (a, batch_a, part_a, side_a))):
            # Log-normal measurement noise, plus now and then an upward outlier: contention that
            # the two utilisation features do not capture (seed 001 Fig. 7's long tail).
            noise = rng.gauss(0, NOISE_SIGMA)
            if rng.random() < OUTLIER_PROBABILITY:
                noise += abs(rng.gauss(0, OUTLIER_SIGMA))
            slowdown = max(1.0, truth_factor(l2s, l2o, ds, do) * math.exp(noise))
            rows.append(f"{m},{bm},{pm},{o},{bo},{po},{l2s:.5f},{l2o:.5f},{ds:.5f},{do:.5f},"
                        f"{slowdown:.5f}")
    return (HEADER +
            f"# {len(rows)} samples from {CO_LOCATIONS} co-locations; slowdown = truth factor "
            "(interference_truth.yaml) x log-normal noise, clamped to >= 1.\n"
            "self_model,self_batch,self_partition,other_model,other_batch,other_partition,"
            "l2_self,l2_other,dram_self,dram_other,slowdown\n" + "\n".join(rows) + "\n")


def write(path, text):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(repo, "profiles", DEVICE),
                        help="output folder (default profiles/%s)" % DEVICE)
    parser.add_argument("--seed", type=int, default=1, help="seed of the samples (default 1)")
    parser.add_argument("--fit-binary", help="tessera-fit-interference, to write interference.yaml")
    args = parser.parse_args()

    os.makedirs(args.out, exist_ok=True)
    write(os.path.join(args.out, "device.yaml"), device_yaml())
    for name, params in MODELS.items():
        write(os.path.join(args.out, name + ".yaml"), profile_yaml(name, params))
    write(os.path.join(args.out, "interference_truth.yaml"), truth_yaml())
    samples = os.path.join(args.out, "interference_samples.csv")
    write(samples, samples_csv(random.Random(args.seed)))
    print(f"wrote {len(MODELS)} profiles, device.yaml, interference_truth.yaml and "
          f"interference_samples.csv to {args.out}")

    # Relative paths in the fit's provenance header keep the committed file machine-independent.
    rel_samples = os.path.relpath(samples, repo)
    fit = [args.fit_binary or "build/bin/tessera-fit-interference", "--samples", rel_samples,
           "--out", os.path.relpath(os.path.join(args.out, "interference.yaml"), repo),
           "--seed", "1", "--synthetic",
           "--source", "least-squares fit to the synthetic interference_samples.csv"]
    if not args.fit_binary:
        print("now fit the interference model (from the repository root):\n  " +
              " ".join(f"'{a}'" if " " in a else a for a in fit))
        return 0
    fit[0] = os.path.abspath(args.fit_binary)
    return subprocess.run(fit, cwd=repo, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
