"""fadsl.attention on torch CPU tensors (the interpreter): the custom ops'
registration (torch.library.opcheck: schema, fake implementation, autograd
formula), autograd against float64, and torch.compile(fullgraph=True)
tracing a model that calls it.  Skipped where torch is not installed."""
import math

import numpy as np
import pytest

from conftest import HAVE_TORCH, ref_attention, ref_grads, rel_err

pytestmark = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")

if HAVE_TORCH:
    import torch

import fadsl


def _inputs(B=1, H=4, KVH=2, Nq=33, Nkv=33, D=32, dtype=None, seed=0, grad=True):
    g = torch.Generator().manual_seed(seed)
    dtype = dtype or torch.float16
    q = torch.randn(B, H, Nq, D, generator=g).to(dtype)
    k = torch.randn(B, KVH, Nkv, D, generator=g).to(dtype)
    v = torch.randn(B, KVH, Nkv, D, generator=g).to(dtype)
    return [x.requires_grad_(grad) for x in (q, k, v)]


def _np(t):
    return t.detach().float().numpy()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_backward_vs_float64(dtype, causal):
    dt = getattr(torch, dtype)
    q, k, v = _inputs(Nq=45, Nkv=45, dtype=dt)
    o, lse = fadsl.attention(q, k, v, causal=causal, return_lse=True)
    ref, ref_lse = ref_attention(_np(q), _np(k), _np(v), causal)
    bo, bg = (2e-3, 1e-2) if dtype == "float16" else (1e-2, 3e-2)
    assert o.dtype == dt and rel_err(_np(o), ref) < bo and rel_err(_np(lse), ref_lse) < 1e-5
    do = torch.randn_like(o)
    o.backward(do)
    rq, rk, rv = ref_grads(_np(q), _np(k), _np(v), _np(do), causal)
    assert rel_err(_np(q.grad), rq) < bg and rel_err(_np(k.grad), rk) < bg and rel_err(_np(v.grad), rv) < bg


def test_gradient_through_the_lse():
    q, k, v = _inputs(Nq=20, Nkv=30)
    o, lse = fadsl.attention(q, k, v, return_lse=True)
    w = torch.randn(lse.shape)
    (o.float().sum() + (lse * w).sum()).backward()
    rq, rk, rv = ref_grads(_np(q), _np(k), _np(v), np.ones(o.shape), False, dlse=w.numpy())
    assert rel_err(_np(q.grad), rq) < 1e-2 and rel_err(_np(k.grad), rk) < 1e-2 and rel_err(_np(v.grad), rv) < 1e-2


def test_unused_lse_takes_the_plain_backward():
    q, k, v = _inputs()
    o = fadsl.attention(q, k, v)
    o.float().square().sum().backward()
    rq, _, _ = ref_grads(_np(q), _np(k), _np(v), 2 * _np(o), False)
    assert rel_err(_np(q.grad), rq) < 1e-2


def test_non_contiguous_inputs():
    x = torch.randn(1, 40, 2, 32).half()          # [B, N, H, D] as a projection leaves it
    q = x.transpose(1, 2)
    assert not q.is_contiguous()
    o = fadsl.attention(q, q, q, causal=True)
    assert torch.equal(o, fadsl.attention(q.contiguous(), q.contiguous(), q.contiguous(), causal=True))


def test_opcheck_custom_ops():
    q, k, v = _inputs(H=2, KVH=1, Nq=17, Nkv=17, D=16)
    for det in (False, True):
        torch.library.opcheck(torch.ops.fadsl.attention_fwd.default, (q, k, v, True, 0.25, det))
        o, lse2 = torch.ops.fadsl.attention_fwd(q.detach(), k.detach(), v.detach(), True, 0.25, det)
        do = torch.randn_like(o)
        torch.library.opcheck(torch.ops.fadsl.attention_bwd.default, (do, q.detach(), k.detach(), v.detach(), o,
                                                                       lse2, None, True, 0.25, det))


@pytest.mark.parametrize("deterministic", [False, True, None])
def test_deterministic_backward(deterministic, monkeypatch):
    """Both backward passes against float64; the deterministic one the same to
    the bit on 1 and 3 interpreter threads."""
    def grads(threads):
        monkeypatch.setenv("FADSL_THREADS", str(threads))
        q, k, v = _inputs(H=4, KVH=2, Nq=70, Nkv=45, D=32, seed=5)
        o = fadsl.attention(q, k, v, deterministic=deterministic)
        o.backward(torch.ones_like(o))
        return q, k, v, o
    q, k, v, o = grads(1)
    rq, rk, rv = ref_grads(_np(q), _np(k), _np(v), np.ones(o.shape), False)
    assert rel_err(_np(q.grad), rq) < 1e-2 and rel_err(_np(k.grad), rk) < 1e-2 and rel_err(_np(v.grad), rv) < 1e-2
    if deterministic:
        q3, k3, v3, _ = grads(3)
        assert torch.equal(q.grad, q3.grad) and torch.equal(k.grad, k3.grad) and torch.equal(v.grad, v3.grad)


def test_deterministic_by_default():
    """On CPU tensors None is the deterministic pass, whatever torch's own
    switch says (CUDA tensors: tests/test_gpu.py); False asks for the fused
    one."""
    from fadsl._attention import resolve_deterministic
    q, _, _ = _inputs(grad=False)
    before = torch.are_deterministic_algorithms_enabled()
    try:
        for switch in (True, False):
            torch.use_deterministic_algorithms(switch)
            assert resolve_deterministic(None, q) is True
            assert resolve_deterministic(False, q) is False
            assert resolve_deterministic(True, q) is True
    finally:
        torch.use_deterministic_algorithms(before)


def test_fake_tensors_and_shape_errors():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q = torch.empty(2, 8, 100, 64, dtype=torch.float16)
        kv = torch.empty(2, 2, 100, 64, dtype=torch.float16)
        o, lse = fadsl.attention(q, kv, kv, causal=True, return_lse=True)
        assert o.shape == q.shape and lse.shape == (2, 8, 100) and lse.dtype == torch.float32
        with pytest.raises(fadsl.FadslInvalidArgument, match="H=8 query heads are not a multiple of KVH=3"):
            bad = torch.empty(2, 3, 100, 64, dtype=torch.float16)
            fadsl.attention(q, bad, bad)
    with pytest.raises(fadsl.FadslInvalidArgument, match="float16 or bfloat16; got torch.float32"):
        fadsl.attention(*(x.float() for x in _inputs(grad=False)))


class Block(torch.nn.Module if HAVE_TORCH else object):
    """A pre-norm causal attention block whose attention is one fadsl call."""

    def __init__(self, d_model=64, heads=4, kv_heads=2):
        super().__init__()
        self.h, self.kvh, self.dh = heads, kv_heads, d_model // heads
        self.norm = torch.nn.LayerNorm(d_model)
        self.qkv = torch.nn.Linear(d_model, (heads + 2 * kv_heads) * self.dh)
        self.out = torch.nn.Linear(d_model, d_model)

    def forward(self, x):
        B, N, _ = x.shape
        q, k, v = self.qkv(self.norm(x)).split([self.h * self.dh, self.kvh * self.dh, self.kvh * self.dh], -1)
        q = q.view(B, N, self.h, self.dh).transpose(1, 2)
        k = k.view(B, N, self.kvh, self.dh).transpose(1, 2)
        v = v.view(B, N, self.kvh, self.dh).transpose(1, 2)
        a = fadsl.attention(q.half(), k.half(), v.half(), causal=True).float()
        return x + self.out(a.transpose(1, 2).reshape(B, N, -1))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph(backend):
    if backend == "inductor":
        import shutil
        if not (shutil.which("g++") or shutil.which("c++")):
            pytest.skip("inductor on the CPU needs a C++ compiler")
    torch.manual_seed(0)
    model = Block()
    x = torch.randn(2, 24, 64, requires_grad=True)
    eager = model(x)
    eager.sum().backward()
    g_eager = x.grad.clone()
    x.grad = None
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    out = compiled(x)
    out.sum().backward()
    assert torch.allclose(out, eager, atol=1e-3, rtol=1e-3)
    assert torch.allclose(x.grad, g_eager, atol=1e-3, rtol=1e-3)


def test_compile_records_the_op_in_the_graph():
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    torch._dynamo.reset()
    q, k, v = _inputs(grad=False)
    f = torch.compile(lambda q, k, v: fadsl.attention(q, k, v, causal=True) * 2, fullgraph=True, backend=backend)
    assert torch.equal(f(q, k, v), fadsl.attention(q, k, v, causal=True) * 2)
    assert any("fadsl.attention_fwd" in s for s in seen), seen


def test_kernel_on_cpu_tensors(tmp_path):
    path = tmp_path / "scale.fa"
    path.write_text("@kernel(grid=(cdiv(n, BLOCK),))\n"
                    "def scale(x: *T, n: i32, s: f32, T: constexpr, BLOCK: constexpr = 64):\n"
                    "    i = program_id(0) * BLOCK + arange(0, BLOCK)\n"
                    "    store(x + i, (load(x + i, mask=i < n).to(f32) * s).to(T), mask=i < n)\n")
    prog = fadsl.load(path)
    x = torch.arange(100, dtype=torch.bfloat16)
    prog.scale(x, 100, 0.5)
    assert torch.equal(x, (torch.arange(100) * 0.5).to(torch.bfloat16))
    view = torch.zeros(10, 20)[:, 3]            # a strided view: its own memory, in place
    prog.scale(view, 1, 2.0)
