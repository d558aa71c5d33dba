"""Shared by the tests: float64 references for attention, random inputs, and
what this machine has (torch, a CUDA device, ml_dtypes' bfloat16)."""
import importlib.util
import math

import numpy as np
import pytest


def have(module):
    return importlib.util.find_spec(module) is not None


HAVE_TORCH = have("torch")
HAVE_BF16 = have("ml_dtypes")


def numpy_dtype(name):
    if name == "f16":
        return np.float16
    import ml_dtypes
    return ml_dtypes.bfloat16


def dtypes():
    """f16, and bf16 where numpy can hold it (ml_dtypes)."""
    return ["f16", pytest.param("bf16", marks=pytest.mark.skipif(not HAVE_BF16, reason="ml_dtypes not installed"))]


def randn(rng, shape, dtype):
    return rng.standard_normal(shape).astype(numpy_dtype(dtype))


def _expand(x, groups):
    return np.repeat(x, groups, axis=1)


def _reduce(x, groups):
    B, H, N, D = x.shape
    return x.reshape(B, H // groups, groups, N, D).sum(axis=2)


def probabilities(q, k, causal, scale):
    """P = softmax(scale * q k^T [causal]) and the natural lse, in float64,
    with k's heads repeated for grouped-query attention."""
    q = q.astype(np.float64)
    k = _expand(k.astype(np.float64), q.shape[1] // k.shape[1])
    s = scale * (q @ k.transpose(0, 1, 3, 2))
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((s.shape[-2], n), bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    return p / l, (m + np.log(l))[..., 0]


def ref_attention(q, k, v, causal=False, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    p, lse = probabilities(q, k, causal, scale)
    v = _expand(v.astype(np.float64), q.shape[1] // v.shape[1])
    return p @ v, lse


def ref_grads(q, k, v, do, causal=False, scale=None, dlse=None):
    """Gradients of sum(o * do) [+ sum(lse * dlse)] with respect to q, k, v."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    g = q.shape[1] // k.shape[1]
    p, _ = probabilities(q, k, causal, scale)
    q64, do64 = q.astype(np.float64), do.astype(np.float64)
    k64, v64 = _expand(k.astype(np.float64), g), _expand(v.astype(np.float64), g)
    o = p @ v64
    dv = p.transpose(0, 1, 3, 2) @ do64
    dp = do64 @ v64.transpose(0, 1, 3, 2)
    delta = (do64 * o).sum(axis=-1, keepdims=True)
    if dlse is not None:
        delta = delta - dlse.astype(np.float64)[..., None]
    ds = p * (dp - delta)
    dq = scale * ds @ k64
    dk = scale * ds.transpose(0, 1, 3, 2) @ q64
    return dq, _reduce(dk, g), _reduce(dv, g)


def rel_err(x, ref):
    x = np.asarray(x, np.float64)
    assert not np.isnan(x).any(), "NaN in the output"
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


# the bounds of fadsl-attn --check: f16 o 2e-3, gradients 1e-2; bf16 1e-2, 3e-2
BOUNDS = {"f16": (2e-3, 1e-2), "bf16": (1e-2, 3e-2)}
