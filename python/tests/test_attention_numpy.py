"""fadsl.attention and fadsl.attention_backward on numpy arrays: the kernels
of attention.fa on the CPU interpreter, against float64 references."""
import math

import numpy as np
import pytest

import fadsl
from conftest import BOUNDS, dtypes, randn, ref_attention, ref_grads, rel_err

# (B, H, KVH, Nq, Nkv, D, causal): MHA and GQA, odd lengths, Nq != Nkv, every head dim
SHAPES = [
    (1, 2, 2, 64, 64, 32, False),
    (2, 4, 2, 37, 53, 32, False),     # grouped-query, unequal odd lengths
    (1, 6, 2, 45, 45, 16, True),      # three query heads per kv head, causal, odd
    (1, 3, 1, 129, 129, 64, True),    # one past a block boundary
    (1, 1, 1, 17, 200, 128, False),
    (1, 2, 1, 33, 33, 256, True),
]


def ids(s):
    B, H, KVH, Nq, Nkv, D, causal = s
    return f"B{B}H{H}KV{KVH}q{Nq}k{Nkv}D{D}{'c' if causal else ''}"


@pytest.mark.parametrize("dtype", dtypes())
@pytest.mark.parametrize("shape", SHAPES, ids=ids)
def test_forward_matches_float64(shape, dtype):
    B, H, KVH, Nq, Nkv, D, causal = shape
    rng = np.random.default_rng(Nq * 31 + D)
    q, k, v = randn(rng, (B, H, Nq, D), dtype), randn(rng, (B, KVH, Nkv, D), dtype), randn(rng, (B, KVH, Nkv, D), dtype)
    o, lse = fadsl.attention(q, k, v, causal=causal, return_lse=True)
    ref, ref_lse = ref_attention(q, k, v, causal)
    assert o.dtype == q.dtype and o.shape == q.shape
    assert lse.dtype == np.float32 and lse.shape == (B, H, Nq)
    assert rel_err(o, ref) < BOUNDS[dtype][0]
    assert rel_err(lse, ref_lse) < 1e-5


@pytest.mark.parametrize("dtype", dtypes())
@pytest.mark.parametrize("shape", SHAPES[:4], ids=ids)
def test_backward_matches_float64(shape, dtype):
    B, H, KVH, Nq, Nkv, D, causal = shape
    rng = np.random.default_rng(Nkv * 7 + H)
    q, k, v = randn(rng, (B, H, Nq, D), dtype), randn(rng, (B, KVH, Nkv, D), dtype), randn(rng, (B, KVH, Nkv, D), dtype)
    do = randn(rng, (B, H, Nq, D), dtype)
    o, lse = fadsl.attention(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = fadsl.attention_backward(do, q, k, v, o, lse, causal=causal)
    rq, rk, rv = ref_grads(q, k, v, do, causal)
    bound = BOUNDS[dtype][1]
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert rel_err(dq, rq) < bound and rel_err(dk, rk) < bound and rel_err(dv, rv) < bound


@pytest.mark.parametrize("deterministic", [False, True])
def test_both_backward_passes(deterministic, monkeypatch):
    """The fused pass (dQ added atomically) and the deterministic one against
    float64; the deterministic one gives the same bits on 1 and 3 interpreter
    threads."""
    rng = np.random.default_rng(11)
    B, H, KVH, Nq, Nkv, D = 1, 6, 2, 77, 50, 64
    q, k, v = randn(rng, (B, H, Nq, D), "f16"), randn(rng, (B, KVH, Nkv, D), "f16"), randn(rng, (B, KVH, Nkv, D), "f16")
    do = randn(rng, (B, H, Nq, D), "f16")
    o, lse = fadsl.attention(q, k, v, return_lse=True)
    monkeypatch.setenv("FADSL_THREADS", "1")
    dq, dk, dv = fadsl.attention_backward(do, q, k, v, o, lse, deterministic=deterministic)
    rq, rk, rv = ref_grads(q, k, v, do, False)
    assert rel_err(dq, rq) < 1e-2 and rel_err(dk, rk) < 1e-2 and rel_err(dv, rv) < 1e-2
    if deterministic:
        monkeypatch.setenv("FADSL_THREADS", "3")
        dq3, dk3, dv3 = fadsl.attention_backward(do, q, k, v, o, lse, deterministic=True)
        assert np.array_equal(dq.view(np.uint16), dq3.view(np.uint16))
        assert np.array_equal(dk.view(np.uint16), dk3.view(np.uint16))
        assert np.array_equal(dv.view(np.uint16), dv3.view(np.uint16))


def test_backward_through_the_lse():
    """A loss that also reads the log-sum-exp (as ring attention's does): its
    gradient enters the backward kernels through delta."""
    rng = np.random.default_rng(3)
    B, H, KVH, N, D = 1, 4, 2, 50, 32
    q, k, v = randn(rng, (B, H, N, D), "f16"), randn(rng, (B, KVH, N, D), "f16"), randn(rng, (B, KVH, N, D), "f16")
    do = randn(rng, (B, H, N, D), "f16")
    dlse = rng.standard_normal((B, H, N)).astype(np.float32)
    o, lse = fadsl.attention(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = fadsl.attention_backward(do, q, k, v, o, lse, causal=True, dlse=dlse)
    rq, rk, rv = ref_grads(q, k, v, do, True, dlse=dlse)
    assert rel_err(dq, rq) < 1e-2 and rel_err(dk, rk) < 1e-2 and rel_err(dv, rv) < 1e-2
    dq0, _, _ = fadsl.attention_backward(do, q, k, v, o, lse, causal=True)
    assert rel_err(dq0, rq) > 0.05   # the LSE's gradient is not negligible here: the test can fail


def test_scale_and_layouts():
    rng = np.random.default_rng(5)
    q, k, v = (randn(rng, (1, 2, 40, 32), "f16") for _ in range(3))
    o = fadsl.attention(q, k, v, scale=0.3)
    ref, _ = ref_attention(q, k, v, scale=0.3)
    assert rel_err(o, ref) < 2e-3
    # a [B, N, H, D] array viewed as [B, H, N, D] (not contiguous): copied, same result
    bnhd = randn(rng, (1, 40, 2, 32), "f16")
    qt = bnhd.transpose(0, 2, 1, 3)
    assert not qt.flags.c_contiguous
    o1 = fadsl.attention(qt, k, v)
    o2 = fadsl.attention(np.ascontiguousarray(qt), k, v)
    assert np.array_equal(o1, o2)
    assert fadsl.attention(q, k, v, scale=1 / math.sqrt(32)).tobytes() == fadsl.attention(q, k, v).tobytes()


def _qkv(h=4, kvh=2, nq=16, nkv=16, d=32, dtype=np.float16):
    return (np.zeros((1, h, nq, d), dtype), np.zeros((1, kvh, nkv, d), dtype), np.zeros((1, kvh, nkv, d), dtype))


@pytest.mark.parametrize("make, message", [
    (lambda: _qkv(dtype=np.float32), "the kernels take float16 or bfloat16; got float32"),
    (lambda: (np.zeros((4, 16, 32), np.float16),) + _qkv()[1:], "q must be 4-D [batch, heads, sequence, head_dim]"),
    (lambda: _qkv()[:2] + (np.zeros((1, 2, 17, 32), np.float16),), "k and v must have the same shape"),
    (lambda: _qkv(h=6, kvh=4), "H=6 query heads are not a multiple of KVH=4 key/value heads"),
    (lambda: _qkv(d=48), "head dimension D=48: it must be 16, 32, 64, 128 or 256"),
    (lambda: (np.zeros((1, 4, 16, 64), np.float16),) + _qkv()[1:], "must agree in batch (dim 0) and head_dim"),
])
def test_errors_carry_the_message(make, message):
    q, k, v = make()
    with pytest.raises(fadsl.FadslInvalidArgument) as e:
        fadsl.attention(q, k, v)
    assert message in str(e.value)
    assert e.value.status == "INVALID_ARGUMENT"


def test_causal_needs_equal_lengths():
    q, k, v = _qkv(nq=16, nkv=24)
    fadsl.attention(q, k, v)   # fine without the mask
    with pytest.raises(ValueError, match="causal attention needs Nq == Nkv"):
        fadsl.attention(q, k, v, causal=True)


def test_mixed_kinds_and_bad_scale():
    q, k, v = _qkv()
    with pytest.raises(fadsl.FadslInvalidArgument, match="k is a list"):
        fadsl.attention(q, k.tolist(), v)
    with pytest.raises(fadsl.FadslInvalidArgument, match="scale -1: want a positive finite number"):
        fadsl.attention(q, k, v, scale=-1.0)


def test_default_backward_pass_per_head_dim():
    """deterministic=None's choice (default_deterministic, no torch needed):
    on CUDA the fused pass up to D=128, the deterministic one at D=256 (the
    faster there) and wherever torch's deterministic switch is on; on the CPU
    always the deterministic one."""
    from fadsl._attention import DETERMINISTIC_FASTER_ABOVE_D, default_deterministic
    assert DETERMINISTIC_FASTER_ABOVE_D == 128
    for d in (16, 32, 64, 128):
        assert default_deterministic(True, d, False) is False
        assert default_deterministic(True, d, False, 4096, True) is False
        assert default_deterministic(True, d, True) is True
        assert default_deterministic(False, d, False) is True
    assert default_deterministic(True, 256, False) is True
    assert default_deterministic(True, 256, True) is True
    assert default_deterministic(False, 256, False) is True


def test_default_backward_pass_short_sequences():
    """On CUDA up to DETERMINISTIC_FASTER_UP_TO_N keys the deterministic pass
    at D <= 64, and with the causal mask at D=128 (the faster there); the
    fused one at D=128 without the mask and beyond that length."""
    from fadsl._attention import DETERMINISTIC_FASTER_UP_TO_N, default_deterministic
    n = DETERMINISTIC_FASTER_UP_TO_N
    assert n == 1024
    for d in (16, 64):
        for causal in (False, True):
            assert default_deterministic(True, d, False, n, causal) is True
            assert default_deterministic(True, d, False, 100, causal) is True
            assert default_deterministic(True, d, False, n + 1, causal) is False
    assert default_deterministic(True, 128, False, n, True) is True
    assert default_deterministic(True, 128, False, n, False) is False
    assert default_deterministic(True, 128, False, n + 1, True) is False
