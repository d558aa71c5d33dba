"""fadsl.load: any kernel called on numpy arrays (the interpreter), the way a
Triton user calls a @triton.jit function, against float64 numpy."""
from pathlib import Path

import numpy as np
import pytest

import fadsl
from conftest import HAVE_BF16, numpy_dtype, ref_attention, rel_err

KERNELS = '''
@kernel(grid=(cdiv(n, BLOCK),))
@autotune(BLOCK=[128, 64], warps=[4, 8], key=(n,))
def axpy(x: *T, y: *T, out: *T, a: f32, n: i32, T: constexpr, BLOCK: constexpr):
    i = program_id(0) * BLOCK + arange(0, BLOCK)
    m = i < n
    xv = load(x + i, mask=m).to(f32)
    yv = load(y + i, mask=m).to(f32)
    store(out + i, (a * xv + yv).to(T), mask=m)


@kernel(grid=(rows,))
def softmax_rows(x: *f32, out: *f32, rows: i32, cols: i32, BLOCK: constexpr):
    r = program_id(0)
    c = arange(0, BLOCK)
    m = c < cols
    v = load(x + r * cols + c, mask=m, other=-float("inf"))
    e = exp(v - max(v, axis=0))
    store(out + r * cols + c, e / sum(e, axis=0), mask=m)


@kernel(grid=(cdiv(M, BM), cdiv(N, BN)))
def matmul(a: *T[M, K], b: *T[K, N], c: *f32[M, N], M: i32, N: i32, K: i32, T: constexpr,
           BM: constexpr = 32, BN: constexpr = 32, BK: constexpr = 16):
    pa = make_block_ptr(a, shape=(M, K), strides=(K, 1), offsets=(program_id(0) * BM, 0),
                        block_shape=(BM, BK), order=(1, 0))
    pb = make_block_ptr(b, shape=(K, N), strides=(N, 1), offsets=(0, program_id(1) * BN),
                        block_shape=(BK, BN), order=(1, 0))
    acc = zeros((BM, BN), f32)
    for _ in range(cdiv(K, BK)):
        acc += dot(load(pa, boundary_check=(0, 1), padding="zero"),
                   load(pb, boundary_check=(0, 1), padding="zero"), out_dtype=f32)
        pa = advance(pa, (0, BK))
        pb = advance(pb, (BK, 0))
    pc = make_block_ptr(c, shape=(M, N), strides=(N, 1), offsets=(program_id(0) * BM, program_id(1) * BN),
                        block_shape=(BM, BN), order=(1, 0))
    store(pc, acc, boundary_check=(0, 1))


@kernel(grid=(rows,))
def copy_strided(x: *f32, out: *f32, rows: i32, cols: i32, sr: i32, sc: i32, BLOCK: constexpr):
    r = program_id(0)
    c = arange(0, BLOCK)
    m = c < cols
    store(out + r * cols + c, load(x + r * sr + c * sc, mask=m), mask=m)
'''


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    path = tmp_path_factory.mktemp("fa") / "kernels.fa"
    path.write_text(KERNELS)
    return fadsl.load(path)


def test_program_lists_its_kernels(prog):
    assert prog.kernels == ["axpy", "softmax_rows", "matmul", "copy_strided"]
    assert prog.axpy is prog["axpy"]
    assert [p.name for p in prog.axpy.params] == ["x", "y", "out", "a", "n", "T", "BLOCK"]


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_axpy_infers_the_dtype_and_defaults_the_block(prog, dtype):
    rng = np.random.default_rng(1)
    n = 1000
    x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    out = np.full(n, np.nan, dtype)
    info = prog.axpy(x, y, out, 2.5, n)
    ref = 2.5 * x.astype(np.float64) + y.astype(np.float64)
    assert rel_err(out, ref) < (1e-3 if dtype == "float16" else 1e-7)
    assert info.device == "interpreter" and info.config_source == "default"
    assert info.constexprs == f"T={ {'float32': 'f32', 'float16': 'f16', 'float64': 'f64'}[dtype]} BLOCK=128"
    assert info.grid == (8, 1, 1)


@pytest.mark.skipif(not HAVE_BF16, reason="ml_dtypes not installed")
def test_axpy_bf16(prog):
    bf16 = numpy_dtype("bf16")
    x, y = np.arange(300).astype(bf16), np.ones(300, bf16)
    out = np.zeros(300, bf16)
    prog.axpy(x, y, out, 0.5, 300)
    assert rel_err(out, 0.5 * np.arange(300) + 1) < 1e-2


def test_keywords_config_and_grid(prog):
    n = 500
    x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
    out = np.zeros(n, np.float32)
    info = prog.axpy(x=x, y=y, out=out, a=3.0, n=n, BLOCK=64, num_warps=8)
    assert info.constexprs == "T=f32 BLOCK=64" and info.warps == 8 and info.config_source == "explicit"
    assert info.grid == (8, 1, 1) and (out == 3).all()
    out[:] = 0
    info = prog.axpy[(2,)](x, y, out, 1.0, n, BLOCK=64)   # Triton's kernel[grid](...)
    assert info.grid == (2, 1, 1)
    assert (out[:128] == 1).all() and (out[128:] == 0).all()


def test_pipeline_and_schedule_keywords(prog):
    n = 300
    x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
    out = np.zeros(n, np.float32)
    # fixed by name; the interpreter runs the program whatever the GPU would pipeline
    info = prog.axpy(x, y, out, 2.0, n, pipeline="tma_ws", schedule="persistent")
    assert (out == 2).all() and info.config_source in ("explicit", "explicit+default")
    with pytest.raises(fadsl.FadslInvalidArgument, match=r"pipeline='tma_wss': want one of cp_async, tma"):
        prog.axpy(x, y, out, 2.0, n, pipeline="tma_wss")
    with pytest.raises(fadsl.FadslInvalidArgument, match=r"schedule=2: want one of grid, persistent"):
        prog.axpy(x, y, out, 2.0, n, schedule=2)


def test_given_grid_shapes(prog):
    n = 500
    x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
    out = np.zeros(n, np.float32)
    info = prog.axpy[3](x, y, out, 1.0, n, BLOCK=64)   # an int is a 1-D grid
    assert info.grid == (3, 1, 1) and (out[:192] == 1).all() and (out[192:] == 0).all()
    out[:] = 0
    info = prog.axpy[(0,)](x, y, out, 1.0, n, BLOCK=64)   # a zero dimension runs nothing
    assert info.grid == (0, 1, 1) and (out == 0).all() and info.constexprs == "T=f32 BLOCK=64"
    with pytest.raises(fadsl.FadslInvalidArgument, match="a grid is 1 to 3 integers"):
        prog.axpy[(1, 1, 1, 1)](x, y, out, 1.0, n)
    with pytest.raises(fadsl.FadslError, match="grid dimension 0 is -2"):
        prog.axpy[(-2,)](x, y, out, 1.0, n)


def test_softmax_rows(prog):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((7, 50)).astype(np.float32)
    out = np.zeros_like(x)
    prog.softmax_rows(x, out, 7, 50, BLOCK=64)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    assert rel_err(out, e / e.sum(axis=1, keepdims=True)) < 1e-6


@pytest.mark.parametrize("M, N, K", [(64, 64, 32), (45, 70, 33)])
def test_matmul(prog, M, N, K):
    rng = np.random.default_rng(M)
    a, b = rng.standard_normal((M, K)).astype(np.float16), rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    info = prog.matmul(a, b, c, M, N, K)
    assert info.grid == ((M + 31) // 32, (N + 31) // 32, 1)
    assert rel_err(c, a.astype(np.float64) @ b.astype(np.float64)) < 1e-6


def test_strided_views_with_strides_passed(prog):
    """As with Triton, the kernel addresses a view through the strides it is
    given: the view's own memory is handed over, not a copy."""
    base = np.arange(12 * 10, dtype=np.float32).reshape(12, 10)
    view = base.T[:, ::2]                      # 10 x 6, strides (1, 20) elements
    out = np.zeros(view.shape, np.float32)
    sr, sc = (s // 4 for s in view.strides)
    prog.copy_strided(view, out, view.shape[0], view.shape[1], sr, sc, BLOCK=8)
    assert np.array_equal(out, view)


def test_attention_fa_kernels_directly():
    path = fadsl.ATTENTION_FA or str(Path(__file__).resolve().parents[2] / "examples/attention/attention.fa")
    prog = fadsl.load(path)
    rng = np.random.default_rng(4)
    B, H, N, D = 1, 2, 40, 32
    q, k, v = (rng.standard_normal((B, H, N, D)).astype(np.float16) for _ in range(3))
    o = np.zeros_like(q)
    lse = np.zeros((B, H, N), np.float32)
    info = prog.attn_fwd(q, k, v, D ** -0.5, lse, o, B * H, N, N, n_groups=1, d_head=D, is_causal=True)
    assert "BLOCK_Q=128 BLOCK_K=64" in info.constexprs and info.config_source == "default"
    ref, ref_lse = ref_attention(q, k, v, True)
    assert rel_err(o, ref) < 2e-3
    assert rel_err(lse * np.log(2), ref_lse) < 1e-5


def test_errors(prog, tmp_path):
    x = np.zeros(16, np.float32)
    with pytest.raises(fadsl.FadslBindingError, match="kernel 'axpy' has no parameter 'z'"):
        prog.axpy(x, x, x, 1.0, 16, z=1)
    with pytest.raises(fadsl.FadslBindingError, match="missing argument 'n' \\(scalar\\)"):
        prog.axpy(x, x, x, 1.0)
    with pytest.raises(fadsl.FadslInvalidArgument, match="points to f32, but the array holds float64"):
        prog.softmax_rows(np.zeros(4), x, 1, 4, BLOCK=4)
    with pytest.raises(fadsl.FadslInvalidArgument, match="points to T = f32, but the array holds float16"):
        prog.axpy(x, x.astype(np.float16), x, 1.0, 16)
    with pytest.raises(fadsl.FadslError, match="has no kernel 'nope'"):
        prog["nope"]
    # an access outside the array: refused, located at the load
    with pytest.raises(fadsl.FadslError, match=r"kernels.fa:\d+:\d+: error: .*out of bounds") as e:
        prog.softmax_rows(x, x, 1, 20, BLOCK=32)
    assert e.value.status == "PROGRAM"
    # a matrix smaller than its declared extent: refused before running
    with pytest.raises(fadsl.FadslInvalidArgument, match="buffer 'c' is too small"):
        prog.matmul(np.zeros((8, 8), np.float16), np.zeros((8, 8), np.float16), np.zeros((8, 4), np.float32), 8, 8, 8)
    bad = tmp_path / "bad.fa"
    bad.write_text("@kernel(grid=(1,))\ndef k(x: *f32):\n    store(x, y)\n")
    with pytest.raises(fadsl.FadslError, match="bad.fa:3:14: error: ") as e:
        fadsl.load(bad)
    assert e.value.status == "PROGRAM" and "^" in str(e.value)
    with pytest.raises(fadsl.FadslError, match="cannot read"):
        fadsl.load(tmp_path / "missing.fa")


def test_numpy_scalars_as_arguments(prog):
    x = np.ones(64, np.float32)
    out = np.zeros(64, np.float32)
    info = prog.axpy(x, x, out, np.float32(2.0), np.int64(64), BLOCK=np.int64(64))
    assert (out == 3).all() and info.constexprs == "T=f32 BLOCK=64"
