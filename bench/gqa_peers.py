#!/usr/bin/env python3
"""The peers on grouped-query attention shapes, with as many KV heads as the shape says.

  python3 bench/gqa_peers.py --shape B,H,KVH,N,D[,causal] [--shape ...] [--dtype f16|bf16] --out peers.jsonl

PyTorch SDPA with the cuDNN and FlashAttention-2 backends (enable_gqa=True, K and V with KVH heads),
timed as bench/run-attention.sh's records are read by bench/compare.py: medians of
triton.testing.do_bench (CUDA events, 25 warm-up and 200 ms of runs), forward and backward,
FLOPs 4*B*H*N*N*D (halved when causal; x2.5 backward).  A backend that cannot run a shape is
recorded with its error.
"""
import argparse, json, math, sys

import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"sdpa_cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa_flash": SDPBackend.FLASH_ATTENTION}


def flops(B, H, N, D, causal):
    return 4.0 * B * H * N * N * D * (0.5 if causal else 1.0)


def measure(name, B, H, KVH, N, D, causal, dtype):
    rec = dict(provider=name, B=B, H=H, KVH=KVH, N=N, D=D, causal=causal,
               dtype="f16" if dtype == torch.float16 else "bf16", gpu=torch.cuda.get_device_name())
    scale = 1.0 / math.sqrt(D)
    torch.manual_seed(0)
    q = torch.randn(B, H, N, D, device="cuda", dtype=dtype, requires_grad=True)
    k, v = (torch.randn(B, KVH, N, D, device="cuda", dtype=dtype, requires_grad=True) for _ in range(2))

    def run():
        with sdpa_kernel([BACKENDS[name]]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale,
                                                                    enable_gqa=KVH != H)
    try:
        o = run()
        ms = triton.testing.do_bench(run, warmup=25, rep=200, return_mode="median")
        rec.update(fwd_ms=ms, fwd_tflops=flops(B, H, N, D, causal) / ms * 1e-9)
        do = torch.randn_like(o)
        ms = triton.testing.do_bench(lambda: o.backward(do, retain_graph=True), warmup=25, rep=200,
                                     return_mode="median", grad_to_none=[q, k, v])
        rec.update(bwd_ms=ms, bwd_tflops=2.5 * flops(B, H, N, D, causal) / ms * 1e-9)
    except Exception as e:  # reported, not fatal
        rec["error"] = f"{type(e).__name__}: {e}"[:300]
    del q, k, v
    torch.cuda.empty_cache()
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", required=True, help="B,H,KVH,N,D[,causal]")
    ap.add_argument("--providers", default="sdpa_cudnn,sdpa_flash")
    ap.add_argument("--dtype", default="f16", choices=["f16", "bf16"])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    dtype = torch.float16 if a.dtype == "f16" else torch.bfloat16
    with open(a.out, "a") as out:
        for s in a.shape:
            f = s.split(",")
            B, H, KVH, N, D = (int(x) for x in f[:5])
            causal = len(f) > 5 and f[5] == "causal"
            for name in a.providers.split(","):
                rec = measure(name, B, H, KVH, N, D, causal, dtype)
                out.write(json.dumps(rec) + "\n")
                out.flush()
                print(f"{name:11s} B{B} H{H} KVH{KVH} N{N} D{D} {'causal' if causal else 'full'} {rec['dtype']}: "
                      f"fwd {rec.get('fwd_tflops', float('nan')):6.1f} TF  bwd {rec.get('bwd_tflops', float('nan')):6.1f} TF "
                      f"{rec.get('error', '')[:80]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
