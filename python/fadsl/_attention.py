"""fadsl.attention and fadsl.attention_backward: dispatch on the inputs
(torch tensors to the custom ops of _torch_ops, numpy arrays to the
interpreter), checks of what the C library cannot see, and the numpy path.

The C library computes the base-2 log-sum-exp (what its backward pass reads);
Python returns the natural one, as scaled_dot_product_attention's relatives
(FlashAttention's softmax_lse) do: lse = lse2 * ln 2.
"""
import ctypes
import importlib
import math
import os
import sys

import numpy as np

from . import _arrays
from ._lib import FadslInvalidArgument, attention_options, attn, context

LN2 = math.log(2.0)
DTYPES = {"f16": 0, "bf16": 1}


def torch_ops():
    """The torch custom ops, registered on first use (importing torch)."""
    mod = sys.modules.get("fadsl._torch_ops")
    return mod if mod is not None else importlib.import_module("fadsl._torch_ops")


def interpreter_threads():
    """Threads for the interpreter's attention kernels: $FADSL_THREADS, else
    the machine's cores (their programs write disjoint rows)."""
    env = os.environ.get("FADSL_THREADS")
    if env:
        return max(1, int(env))
    return max(1, min(os.cpu_count() or 1, 16))


def shapes(q, k, v, fn="fadsl.attention"):
    """(B, H, KVH, Nq, Nkv, D, dtype name) after the checks that need the
    three arrays together; the library checks the rest (head counts, D,
    causal lengths) with its own messages."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if len(x.shape) != 4:
            raise FadslInvalidArgument(
                f"{fn}: {name} must be 4-D [batch, heads, sequence, head_dim] as for "
                f"scaled_dot_product_attention; got {_arrays.describe(x)}")
    dt = {_arrays.dtype_name(x) for x in (q, k, v)}
    if len(dt) != 1:
        raise FadslInvalidArgument(
            f"{fn}: q, k and v must have one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    dtype = dt.pop()
    if dtype not in DTYPES:
        raise FadslInvalidArgument(
            f"{fn}: the kernels take float16 or bfloat16; got {q.dtype} (convert with .half() / "
            f".bfloat16(), or .astype(np.float16))")
    B, H, Nq, D = q.shape
    if tuple(k.shape) != tuple(v.shape):
        raise FadslInvalidArgument(f"{fn}: k and v must have the same shape; got {list(k.shape)} and {list(v.shape)}")
    Bk, KVH, Nkv, Dk = k.shape
    if Bk != B or Dk != D:
        raise FadslInvalidArgument(
            f"{fn}: q {list(q.shape)} and k {list(k.shape)} must agree in batch (dim 0) and head_dim (dim 3)")
    return B, H, KVH, Nq, Nkv, D, dtype


def check_shape(B, H, KVH, Nq, Nkv, D, causal, scale, dtype):
    """The library's own check of a shape, without data (for fake tensors)."""
    ctx = context(-1)
    h = ctx.attention()
    ctx.attention_check(attn.fadsl_attention_check_shape(h, B, H, KVH, Nq, Nkv, D, int(causal),
                                                         float(scale or 0.0), DTYPES[dtype]))


def _scale(scale):
    if scale is None:
        return 0.0
    return float(scale)


def _ptr(a):
    return ctypes.c_void_p(a.__array_interface__["data"][0])


def _host_input(x):
    return np.ascontiguousarray(x)


# Above this head dimension the deterministic backward pass is the faster
# one, and deterministic=None runs it on CUDA tensors too: at D=256 on an H100
# (2026-12-06, N=16384, bench/results/2026-12-06-h100) 381 TFLOP/s against the
# fused pass's 318 full, 373 against 321 causal; with the older 32x32 tiles
# on an H200 (run 55) 0.47 of cuDNN against 0.42.
DETERMINISTIC_FASTER_ABOVE_D = 128

# Up to this many keys the deterministic pass is the faster one too at
# D <= 64, and with the causal mask up to D=128: on an H100 at
# N=1024 (2026-12-06, bench/results/2026-12-06e-h100 run 72, and
# 2026-12-06c-h100 run 61) D=64 344.5 and 348.2 TFLOP/s against the fused
# pass's 333.8 and 329.0, causal 279.6 and 280.2 against 236.4 and 251.1,
# D=128 causal 296.9 and 301.1 against 289.9 and 290.3; D=128 without the
# mask the fused pass is ahead (400.3 and 402.3 against 376.7 and 380.6),
# and at N=4096 it is ahead everywhere.  Again after the fused kernel's
# waits at a program's start and end were cut (2026-12-06f-h100 run 75):
# D=64 353.9 against 341.2, causal 285.8 against 246.7, D=128 causal 312.3
# against 289.6, D=128 full 391.3 against 398.5.
DETERMINISTIC_FASTER_UP_TO_N = 1024


def default_deterministic(on_cuda, d_head, torch_deterministic, kv_len=None, causal=False):
    """deterministic=None's choice: on CUDA tensors the faster pass, fused
    up to DETERMINISTIC_FASTER_ABOVE_D and deterministic above, or at most
    DETERMINISTIC_FASTER_UP_TO_N keys (kv_len) at D <= 64 or with the causal
    mask; the deterministic one wherever
    torch.use_deterministic_algorithms(True) is in force
    (torch_deterministic); elsewhere (the CPU interpreter, which has no dQ
    accumulator to add into) the deterministic one.  From 4096 keys up to
    D=128 the fused pass is the faster (on an H100 on 2026-12-06, run 72,
    1.05 to 1.26x the deterministic pass at D=64, 1.07 to 1.17x at D=128,
    1.10 and 1.15x on the trading day)."""
    if not on_cuda:
        return True
    if torch_deterministic or d_head > DETERMINISTIC_FASTER_ABOVE_D:
        return True
    short = kv_len is not None and kv_len <= DETERMINISTIC_FASTER_UP_TO_N
    return short and (d_head <= 64 or bool(causal))


def resolve_deterministic(deterministic, q, k=None, causal=False):
    """The backward pass's mode: the flag given, else default_deterministic's."""
    if deterministic is not None:
        return bool(deterministic)
    on_cuda = _arrays.is_torch(q) and q.is_cuda
    torch_deterministic = False
    if on_cuda:
        import torch
        torch_deterministic = torch.are_deterministic_algorithms_enabled()
    kv_len = k.shape[-2] if len(getattr(k, "shape", ())) >= 2 else None   # shapes() checks the rest
    return default_deterministic(on_cuda, q.shape[-1], torch_deterministic, kv_len, causal)


def attention(q, k, v, *, causal=False, scale=None, return_lse=False, deterministic=None):
    """softmax(scale * q k^T [causal mask]) v, exactly, in O(N) memory.

    q: [B, H, Nq, D]; k, v: [B, KVH, Nkv, D] with H a multiple of KVH
    (grouped-query attention: query head h reads key/value head h // (H // KVH));
    float16 or bfloat16; D in {16, 32, 64, 128, 256}; causal (query i sees keys
    0..i) needs Nq == Nkv.  scale defaults to 1/sqrt(D).

    torch CUDA tensors run fadsl's kernels on the current stream, with autograd
    (fadsl's backward kernels) and torch.compile support; torch CPU tensors and
    numpy arrays run the same kernels on the CPU interpreter.  Returns the output
    (same dtype as q), and with return_lse=True also the natural log-sum-exp of
    each query row's scaled scores, float32 [B, H, Nq].

    deterministic chooses autograd's backward pass: True gives the same
    gradients to the bit on every run (dQ by its own kernel, no atomics);
    False the fused pass (the scores computed once, dQ summed with atomic
    additions, so its last bits vary from run to run; on an H200 up to 1.17x
    faster at D=128, see docs/performance.md); None (the default) on CUDA
    tensors the faster of the two, the fused pass up to D=128 and the
    deterministic one at D=256 and on sequences of at most 1024 keys at D <= 64
    or causal, unless torch.use_deterministic_algorithms(True)
    is in force (then the deterministic one), the deterministic one on the CPU.
    """
    if _arrays.is_torch(q):
        return torch_ops().attention(q, k, v, causal, scale, return_lse, resolve_deterministic(deterministic, q, k, causal))
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, np.ndarray):
            raise FadslInvalidArgument(
                f"fadsl.attention: {name} is a {type(x).__name__}; give numpy arrays or torch tensors (all alike)")
    B, H, KVH, Nq, Nkv, D, dtype = shapes(q, k, v)
    q, k, v = (_host_input(x) for x in (q, k, v))
    o = np.empty(q.shape, q.dtype)
    lse2 = np.empty((B, H, Nq), np.float32)
    ctx = context(-1)
    h = ctx.attention()
    if o.size:
        ctx.attention_check(attn.fadsl_attention_forward_host(
            h, _ptr(q), _ptr(k), _ptr(v), _ptr(o), _ptr(lse2), B, H, KVH, Nq, Nkv, D, int(causal),
            _scale(scale), DTYPES[dtype], interpreter_threads()))
    if return_lse:
        return o, (lse2 * np.float32(LN2)).astype(np.float32)
    return o


def attention_backward(do, q, k, v, o, lse, *, causal=False, scale=None, dlse=None, deterministic=None):
    """The gradients (dq, dk, dv) of attention(q, k, v) given do = dLoss/dO, the
    forward pass's output o and natural log-sum-exp lse (attention(...,
    return_lse=True)), and optionally dlse = dLoss/dlse (float32 [B, H, Nq]) for a
    loss that also reads the log-sum-exp.  On numpy arrays (the interpreter) and
    torch tensors (the GPU, or the interpreter for CPU tensors); torch users
    normally let autograd call it.  deterministic as for attention (with dlse
    the deterministic kernels run either way)."""
    if _arrays.is_torch(q):
        return torch_ops().attention_backward(do, q, k, v, o, lse, causal, scale, dlse,
                                              resolve_deterministic(deterministic, q, k, causal))
    B, H, KVH, Nq, Nkv, D, dtype = shapes(q, k, v, "fadsl.attention_backward")
    for name, x, shape in (("do", do, q.shape), ("o", o, q.shape), ("lse", lse, (B, H, Nq)),
                           ("dlse", dlse, (B, H, Nq))):
        if x is None and name == "dlse":
            continue
        if not isinstance(x, np.ndarray) or tuple(x.shape) != tuple(shape):
            raise FadslInvalidArgument(
                f"fadsl.attention_backward: {name} must be a numpy array of shape {list(shape)}; got "
                f"{_arrays.describe(x) if isinstance(x, np.ndarray) else type(x).__name__}")
    for name, x in (("do", do), ("o", o)):
        if x.dtype != q.dtype:
            raise FadslInvalidArgument(f"fadsl.attention_backward: {name} must be {q.dtype} like q; got {x.dtype}")
    q, k, v, do, o = (_host_input(x) for x in (q, k, v, do, o))
    lse2 = np.ascontiguousarray(lse, np.float32) / np.float32(LN2)
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    ctx = context(-1)
    h = ctx.attention()
    if not dq.size:
        return dq, dk, dv
    common = (B, H, KVH, Nq, Nkv, D, int(causal), _scale(scale), DTYPES[dtype], interpreter_threads())
    if dlse is None:
        delta = np.empty((B, H, Nq), np.float32)
        opts = attention_options(causal, resolve_deterministic(deterministic, q, k, causal))
        st = attn.fadsl_attention_backward_host_ex(h, ctypes.byref(opts), _ptr(q), _ptr(k), _ptr(v), _ptr(o),
                                                   _ptr(lse2), _ptr(do), _ptr(dq), _ptr(dk), _ptr(dv), _ptr(delta),
                                                   B, H, KVH, Nq, Nkv, D, _scale(scale), DTYPES[dtype],
                                                   interpreter_threads())
    else:
        delta = delta_with_lse_grad(o, do, dlse)
        st = attn.fadsl_attention_backward_delta_host(h, _ptr(q), _ptr(k), _ptr(v), _ptr(lse2), _ptr(do),
                                                      _ptr(dq), _ptr(dk), _ptr(dv), _ptr(delta), *common)
    ctx.attention_check(st)
    return dq, dk, dv


def delta_with_lse_grad(o, do, dlse):
    """rowsum(dO * O) - dLoss/dlse (natural), the delta the backward kernels
    read when the loss also depends on the log-sum-exp (see attention_delta.c)."""
    rows = (o.astype(np.float32) * do.astype(np.float32)).sum(axis=-1, dtype=np.float32)
    return np.ascontiguousarray(rows - np.asarray(dlse, np.float32), np.float32)
