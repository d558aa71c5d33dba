"""fadsl.attention on a CUDA GPU through torch: forward and backward against
float64 math SDPA (causal, grouped-query, odd lengths, f16 and bf16), the LSE,
non-contiguous inputs, streams, torch.compile(fullgraph=True) of a small
model, CUDA-graph capture, fadsl.load kernels on CUDA tensors, and the
Python-side overhead at small shapes next to SDPA's.  Each test reports
itself skipped where torch or a CUDA device is missing.
Measured numbers go to $FADSL_GPU_REPORT (a JSON-lines file) when it is set."""
import json
import math
import os
import time

import pytest

from conftest import HAVE_TORCH

if HAVE_TORCH:
    import torch
    import torch.nn.functional as F

HAVE_GPU = HAVE_TORCH and torch.cuda.is_available()
pytestmark = pytest.mark.skipif(not HAVE_GPU, reason="needs torch with a CUDA device")

import fadsl


def report(**record):
    path = os.environ.get("FADSL_GPU_REPORT")
    print(json.dumps(record))
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


def rel(x, ref):
    x = x.double()
    assert not torch.isnan(x).any()
    return ((x - ref).norm() / ref.norm()).item()


def sdpa64(q, k, v, causal, scale=None):
    """float64 math SDPA (k, v repeated for grouped-query attention)."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


CASES = [  # B, H, KVH, Nq, Nkv, D, causal
    (2, 8, 2, 1000, 1000, 64, True),
    (1, 6, 2, 777, 1234, 128, False),
    (1, 4, 4, 77, 77, 16, True),
    (1, 4, 1, 200, 333, 32, False),
    (1, 2, 2, 513, 513, 256, True),
    (1, 12, 12, 4096, 4096, 64, True),
    (1, 8, 1, 300, 300, 128, True),  # 8 query heads a group: the fused pass a program per query head
]


@pytest.mark.parametrize("deterministic", [False, True], ids=["fused", "deterministic"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}H{}KV{}q{}k{}D{}{}".format(*c[:6], "c" if c[6] else ""))
def test_forward_backward_vs_float64_sdpa(case, dtype, deterministic):
    B, H, KVH, Nq, Nkv, D, causal = case
    dt = getattr(torch, dtype)
    torch.manual_seed(Nq + D)
    q = torch.randn(B, H, Nq, D, device="cuda", dtype=dt, requires_grad=True)
    k = torch.randn(B, KVH, Nkv, D, device="cuda", dtype=dt, requires_grad=True)
    v = torch.randn(B, KVH, Nkv, D, device="cuda", dtype=dt, requires_grad=True)
    do = torch.randn(B, H, Nq, D, device="cuda", dtype=dt)
    o, lse = fadsl.attention(q, k, v, causal=causal, return_lse=True, deterministic=deterministic)
    o.backward(do)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    ref = sdpa64(q64, k64, v64, causal)
    ref.backward(do.double())
    s = (q64 @ k64.repeat_interleave(H // KVH, 1).transpose(-1, -2)) / math.sqrt(D)
    if causal:
        s = s.masked_fill(torch.ones(Nq, Nkv, device="cuda", dtype=torch.bool).triu(1), -math.inf)
    ref_lse = torch.logsumexp(s, -1)
    errs = {"o": rel(o, ref), "lse": rel(lse, ref_lse), "dq": rel(q.grad, q64.grad), "dk": rel(k.grad, k64.grad),
            "dv": rel(v.grad, v64.grad)}
    report(test="accuracy", case=case, dtype=dtype, deterministic=deterministic, **errs)
    bo, bg = (2e-3, 1e-2) if dtype == "float16" else (1e-2, 3e-2)
    assert errs["o"] < bo and errs["lse"] < 1e-4
    assert errs["dq"] < bg and errs["dk"] < bg and errs["dv"] < bg


@pytest.mark.parametrize("case", [(2, 8, 2, 1000, 1000, 64, True), (1, 4, 1, 777, 1234, 128, False),
                                  (1, 2, 2, 513, 513, 256, True)],
                         ids=lambda c: "B{}H{}KV{}q{}k{}D{}{}".format(*c[:6], "c" if c[6] else ""))
def test_deterministic_backward_is_bitwise_reproducible(case):
    """deterministic=True: two runs give the same gradients to the bit; the
    fused pass (the default) agrees with it to rounding."""
    B, H, KVH, Nq, Nkv, D, causal = case
    torch.manual_seed(7)
    q = torch.randn(B, H, Nq, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, KVH, Nkv, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(B, KVH, Nkv, D, device="cuda", dtype=torch.bfloat16)
    do = torch.randn(B, H, Nq, D, device="cuda", dtype=torch.bfloat16)

    def grads(deterministic):
        x = [t.clone().requires_grad_() for t in (q, k, v)]
        fadsl.attention(*x, causal=causal, deterministic=deterministic).backward(do)
        return [t.grad for t in x]
    a, b = grads(True), grads(True)
    same = all(torch.equal(x, y) for x, y in zip(a, b))
    fused = grads(False)
    errs = [rel(f, d.double()) for f, d in zip(fused, a)]
    report(test="deterministic", case=case, bitwise_same=same, fused_vs_deterministic=errs)
    assert same
    assert all(e < 3e-2 for e in errs)


def test_default_backward_follows_torchs_switch():
    """On CUDA tensors deterministic=None is the fused pass up to D=128
    beyond 1024 keys, unless torch.use_deterministic_algorithms(True) is in
    force: then the deterministic one, whose gradients repeat to the bit (at
    D=256 always, and up to 1024 keys at D <= 64 or causal)."""
    from fadsl._attention import resolve_deterministic
    torch.manual_seed(8)
    q, k, v = (torch.randn(1, 4, 1100, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    do = torch.randn_like(q)
    before = torch.are_deterministic_algorithms_enabled()

    def grads():
        x = [t.clone().requires_grad_() for t in (q, k, v)]
        fadsl.attention(*x, causal=True).backward(do)
        return [t.grad for t in x]
    try:
        torch.use_deterministic_algorithms(False)
        assert resolve_deterministic(None, q, k, True) is False
        assert resolve_deterministic(True, q, k, True) is True
        # up to 1024 keys at D <= 64 the deterministic pass is the faster
        short = torch.empty(1, 1, 700, 64, device="cuda", dtype=torch.float16)
        assert resolve_deterministic(None, short, short, False) is True
        assert resolve_deterministic(False, short, short, False) is False
        # at D=256 the deterministic pass is the faster, and None takes it
        q256 = torch.empty(1, 1, 16, 256, device="cuda", dtype=torch.float16)
        assert resolve_deterministic(None, q256) is True
        assert resolve_deterministic(False, q256) is False
        fused = grads()
        torch.use_deterministic_algorithms(True, warn_only=True)
        assert resolve_deterministic(None, q, k, True) is True
        assert resolve_deterministic(False, q, k, True) is False
        a, b = grads(), grads()
    finally:
        torch.use_deterministic_algorithms(before)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    # the passes agree to rounding; dK and dV have no atomics in either
    assert all(rel(f, d.double()) < 1e-2 for f, d in zip(fused, a))


def test_non_contiguous_and_streams():
    x = torch.randn(2, 300, 3 * 8 * 64, device="cuda", dtype=torch.float16)
    q, k, v = (t.view(2, 300, 8, 64).transpose(1, 2) for t in x.split(8 * 64, -1))
    assert not q.is_contiguous()
    ref = fadsl.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = fadsl.attention(q, k, v, causal=True)
    s.synchronize()
    assert torch.equal(out, ref)


def test_errors_on_the_gpu():
    q = torch.randn(1, 4, 64, 64, device="cuda", dtype=torch.float16)
    with pytest.raises(fadsl.FadslInvalidArgument, match="one device"):
        fadsl.attention(q, q.cpu(), q.cpu())
    with pytest.raises(fadsl.FadslInvalidArgument, match="float16 or bfloat16"):
        fadsl.attention(q.float(), q.float(), q.float())
    kv = torch.randn(1, 3, 64, 64, device="cuda", dtype=torch.float16)
    with pytest.raises(fadsl.FadslInvalidArgument, match="H=4 query heads are not a multiple of KVH=3"):
        fadsl.attention(q, kv, kv)


class TinyModel(torch.nn.Module if HAVE_TORCH else object):
    def __init__(self, d=128, heads=4):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.qkv, self.out = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)

    def forward(self, x):
        B, N, _ = x.shape
        q, k, v = (t.view(B, N, self.h, self.dh).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
        a = fadsl.attention(q, k, v, causal=True)
        return x + self.out(a.transpose(1, 2).reshape(B, N, -1))


def test_compile_fullgraph_inductor():
    torch.manual_seed(0)
    model = TinyModel().cuda().half()
    x = torch.randn(2, 256, 128, device="cuda", dtype=torch.float16, requires_grad=True)
    eager = model(x)
    eager.float().sum().backward()
    g = x.grad.clone()
    x.grad = None
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)
    out = compiled(x)
    out.float().sum().backward()
    assert (out - eager).abs().max().item() < 1e-2
    assert (x.grad - g).abs().max().item() < 5e-2


def test_cuda_graph_capture():
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 8, 512, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn_like(q)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):     # warm-up: compiles and loads the kernels before capture
        for _ in range(2):
            fadsl.attention(q, k, v, causal=True).backward(do)
    torch.cuda.current_stream().wait_stream(s)
    for t in (q, k, v):
        t.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fadsl.attention(q, k, v, causal=True)
        out.backward(do)
    with torch.no_grad():
        for t in (q, k, v):
            t.copy_(torch.randn_like(t))
    graph.replay()
    torch.cuda.synchronize()
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    ref = fadsl.attention(q2, k2, v2, causal=True)
    ref.backward(do)
    assert torch.equal(out, ref)
    # the default backward is the fused pass: dK and dV repeat to the bit, dQ
    # (added with atomics) to rounding
    assert torch.equal(k.grad, k2.grad) and torch.equal(v.grad, v2.grad)
    assert rel(q.grad, q2.grad.double()) < 1e-2


def test_kernel_from_python_on_cuda(tmp_path):
    path = tmp_path / "axpy.fa"
    path.write_text("@kernel(grid=(cdiv(n, BLOCK),))\n"
                    "@autotune(BLOCK=[256, 1024], warps=[4, 8], key=(n,))\n"
                    "def axpy(x: *T, y: *T, a: f32, n: i32, T: constexpr, BLOCK: constexpr):\n"
                    "    i = program_id(0) * BLOCK + arange(0, BLOCK)\n"
                    "    m = i < n\n"
                    "    store(y + i, (a * load(x + i, mask=m).to(f32) + load(y + i, mask=m).to(f32)).to(T), mask=m)\n")
    prog = fadsl.load(path)
    x = torch.randn(100_003, device="cuda")
    y = torch.randn_like(x)
    want = 2 * x + y
    info = prog.axpy(x, y, 2.0, x.numel())
    torch.cuda.synchronize()
    assert torch.allclose(y, want)
    assert info.device == "cuda:0" and info.config_source in ("default", "tuned", "nearest")
    # the named launch settings come back by name (a plain store: cp.async or bulk copies alike)
    assert info.pipeline in ("cp_async", "tma", "tma_async", "tma_ws", "tma_ws_pp")
    assert info.schedule in ("grid", "persistent")
    report(test="kernel", info=str(info))
    # a given grid (Triton's kernel[grid](...)): 4 programs of 256 update the first 1024 elements only
    before = y.clone()
    info = prog.axpy[(4,)](x, y, 2.0, x.numel(), BLOCK=256)
    torch.cuda.synchronize()
    assert info.grid == (4, 1, 1)
    assert torch.allclose(y[:1024], 2 * x[:1024] + before[:1024]) and torch.equal(y[1024:], before[1024:])


def _time(fn, iters=200):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / iters * 1e6


@pytest.mark.parametrize("N", [64, 256, 1024])
def test_overhead_at_small_shapes(N):
    """Wall time per call (host-bound at these sizes) next to SDPA's, for the
    forward pass and for forward and backward through autograd, and the same
    through the custom ops (the path torch.compile takes); the assertion only
    guards against a regression of more than 10x."""
    q, k, v = (torch.randn(1, 8, N, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    ours = _time(lambda: fadsl.attention(q, k, v, causal=True))
    op = _time(lambda: torch.ops.fadsl.attention_fwd(q, k, v, True, 0.125, True))
    sdpa = _time(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    do = torch.randn_like(q)
    ours_train = _time(lambda: fadsl.attention(qg, kg, vg, causal=True).backward(do), 100)
    sdpa_train = _time(lambda: F.scaled_dot_product_attention(qg, kg, vg, is_causal=True).backward(do), 100)
    report(test="overhead", N=N, fadsl_us=round(ours, 1), fadsl_op_us=round(op, 1), sdpa_us=round(sdpa, 1),
           fadsl_fwd_bwd_us=round(ours_train, 1), sdpa_fwd_bwd_us=round(sdpa_train, 1))
    assert ours < 10 * sdpa + 200
    assert ours_train < 10 * sdpa_train + 500


def test_eager_path_equals_the_ops():
    """Plain CUDA tensors bypass the dispatcher (an autograd.Function calling
    what the ops call): outputs, LSE and gradients equal the ops' to the bit,
    and a double backward is refused rather than silently wrong."""
    from fadsl import _torch_ops
    torch.manual_seed(3)
    q, k, v = (torch.randn(1, 4, 300, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    do, w = torch.randn_like(q), torch.randn(1, 4, 300, device="cuda")
    assert _torch_ops._eager(q, k, v)

    def run(eager):
        x = [t.clone().requires_grad_() for t in (q, k, v)]
        if eager:
            o, lse2 = _torch_ops._Attention.apply(*x, True, 0.125, True)
        else:
            o, lse2 = torch.ops.fadsl.attention_fwd(*x, True, 0.125, True)
        torch.autograd.backward([o, lse2], [do, w])
        return [o, lse2] + [t.grad for t in x]
    for a, b in zip(run(True), run(False)):
        assert torch.equal(a, b)
    x = [t.clone().requires_grad_() for t in (q, k, v)]
    g = torch.autograd.grad(fadsl.attention(*x, causal=True).float().sum(), x[0], create_graph=True)[0]
    with pytest.raises(RuntimeError):
        g.float().sum().backward()


def test_modes_and_subclasses_take_the_ops():
    """Under a dispatch mode the call is the custom op, so that the mode sees
    it (as profilers and FLOP counters expect)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))
    q = torch.randn(1, 2, 64, 32, device="cuda", dtype=torch.float16)
    with Record():
        out = fadsl.attention(q, q, q, causal=True)
    assert any("fadsl.attention_fwd" in f for f in seen), seen
    assert torch.equal(out, fadsl.attention(q, q, q, causal=True))


def test_gradient_through_the_lse_on_the_gpu():
    torch.manual_seed(2)
    q, k, v = (torch.randn(1, 4, 300, 64, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
    o, lse = fadsl.attention(q, k, v, causal=True, return_lse=True)
    w = torch.randn_like(lse)
    (o.float().sum() + (lse * w).sum()).backward()
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    s = (q64 @ k64.transpose(-1, -2)) / 8.0
    s = s.masked_fill(torch.ones(300, 300, device="cuda", dtype=torch.bool).triu(1), -math.inf)
    (torch.softmax(s, -1) @ v64).sum().add((torch.logsumexp(s, -1) * w.double()).sum()).backward()
    errs = [rel(a.grad, b.grad) for a, b in ((q, q64), (k, k64), (v, v64))]
    report(test="lse_gradient", dq=errs[0], dk=errs[1], dv=errs[2])
    assert max(errs) < 1e-2


def test_memory_is_linear_in_the_sequence():
    """Forward and backward at N = 16384 allocate little beyond the tensors
    themselves (the N x N scores would be 4 GiB in f16 for these 8 heads)."""
    N = 16384
    q, k, v = (torch.randn(1, 8, N, 64, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
    do = torch.randn_like(q)
    fadsl.attention(q, k, v, causal=True).backward(do)     # compile and load first
    for t in (q, k, v):
        t.grad = None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fadsl.attention(q, k, v, causal=True).backward(do)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    tensor = q.numel() * q.element_size()
    report(test="memory", N=N, extra_bytes=extra, one_tensor_bytes=tensor)
    assert extra < 12 * tensor    # o, dq, dk, dv, lse, delta and copies: O(N), not O(N^2)
