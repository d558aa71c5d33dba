#!/usr/bin/env python3
"""The variants' table from bench/run-variants.sh's records: fadsl (fadsl-attn --json, one record per variant and
shape, labelled with the peers' variant names) next to FlexAttention and SDPA (variants_peers.py), forward and
backward TFLOP/s over the pairs each variant lets through, the ratio to FlexAttention, the cold compile times
(fadsl: front end + NVRTC + first run; Flex: its first call, torch.compile included), the errors against float64;
then decoding: GB/s of K and V read, next to the device copy's bandwidth.

  python3 compare_variants.py fadsl.jsonl peers.jsonl > table.md
"""
import json, sys


def load(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def fmt(x, spec=".1f"):
    return "—" if x is None else format(x, spec)


def main():
    fadsl, peers = load(sys.argv[1]), load(sys.argv[2]) if len(sys.argv) > 2 else []
    print("| variant | shape | fadsl fwd / bwd TFLOP/s | Flex fwd / bwd | fadsl / Flex | SDPA fwd / bwd | "
          "fadsl cold fwd + bwd s | Flex first fwd + bwd s | fadsl errors (o, dq) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in fadsl:
        if r.get("decode"):
            continue
        label, shape = r.get("label", r.get("variant", "?")), (r["B"], r["H"], r["N"], r["D"])
        same = [p for p in peers if p.get("variant") == label and (p["B"], p["H"], p["N"], p["D"]) == shape]
        flex = next((p for p in same if p["provider"] == "flex" and "error" not in p), None)
        sdpa = next((p for p in same if p["provider"].startswith("sdpa") and "error" not in p), None)
        ratio = "—"
        if flex and r.get("fwd_tflops") and r.get("bwd_tflops"):
            ratio = f"{r['fwd_tflops'] / flex['fwd_tflops']:.2f} / {r['bwd_tflops'] / flex['bwd_tflops']:.2f}"
        err = r.get("errors", {})
        print(f"| {label} | B{shape[0]} H{shape[1]} N{shape[2]} D{shape[3]} | {fmt(r.get('fwd_tflops'))} / "
              f"{fmt(r.get('bwd_tflops'))} | {fmt(flex and flex['fwd_tflops'])} / {fmt(flex and flex['bwd_tflops'])} | "
              f"{ratio} | {(sdpa['provider'] + ' ' + fmt(sdpa['fwd_tflops']) + ' / ' + fmt(sdpa['bwd_tflops'])) if sdpa else '—'} | "
              f"{fmt(r.get('first_fwd_s'), '.2f')} + {fmt(r.get('first_bwd_s'), '.2f')} | "
              f"{fmt(flex and flex.get('first_call_s'), '.2f')} + {fmt(flex and flex.get('first_bwd_s'), '.2f')} | "
              f"{err.get('o', '—')}, {err.get('dq', '—')} |")
    dec = [r for r in fadsl if r.get("decode")]
    if dec:
        print()
        print("| decoding | fadsl GB/s (K, V read) | fadsl's copy GB/s | fadsl / copy | torch copy GB/s | "
              "fadsl / torch copy | flash_attn_with_kvcache GB/s | splits | errors (o, lse) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in dec:
            key = (r["B"], r["Sq"], r["H"], r["KVH"], r["D"], r["page_size"])
            same = [p for p in peers if p.get("decode") and (p["B"], p["Sq"], p["H"], p["KVH"], p["D"], p["page_size"]) == key
                    and p.get("length", 0) // r["page_size"] <= r["max_blocks"]]
            copy = next((p for p in same if p["provider"] == "torch_copy"), None)
            fa = next((p for p in same if p["provider"] == "flash_attn_kvcache" and "error" not in p), None)
            kv, own = r.get("kv_gbps"), r.get("copy_gbps")
            err = r.get("errors", {})
            print(f"| {r.get('label', '')} | {fmt(kv, '.0f')} | {fmt(own, '.0f')} | "
                  f"{fmt(kv / own * 100 if kv and own else None, '.0f')}% | {fmt(copy and copy['copy_gbps'], '.0f')} | "
                  f"{fmt(kv / copy['copy_gbps'] * 100 if kv and copy else None, '.0f')}% | "
                  f"{fmt(fa and fa['kv_gbps'], '.0f')} | {r.get('splits')} | {err.get('o', '—')}, {err.get('lse', '—')} |")


if __name__ == "__main__":
    main()
