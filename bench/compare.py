#!/usr/bin/env python3
"""Compares fadsl's attention benchmark with the peers' and prints a markdown table.

  python3 bench/compare.py fadsl.jsonl peers.jsonl [more peers.jsonl ...] [--out table.md]

fadsl.jsonl is written by bench/run-attention.sh (records with provider "fadsl"); the peers' files by
a timing script of the peers (PyTorch SDPA backends; records with provider, B, H, N, D, causal, fwd_tflops, bwd_tflops, and
"error" when a peer could not run a shape).  Both use the same FLOP count (4*B*H*N*N*D, x0.5 causal,
x2.5 backward).  A row per shape: fadsl's forward / backward TFLOP/s, each peer's, and fadsl's ratio to
the best peer in each direction; a last column gives fadsl's largest error against float64 when the
records carry one.  Records of one provider and shape that occur twice: the last one counts.
"""
import argparse
import json
import math
import sys


def load(paths):
    recs = []
    for path in paths:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{n}: not a JSON record: {e}")
    return recs


def key(r):
    """A shape: B, H, KVH (H when the record has none), N, D, causal, dtype (f16 when none)."""
    dtype = {"float16": "f16", "bfloat16": "bf16"}.get(r.get("dtype", "f16"), r.get("dtype", "f16"))
    return (int(r["B"]), int(r["H"]), int(r.get("KVH") or r["H"]), int(r["N"]), int(r["D"]), bool(r["causal"]), dtype)


def num(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def fmt_pair(f, b):
    def one(x):
        return "—" if x is None else f"{x:.0f}" if x >= 10 else f"{x:.1f}"
    return f"{one(f)} / {one(b)}"


def ratio(mine, best):
    if mine is None or best is None or best <= 0:
        return "—"
    return f"{mine / best:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fadsl", help="JSONL from bench/run-attention.sh")
    ap.add_argument("peers", nargs="*", help="JSONL records of the peers (provider, B, H, N, D, causal, fwd_tflops, bwd_tflops)")
    ap.add_argument("--out", help="also write the table to this file")
    a = ap.parse_args()

    mine = {}
    order = []
    for r in load([a.fadsl]):
        if r.get("provider", "fadsl") != "fadsl":
            continue
        k = key(r)
        if k not in mine:
            order.append(k)
        mine[k] = r
    peers = {}          # provider -> shape -> record
    for r in load(a.peers):
        p = r.get("provider")
        if not p or p == "fadsl":
            continue
        k = key(r)
        peers.setdefault(p, {})[k] = r
        if k not in mine and k not in order:
            order.append(k)
    names = sorted(peers)

    # the other backward pass fadsl-attn --bench times beside the chosen one
    other = next((m for m in ("deterministic", "fused") if any(f"bwd_{m}_tflops" in r for r in mine.values())), None)
    head = ["shape", "fadsl fwd / bwd"] + ([f"fadsl bwd {other}"] if other else []) + \
           [f"{p} fwd / bwd" for p in names] + ["fadsl / best peer (fwd, bwd)"]
    any_err = any("errors" in r for r in mine.values())
    if any_err:
        head.append("fadsl max error")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in order:
        B, H, KVH, N, D, causal, dtype = k
        shape = f"B={B} H={H}{'' if KVH == H else f' KVH={KVH}'} N={N} D={D} {'causal' if causal else 'full'}" + \
            ("" if dtype == "f16" else f" {dtype}")
        r = mine.get(k, {})
        f, b = num(r.get("fwd_tflops")), num(r.get("bwd_tflops"))
        row = [shape, fmt_pair(f, b) if r else "not run"]
        if other:
            x = num(r.get(f"bwd_{other}_tflops"))
            row.append(f"{x:.0f}" if x is not None else "—")
        best_f = best_b = None
        for p in names:
            pr = peers[p].get(k)
            if pr is None:
                row.append("not run")
                continue
            pf, pb = num(pr.get("fwd_tflops")), num(pr.get("bwd_tflops"))
            if pf is None and pb is None and pr.get("error"):
                row.append("error")
                continue
            row.append(fmt_pair(pf, pb))
            if pf is not None:
                best_f = pf if best_f is None else max(best_f, pf)
            if pb is not None:
                best_b = pb if best_b is None else max(best_b, pb)
        row.append(f"{ratio(f, best_f)}, {ratio(b, best_b)}")
        if any_err:
            errs = r.get("errors") or {}
            vals = [v for v in errs.values()]
            if not errs:
                row.append("—")
            elif any(v is None for v in vals):
                row.append("NaN")
            else:
                row.append(f"{max(vals):.1e}")
        lines.append("| " + " | ".join(row) + " |")
    gpus = sorted({r.get("gpu") for r in mine.values() if r.get("gpu")} |
                  {r.get("gpu") for p in peers.values() for r in p.values() if r.get("gpu")})
    text = "\n".join(lines) + "\n"
    modes = sorted({r.get("bwd_mode", "deterministic") for r in mine.values()})
    kernels = {"fused": "attn_bwd_prep + attn_bwd + attn_bwd_dq_convert",
               "deterministic": "attn_bwd_d + attn_bwd_dkdv + attn_bwd_dq"}
    what = "; ".join(f"{m}: {kernels.get(m, m)}" for m in modes + ([other] if other and other not in modes else []))
    note = (f"\nTFLOP/s, forward / backward, f16 unless stated; GPU: {', '.join(gpus) or 'unknown'}. "
            f"fadsl's backward pass: {modes[0] if len(modes) == 1 else ', '.join(modes)} ({what}).\n")
    sys.stdout.write(text + note)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + note)


if __name__ == "__main__":
    main()
