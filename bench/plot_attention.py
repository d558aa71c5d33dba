#!/usr/bin/env python3
"""Bar chart of attention TFLOP/s per shape: fadsl (one bar per record label) next to the peers.

  python3 bench/plot_attention.py FADSL.jsonl PEERS.jsonl [more PEERS.jsonl ...] --out chart.png
          [--bwd recorded|fused|deterministic] [--title TEXT] [--providers sdpa_cudnn,sdpa_flash]
          [--rename 'LABEL=SHOWN AS' ...] [--forward-only]

FADSL.jsonl holds `fadsl-attn --bench --json` records (provider "fadsl"; "label" names the bar,
e.g. the pipeline); PEERS.jsonl the peers' records (provider "sdpa_cudnn", "sdpa_flash", ...; KVH
absent means KVH = H), as bench/compare.py reads them.  Two panels, forward and backward (with
--forward-only the forward one alone), one group
of bars per shape.  The backward bar of fadsl is, with --bwd recorded (the default), the pass the
record timed as bwd_ms (its bwd_mode); with fused or deterministic, that pass, from bwd_ms or from
the record's second timing (bwd_deterministic_ms / bwd_fused_ms).  A record of one label and shape
that occurs twice: the last one counts.  A missing value or a peer's "error" leaves its bar out.
Needs matplotlib.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import load as load_records  # noqa: E402  (the records reader of bench/compare.py)

PEER_COLORS = {"sdpa_cudnn": "0.25", "sdpa_flash": "0.6"}
DTYPES = {"float16": "f16", "f16": "f16", "bfloat16": "bf16", "bf16": "bf16"}


def shape_key(r):
    """The shape a record measures; peers' records omit KVH when it equals H and spell dtypes in full."""
    try:
        h = int(r["H"])
        return (int(r["B"]), h, int(r.get("KVH", h)), int(r["N"]), int(r["D"]), bool(r["causal"]),
                DTYPES.get(str(r.get("dtype", "f16")), str(r.get("dtype"))))
    except (KeyError, TypeError, ValueError):
        return None


def shape_name(k):
    b, h, kvh, n, d, causal, dtype = k
    heads = f"H{h}" if kvh == h else f"H{h} KVH{kvh}"
    return f"B{b} {heads}\nN{n} D{d}\n{'causal' if causal else 'full'} {dtype}"


def num(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) and x > 0 else None


def fadsl_bwd(r, mode):
    """Backward TFLOP/s of one fadsl record in the requested mode (None when the record lacks it)."""
    recorded = r.get("bwd_mode", "fused")
    if mode == "recorded" or mode == recorded:
        return num(r.get("bwd_tflops"))
    return num(r.get(f"bwd_{mode}_tflops"))


def collect(fadsl_path, peer_paths):
    """Returns the shapes in order, fadsl's records by label and shape, the peers' (fwd, bwd) TFLOP/s
    by provider and shape (only shapes fadsl measured), and the backward modes fadsl's records timed."""
    order, mine, modes = [], {}, set()
    for r in load_records([fadsl_path]):
        if r.get("provider", "fadsl") != "fadsl" or r.get("decode"):
            continue
        k = shape_key(r)
        if k is None:
            continue
        if k not in order:
            order.append(k)
        mine.setdefault(r.get("label") or "fadsl", {})[k] = r
        modes.add(r.get("bwd_mode", "fused"))
    peers = {}
    for path in peer_paths:
        for r in load_records([path]):
            p = r.get("provider")
            k = shape_key(r)
            if p and p != "fadsl" and k is not None and k in order and "error" not in r:
                peers.setdefault(p, {})[k] = (num(r.get("fwd_tflops")), num(r.get("bwd_tflops")))
    return order, mine, peers, modes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fadsl", help="JSONL of fadsl-attn --bench --json records")
    ap.add_argument("peers", nargs="+", help="JSONL records of the peers")
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument("--bwd", choices=["recorded", "fused", "deterministic"], default="recorded",
                    help="which fadsl backward pass to plot (default: the one each record timed as bwd_ms)")
    ap.add_argument("--providers", default="sdpa_cudnn,sdpa_flash",
                    help="the peers to plot, in this order (comma-separated)")
    ap.add_argument("--rename", action="append", default=[], metavar="LABEL=TEXT",
                    help="show fadsl's records of this label under another name (repeatable)")
    ap.add_argument("--forward-only", action="store_true",
                    help="one panel, the forward pass (records of fadsl-attn --bench --forward-only)")
    ap.add_argument("--title", default=None)
    ap.add_argument("--dpi", type=int, default=100)
    a = ap.parse_args()

    order, mine, peers, modes = collect(a.fadsl, a.peers)
    if not order:
        sys.exit(f"{a.fadsl}: no fadsl attention records")
    renames = {}
    for item in a.rename:
        old, sep, new = item.partition("=")
        if not sep:
            sys.exit(f"--rename wants LABEL=TEXT, not '{item}'")
        renames[old] = new
    series = []
    for label, recs in mine.items():
        shown = renames.get(label, label)
        series.append((shown if shown.startswith("fadsl") else f"fadsl {shown}",
                       {k: (num(r.get("fwd_tflops")), fadsl_bwd(r, a.bwd)) for k, r in recs.items()}))
    for p in a.providers.split(","):
        if p in peers:
            series.append((p, peers[p]))
    bwd_what = a.bwd if a.bwd != "recorded" else "/".join(sorted(modes))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = ("forward",) if a.forward_only else ("forward", f"backward (fadsl: {bwd_what})")
    # wide enough that every shape's label has room (about 0.75 inch a shape and panel)
    fig, axes = plt.subplots(1, len(panels), figsize=(max(13, 0.75 * len(order) * len(panels)), 4.8), sharey=True,
                             squeeze=False)
    axes = axes[0]
    width = 0.8 / len(series)
    cmap = plt.get_cmap("tab10")
    for panel, (ax, what) in enumerate(zip(axes, panels)):
        for i, (name, vals) in enumerate(series):
            xs, ys = [], []
            for j, k in enumerate(order):
                v = vals.get(k, (None, None))[panel]
                if v is not None:
                    xs.append(j - 0.4 + width * (i + 0.5))
                    ys.append(v)
            peer = not name.startswith("fadsl")
            # fadsl in colours, the peers in greys (the same in every chart), hatched
            color = PEER_COLORS.get(name, "0.6") if peer else cmap(i % 10)
            bars = ax.bar(xs, ys, width * 0.92, label=name, color=color,
                          hatch="//" if peer else None, edgecolor="white" if peer else None, linewidth=0)
            for bar, y in zip(bars, ys):
                ax.text(bar.get_x() + bar.get_width() / 2, y + 4, f"{y:.0f}", ha="center", va="bottom",
                        fontsize=6, rotation=90)
        ax.set_title(what, fontsize=10)
        ax.set_xticks(range(len(order)))
        ax.set_xticklabels([shape_name(k) for k in order], fontsize=7)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    axes[0].set_ylabel("TFLOP/s")
    top = max((v for _, vals in series for pair in vals.values() for v in pair[:len(panels)] if v is not None),
              default=1)
    axes[0].set_ylim(0, top * 1.15)
    axes[-1].legend(fontsize=7, loc="upper right", ncol=2)
    if a.title:
        fig.suptitle(a.title, fontsize=11)
    fig.tight_layout()
    fig.savefig(a.out, dpi=a.dpi)
    print(f"plot_attention: {len(order)} shapes, {len(series)} series -> {a.out}")


if __name__ == "__main__":
    main()
