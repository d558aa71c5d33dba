#!/usr/bin/env python3
"""Forward TFLOP/s of fadsl at several configurations against the peers, a markdown table.

  python3 bench/compare_configs.py FWD.jsonl PEERS.jsonl [more PEERS.jsonl ...] [--peer sdpa_cudnn]
          [--out table.md] [--best BEST.jsonl]

FWD.jsonl holds the records of bench/run-forward-configs.sh (fadsl-attn --bench --forward-only --json,
"label" naming the configuration); PEERS.jsonl the peers' (anchors.py, bench/gqa_peers.py), read as
bench/compare.py reads them.  A row per shape, a column per configuration in the order first met:
TFLOP/s and the ratio to the peer's forward TFLOP/s.  --best writes, per shape, the record of the
fastest configuration, its label replaced by "fadsl (fastest configuration timed)" and kept as
"config_label" (for bench/plot_attention.py).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import key, load  # noqa: E402  (the records reader and shape key of bench/compare.py)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("fwd")
    ap.add_argument("peers", nargs="+")
    ap.add_argument("--peer", default="sdpa_cudnn", help="the peer the ratios are to")
    ap.add_argument("--out", help="also write the table here")
    ap.add_argument("--best", help="the fastest configuration's record per shape, as JSON lines")
    a = ap.parse_args()
    ours, labels = {}, []
    for r in load([a.fwd]):
        if r.get("provider", "fadsl") != "fadsl" or not r.get("fwd_tflops"):
            continue
        label = r.get("label", "fadsl")
        if label not in labels:
            labels.append(label)
        ours.setdefault(key(r), {})[label] = r
    if not ours:
        sys.exit(f"{a.fwd}: no fadsl forward records")
    peer = {key(r): r["fwd_tflops"] for r in load(a.peers)
            if r.get("provider") == a.peer and r.get("fwd_tflops") and "error" not in r}
    lines = [f"| shape | {a.peer} | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    best = []
    for k in sorted(ours, key=lambda k: (k[4], k[3], k[5], k[0], k[2])):
        b, h, kvh, n, d, causal, dtype = k
        p = peer.get(k)
        cells = []
        for label in labels:
            r = ours[k].get(label)
            t = r["fwd_tflops"] if r else None
            cells.append("" if t is None else f"{t:.0f} ({t / p:.2f})" if p else f"{t:.0f}")
        heads = f"H={h}" if kvh == h else f"H={h} KVH={kvh}"
        name = f"B={b} {heads} N={n} D={d} {'causal' if causal else 'full'} {dtype}"
        lines.append(f"| {name} | {f'{p:.0f}' if p else '-'} | " + " | ".join(cells) + " |")
        fastest = max(ours[k].values(), key=lambda r: r["fwd_tflops"])
        best.append(dict(fastest, config_label=fastest.get("label"), label="fadsl (fastest configuration timed)"))
    table = "\n".join(lines) + "\n"
    print(table, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(table)
    if a.best:
        with open(a.best, "w") as f:
            for r in best:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
