#!/usr/bin/env python3
"""Plots a tessera-bench run as one SVG: latency CDF per model (left) and goodput over time per model
(right). Standard library only, so it runs anywhere python3 does.

    tessera-bench ... --requests-csv run.requests.csv --timeline-csv run.timeline.csv
    python3 bench/plot_report.py --requests run.requests.csv --timeline run.timeline.csv -o run.svg

--requests: tessera-bench's per-request CSV (model,scheduled_s,sent_s,latency_ms,status); the CDF
uses successful requests, x on a log scale, SLO marks from --slo model=ms.
--timeline: tessera-bench's per-second CSV (second,model,sent,ok,within_slo,errors,p99_ms); goodput
is within_slo per second, errors per second are drawn dashed.
"""

import argparse
import csv
import math
import sys
from pathlib import Path

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f"]
W, H = 520, 360  # one panel
M = dict(left=64, right=16, top=36, bottom=48)


def esc(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def nice_ticks(lo, hi, n=5):
    if hi <= lo:
        hi = lo + 1
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for mult in (1, 2, 5, 10):
        if (hi - lo) / (step * mult) <= n:
            step *= mult
            break
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + 1e-9:
        if t >= lo - 1e-9:
            ticks.append(round(t, 10))
        t += step
    return ticks


class Panel:
    def __init__(self, x0, title, xlabel, ylabel, xlim, ylim, xlog=False):
        self.x0, self.title, self.xlabel, self.ylabel = x0, title, xlabel, ylabel
        self.xlim, self.ylim, self.xlog = xlim, ylim, xlog
        self.parts = []

    def sx(self, x):
        lo, hi = self.xlim
        if self.xlog:
            x, lo, hi = math.log10(max(x, 1e-9)), math.log10(lo), math.log10(hi)
        return self.x0 + M["left"] + (x - lo) / (hi - lo) * (W - M["left"] - M["right"])

    def sy(self, y):
        lo, hi = self.ylim
        return M["top"] + (1 - (y - lo) / (hi - lo)) * (H - M["top"] - M["bottom"])

    def line(self, xs, ys, color, dash=None, width=1.6):
        pts = " ".join(f"{self.sx(x):.1f},{self.sy(y):.1f}" for x, y in zip(xs, ys))
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="{width}"{d} '
                          f'points="{pts}"/>')

    def vline(self, x, color, label):
        X = self.sx(x)
        self.parts.append(f'<line x1="{X:.1f}" y1="{M["top"]}" x2="{X:.1f}" y2="{H - M["bottom"]}" '
                          f'stroke="{color}" stroke-dasharray="3,3"/>')
        self.parts.append(f'<text x="{X + 3:.1f}" y="{M["top"] + 12}" font-size="10" '
                          f'fill="{color}">{esc(label)}</text>')

    def legend(self, names):
        for i, name in enumerate(names):
            y = M["top"] + 8 + 14 * i
            x = self.x0 + M["left"] + 8
            self.parts.append(f'<line x1="{x}" y1="{y}" x2="{x + 18}" y2="{y}" '
                              f'stroke="{COLORS[i % len(COLORS)]}" stroke-width="2"/>')
            self.parts.append(f'<text x="{x + 22}" y="{y + 4}" font-size="11">{esc(name)}</text>')

    def svg(self):
        out = [f'<rect x="{self.x0 + M["left"]}" y="{M["top"]}" '
               f'width="{W - M["left"] - M["right"]}" height="{H - M["top"] - M["bottom"]}" '
               f'fill="none" stroke="#444"/>',
               f'<text x="{self.x0 + W / 2}" y="20" font-size="14" text-anchor="middle">'
               f'{esc(self.title)}</text>',
               f'<text x="{self.x0 + (W + M["left"]) / 2}" y="{H - 10}" font-size="12" '
               f'text-anchor="middle">{esc(self.xlabel)}</text>',
               f'<text transform="translate({self.x0 + 16},{H / 2}) rotate(-90)" font-size="12" '
               f'text-anchor="middle">{esc(self.ylabel)}</text>']
        if self.xlog:
            lo, hi = math.floor(math.log10(self.xlim[0])), math.ceil(math.log10(self.xlim[1]))
            xt = [10 ** e for e in range(lo, hi + 1) if self.xlim[0] <= 10 ** e <= self.xlim[1]]
        else:
            xt = nice_ticks(*self.xlim)
        for t in xt:
            X = self.sx(t)
            out.append(f'<line x1="{X:.1f}" y1="{H - M["bottom"]}" x2="{X:.1f}" '
                       f'y2="{H - M["bottom"] + 4}" stroke="#444"/>')
            out.append(f'<text x="{X:.1f}" y="{H - M["bottom"] + 16}" font-size="10" '
                       f'text-anchor="middle">{t:g}</text>')
        for t in nice_ticks(*self.ylim):
            Y = self.sy(t)
            out.append(f'<line x1="{self.x0 + M["left"] - 4}" y1="{Y:.1f}" '
                       f'x2="{self.x0 + W - M["right"]}" y2="{Y:.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{self.x0 + M["left"] - 6}" y="{Y + 3:.1f}" font-size="10" '
                       f'text-anchor="end">{t:g}</text>')
        return "\n".join(out + self.parts)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--requests", required=True, help="tessera-bench --requests-csv output")
    p.add_argument("--timeline", required=True, help="tessera-bench --timeline-csv output")
    p.add_argument("--slo", action="append", default=[], help="model=ms, marks the SLO on the CDF")
    p.add_argument("--title", default="tessera-bench")
    p.add_argument("-o", "--output", required=True, help="SVG file to write")
    args = p.parse_args()

    latencies = {}
    for row in read_csv(args.requests):
        if row["status"] == "OK" and row["latency_ms"]:
            latencies.setdefault(row["model"], []).append(float(row["latency_ms"]))
    if not latencies:
        sys.exit(f"{args.requests}: no successful requests to plot")
    models = sorted(latencies)
    all_lat = [v for vs in latencies.values() for v in vs]
    lo = max(min(all_lat) * 0.8, 1e-3)
    hi = max(all_lat) * 1.2
    cdf = Panel(0, f"{args.title}: latency CDF", "latency (ms, log scale)", "fraction of requests",
                (lo, hi), (0, 1), xlog=True)
    for i, m in enumerate(models):
        v = sorted(latencies[m])
        n = len(v)
        # At most ~1000 points per curve (every k-th, plus the tail's last 100 exactly) keeps the
        # SVG small without flattening the tail.
        step = max(1, (n - 100) // 900)
        keep = sorted(set(range(0, max(0, n - 100), step)) | set(range(max(0, n - 100), n)))
        cdf.line([v[k] for k in keep], [(k + 1) / n for k in keep], COLORS[i % len(COLORS)])
    for spec in args.slo:
        name, _, ms = spec.partition("=")
        if name in models and lo < float(ms) < hi:
            cdf.vline(float(ms), COLORS[models.index(name) % len(COLORS)], f"SLO {name}")
    cdf.legend(models)

    rows = read_csv(args.timeline)
    # The drain after the last send leaves a nearly empty last second; stop at the last sending one.
    last_send = max((int(r["second"]) for r in rows if int(r["sent"]) > 0), default=0)
    series = {}
    for row in rows:
        if row["model"] == "overall" or int(row["second"]) > last_send:
            continue
        series.setdefault(row["model"], []).append(
            (int(row["second"]), int(row["within_slo"]), int(row["errors"])))
    tmax = max((s for vs in series.values() for s, _, _ in vs), default=1)
    ymax = max((max(g, e) for vs in series.values() for _, g, e in vs), default=1)
    good = Panel(W, f"{args.title}: goodput over time", "time since start (s)",
                 "requests/s within SLO (dashed: errors/s)", (0, tmax + 1), (0, ymax * 1.1 + 1))
    names = sorted(series)
    for i, m in enumerate(names):
        pts = sorted(series[m])
        color = COLORS[models.index(m) % len(COLORS)] if m in models else COLORS[i % len(COLORS)]
        good.line([s + 0.5 for s, _, _ in pts], [g for _, g, _ in pts], color)
        if any(e for _, _, e in pts):
            good.line([s + 0.5 for s, _, _ in pts], [e for _, _, e in pts], color, dash="4,3")
    good.legend(names)

    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H}" '
           f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="white"/>\n'
           f'{cdf.svg()}\n{good.svg()}\n</svg>\n')
    Path(args.output).write_text(svg)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
