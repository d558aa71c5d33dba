#!/usr/bin/env python3
"""Times the peers of fadsl's attention variants on one GPU, in the same run as bench/run-variants.sh times
fadsl: FlexAttention (torch.compile'd flex_attention with the same score and mask functions, block masks
that skip fully masked tiles), SDPA where it supports the variant (cuDNN/FlashAttention-2 for plain causal or
full attention, the memory-efficient backend for ALiBi given as an additive bias), FlashAttention's
flash_attn_with_kvcache for decoding when the flash_attn package is installed, and a device copy (torch's
copy_) for the bandwidth decoding is measured against.  It extends the shared peers' runner (anchors.py)
with variants; the shapes and FLOP counts are fadsl-attn's.

  python3 variants_peers.py --out peers.jsonl                          # the standard variant set
  python3 variants_peers.py --variants 'window=1024,0;softcap=50' --shapes day   # two variants, one shape

Variants: window=L,R (query i sees keys i-L..i+R, -1 unbounded), softcap=C, alibi, sinks, varlen=S (S equal
packed sequences), combined with '+' (window=1024,0+sinks).  Scores are the scaled scores s = scale q.k,
positions aligned at 0 (of each sequence).  Sinks are emulated in FlexAttention by one extra key of value 0
whose score is the sink's logit.  FLOPs count only the (query, key) pairs a variant lets through:
4 * H * pairs * D forward, 2.5 times that backward.  Times are medians of triton.testing.do_bench.
"""
import argparse, json, math, sys, time
import torch
import torch._functorch.config
import triton

# do_bench runs the same backward graph again and again (retain_graph=True), which compiled graphs with
# donated buffers refuse
torch._functorch.config.donated_buffer = False

SHAPES = {
    # (B, H, N, D): the trading day and D=128 at 16k tokens (hidden 2048)
    "day": [(1, 12, 23400, 64)],
    "d128": [(1, 16, 16384, 128)],
}
DEFAULT_VARIANTS = ["window=1024,0", "softcap=50+window=-1,0", "alibi+window=-1,0", "sinks+window=-1,0",
                    "varlen=4+window=-1,0", "window=1024,0+sinks", "softcap=50+window=4096,0"]


def parse_variant(text):
    v = {"window": None, "softcap": 0.0, "alibi": False, "sinks": False, "varlen": 0}
    for part in text.split("+"):
        name, _, val = part.partition("=")
        if name == "window":
            left, right = (int(x) for x in val.split(","))
            v["window"] = (left, right)
        elif name == "softcap":
            v["softcap"] = float(val)
        elif name in ("alibi", "sinks"):
            v[name] = True
        elif name == "varlen":
            v["varlen"] = int(val)
        else:
            raise SystemExit(f"unknown variant {part}")
    return v


def visible_pairs(v, N):
    """(query, key) pairs the variant lets through, one head (the FLOP count)."""
    lens = [N // v["varlen"]] * v["varlen"] if v["varlen"] else [N]
    lens[-1] += N - sum(lens)
    left, right = v["window"] if v["window"] else (-1, -1)
    total = 0
    for n in lens:
        for i in range(n):
            lo = 0 if left < 0 else max(0, i - left)
            hi = n - 1 if right < 0 else min(n - 1, i + right)
            total += max(0, hi - lo + 1)
    return total


def flex_provider(v, B, H, N, D, device, dtype):
    from torch.nn.attention.flex_attention import flex_attention, create_block_mask
    left, right = v["window"] if v["window"] else (-1, -1)
    slopes = torch.exp2(-8.0 * torch.arange(1, H + 1, device=device) / H) if v["alibi"] else None
    sinks = (torch.randn(H, device=device) * 0.5).requires_grad_() if v["sinks"] else None
    doc = None
    if v["varlen"]:
        n = N // v["varlen"]
        doc = torch.clamp(torch.arange(N, device=device) // n, max=v["varlen"] - 1)
        start = torch.searchsorted(doc, doc, right=False)   # each position's sequence start
    nk = N + 1 if v["sinks"] else N   # the sinks' extra key is the last one

    def pos(idx):
        return idx - start[idx] if doc is not None else idx

    def mask_mod(b, h, q_idx, kv_idx):
        ok = kv_idx < N
        if doc is not None:
            ok = ok & (doc[q_idx] == doc[torch.clamp(kv_idx, max=N - 1)])
        pq, pk = pos(q_idx), pos(torch.clamp(kv_idx, max=N - 1))
        if left >= 0:
            ok = ok & (pk >= pq - left)
        if right >= 0:
            ok = ok & (pk <= pq + right)
        if v["sinks"]:
            ok = ok | (kv_idx == N)
        return ok

    def score_mod(score, b, h, q_idx, kv_idx):
        if v["softcap"]:
            score = v["softcap"] * torch.tanh(score / v["softcap"])
        if slopes is not None:
            score = score - slopes[h] * (pos(q_idx) - pos(torch.clamp(kv_idx, max=N - 1))).abs()
        if sinks is not None:
            score = torch.where(kv_idx == N, sinks[h], score)
        return score

    block_mask = create_block_mask(mask_mod, None, None, N, nk, device=device)
    compiled = torch.compile(flex_attention)

    def run(q, k, v_):
        if nk != N:   # the sink's key and value: zeros
            k = torch.cat([k, k.new_zeros(B, k.shape[1], 1, D)], 2)
            v_ = torch.cat([v_, v_.new_zeros(B, v_.shape[1], 1, D)], 2)
        return compiled(q, k, v_, score_mod=score_mod, block_mask=block_mask, scale=1.0 / math.sqrt(D),
                        enable_gqa=q.shape[1] != k.shape[1])
    return run


def sdpa_provider(name, v, N, D):
    """SDPA where it has the variant natively; None where it does not."""
    from torch.nn.attention import sdpa_kernel, SDPBackend
    plain_causal = v["window"] == (-1, 0) and not (v["softcap"] or v["alibi"] or v["sinks"] or v["varlen"])
    plain_full = v["window"] is None and not (v["softcap"] or v["alibi"] or v["sinks"] or v["varlen"])
    alibi_only = v["alibi"] and v["window"] in (None, (-1, 0)) and not (v["softcap"] or v["sinks"] or v["varlen"])
    backend = {"sdpa_cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa_flash": SDPBackend.FLASH_ATTENTION,
               "sdpa_eff": SDPBackend.EFFICIENT_ATTENTION}[name]
    if name in ("sdpa_cudnn", "sdpa_flash") and (plain_causal or plain_full):
        def run(q, k, v_):
            with sdpa_kernel([backend]):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v_, is_causal=plain_causal,
                                                                        scale=1.0 / math.sqrt(D))
        return run
    if name == "sdpa_eff" and alibi_only:
        def run(q, k, v_):
            H = q.shape[1]
            i = torch.arange(N, device=q.device)
            slopes = torch.exp2(-8.0 * torch.arange(1, H + 1, device=q.device) / H)
            bias = -slopes[:, None, None] * (i[:, None] - i[None, :]).abs().to(q.dtype)
            if v["window"] == (-1, 0):
                bias = bias.masked_fill(i[None, :] > i[:, None], float("-inf"))
            with sdpa_kernel([backend]):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v_, attn_mask=bias[None].to(q.dtype),
                                                                        scale=1.0 / math.sqrt(D))
        return run
    return None


def measure(provider, text, B, H, N, D, dtype):
    v = parse_variant(text)
    rec = dict(provider=provider, variant=text, B=B, H=H, KVH=H, N=N, D=D, dtype=str(dtype).split(".")[-1],
               gpu=torch.cuda.get_device_name())
    pairs = visible_pairs(v, N)
    fwd_flops = 4.0 * B * H * pairs * D
    try:
        torch._dynamo.reset()   # each variant compiled afresh: no state left by the one before (or by its failure)
        t0 = time.time()
        run = flex_provider(v, B, H, N, D, "cuda", dtype) if provider == "flex" else sdpa_provider(provider, v, N, D)
        if run is None:
            rec["error"] = "the variant is not supported by this provider"
            return rec
        torch.manual_seed(0)
        q, k, vv = (torch.randn(B, H, N, D, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
        o = run(q, k, vv)
        torch.cuda.synchronize()
        rec["first_call_s"] = round(time.time() - t0, 3)   # compilation included (FlexAttention)
        ms = triton.testing.do_bench(lambda: run(q, k, vv), warmup=25, rep=200, return_mode="median")
        rec.update(fwd_ms=ms, fwd_tflops=fwd_flops / ms * 1e-9)
        do = torch.randn_like(o)
        t0 = time.time()
        o.backward(do, retain_graph=True)
        torch.cuda.synchronize()
        rec["first_bwd_s"] = round(time.time() - t0, 3)
        ms = triton.testing.do_bench(lambda: o.backward(do, retain_graph=True), warmup=25, rep=200,
                                     return_mode="median", grad_to_none=[q, k, vv])
        rec.update(bwd_ms=ms, bwd_tflops=2.5 * fwd_flops / ms * 1e-9)
    except Exception as e:  # a peer that cannot run a shape is reported, not fatal
        rec["error"] = f"{type(e).__name__}: {e}"[:300]
    torch.cuda.empty_cache()
    return rec


def decode_peers(B, Sq, H, KVH, D, page, length, dtype):
    """flash_attn_with_kvcache (when installed) and a device copy of the K cache."""
    recs = []
    blocks = (length + page - 1) // page
    kc = torch.randn(B * blocks + 1, page, KVH, D, device="cuda", dtype=dtype)
    vc = torch.randn_like(kc)
    dst = torch.empty_like(kc)
    ms = triton.testing.do_bench(lambda: dst.copy_(kc), warmup=25, rep=200, return_mode="median")
    bytes_ = kc.numel() * kc.element_size()
    recs.append(dict(provider="torch_copy", decode=True, B=B, Sq=Sq, H=H, KVH=KVH, D=D, page_size=page,
                     length=length, ms=ms, copy_gbps=2 * bytes_ / (ms * 1e-3) * 1e-9))
    try:
        from flash_attn import flash_attn_with_kvcache
        q = torch.randn(B, Sq, H, D, device="cuda", dtype=dtype)
        table = torch.randperm(B * blocks, device="cuda", dtype=torch.int32).reshape(B, blocks) + 1
        lens = torch.full((B,), length, device="cuda", dtype=torch.int32)
        run = lambda: flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, block_table=table, causal=True)
        run()
        ms = triton.testing.do_bench(run, warmup=25, rep=200, return_mode="median")
        kv = 2.0 * B * length * KVH * D * kc.element_size()
        recs.append(dict(provider="flash_attn_kvcache", decode=True, B=B, Sq=Sq, H=H, KVH=KVH, D=D, page_size=page,
                         length=length, ms=ms, kv_gbps=kv / (ms * 1e-3) * 1e-9))
    except Exception as e:
        recs.append(dict(provider="flash_attn_kvcache", decode=True, B=B, Sq=Sq, H=H, KVH=KVH, D=D,
                         page_size=page, length=length, error=f"{type(e).__name__}: {e}"[:200]))
    return recs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--providers", default="flex,sdpa_cudnn,sdpa_flash,sdpa_eff")
    ap.add_argument("--variants", default=";".join(DEFAULT_VARIANTS), help="';'-separated variants")
    ap.add_argument("--shapes", default="day;d128", help="';'-separated: day, d128 or B,H,N,D")
    ap.add_argument("--decode", default="64,1,32,8,128,64,32768;8,1,32,8,128,64,131072",
                    help="';'-separated B,SQ,H,KVH,D,PAGE,LENGTH of the decoding runs ('' for none)")
    ap.add_argument("--dtype", default="bf16", choices=["f16", "bf16"])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    dtype = torch.float16 if a.dtype == "f16" else torch.bfloat16
    shapes = []
    for name in a.shapes.split(";"):
        shapes += SHAPES[name] if name in SHAPES else [tuple(int(x) for x in name.split(","))]
    variants = a.variants.split(";")
    out = open(a.out, "w") if a.out else None
    for provider in a.providers.split(","):
        for text in variants:
            for B, H, N, D in shapes:
                rec = measure(provider, text, B, H, N, D, dtype)
                if out:
                    out.write(json.dumps(rec) + "\n"); out.flush()
                print(f"{provider:11s} {text:28s} B{B} H{H} N{N} D{D}  fwd {rec.get('fwd_tflops', float('nan')):6.1f} "
                      f"TF  bwd {rec.get('bwd_tflops', float('nan')):6.1f} TF  first {rec.get('first_call_s', float('nan')):.2f} s"
                      f"  {rec.get('error', '')[:60]}", flush=True)
    for spec in filter(None, a.decode.split(";")):
        B, Sq, H, KVH, D, page, length = (int(x) for x in spec.split(","))
        for rec in decode_peers(B, Sq, H, KVH, D, page, length, dtype):
            if out:
                out.write(json.dumps(rec) + "\n"); out.flush()
            print(rec, flush=True)


if __name__ == "__main__":
    main()
