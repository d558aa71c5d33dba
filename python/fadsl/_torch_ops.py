"""fadsl's attention as PyTorch custom operators (torch.library.custom_op):

    fadsl::attention_fwd(q, k, v, causal, scale, deterministic) -> (o, lse2)
    fadsl::attention_bwd(do, q, k, v, o, lse2, dlse2?, causal, scale, deterministic) -> (dq, dk, dv)

each with a fake (meta) implementation, so that torch.compile traces models
that call them (fullgraph=True included) and CUDA graphs capture them, and the
forward's autograd formula is the backward op.  lse2 is the base-2
log-sum-exp the kernels produce and read; fadsl.attention returns lse2 * ln 2.
deterministic is an input of the forward op only so that autograd hands it
to the backward op: the fused backward pass (its float32 dQ accumulator from
torch.empty) unless it is set.

On CUDA tensors the kernels run on torch's current stream of the tensors'
device; outputs and the backward pass's delta workspace come from torch's
caching allocator (torch.empty), so a call allocates no device memory of its
own.  Non-contiguous inputs are copied to contiguous ones first (.contiguous():
one read and one write of each such tensor; a [B, N, H, D] projection viewed
as [B, H, N, D] with .transpose(1, 2) is one).  On CPU tensors the same
kernels run on the interpreter.
"""
import ctypes
import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _attention
from ._lib import FadslInvalidArgument, attention_options, attn, context

LN2 = math.log(2.0)

if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
    raise ImportError(f"fadsl's torch support needs torch >= 2.4 (torch.library.custom_op); this is {torch.__version__}")


_TORCH_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16"}


def _dims(q, k, v, causal, scale, fn="fadsl.attention"):
    if q.dim() == 4 and k.dim() == 4 and q.dtype is k.dtype is v.dtype and q.dtype in _TORCH_DTYPES and \
            q.shape[0] == k.shape[0] and q.shape[3] == k.shape[3] and k.shape == v.shape and \
            q.device == k.device == v.device and (q.is_cuda or q.device.type in ("cpu", "meta")):
        # the common case, checked without building messages (a tenth of a small call's host time)
        B, H, Nq, D = q.shape
        return B, H, k.shape[1], Nq, k.shape[2], D, _TORCH_DTYPES[q.dtype]
    B, H, KVH, Nq, Nkv, D, dtype = _attention.shapes(q, k, v, fn)
    devices = {x.device for x in (q, k, v)}
    if len(devices) != 1:
        raise FadslInvalidArgument(f"{fn}: q, k and v must be on one device; got {', '.join(map(str, devices))}")
    dev = q.device
    if dev.type not in ("cuda", "cpu", "meta"):
        raise FadslInvalidArgument(f"{fn}: fadsl runs on CUDA devices and on the CPU interpreter, not on {dev}")
    return B, H, KVH, Nq, Nkv, D, dtype


def _concrete(*dims):
    return all(isinstance(d, int) for d in dims)


def _check(q, k, v, causal, scale, fn="fadsl.attention"):
    B, H, KVH, Nq, Nkv, D, dtype = _dims(q, k, v, causal, scale, fn)
    if _concrete(B, H, KVH, Nq, Nkv, D) and B * H * Nq > 0:
        _attention.check_shape(B, H, KVH, Nq, Nkv, D, causal, scale, dtype)
    return B, H, KVH, Nq, Nkv, D, dtype


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(dev):
    """torch's current stream on device dev, as the library takes it."""
    if _raw_stream is not None:     # the handle alone, without a Stream object (8 us -> 1 us a call)
        return ctypes.c_void_p(_raw_stream(dev.index if dev.index is not None else torch.cuda.current_device()))
    return ctypes.c_void_p(torch.cuda.current_stream(dev).cuda_stream)


def _forward(q, k, v, causal, scale):
    """The forward pass's work: what the op runs, and the eager path (_Attention)."""
    B, H, KVH, Nq, Nkv, D, dtype = _dims(q, k, v, causal, scale)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    lse2 = q.new_empty((B, H, Nq), dtype=torch.float32)
    if o.numel() == 0:
        return o, lse2
    args = (B, H, KVH, Nq, Nkv, D, int(causal), float(scale), _attention.DTYPES[dtype])
    if q.is_cuda:
        ctx = context(q.device.index)
        st = attn.fadsl_attention_forward(ctx.attention(), q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                                          lse2.data_ptr(), *args, _stream(q.device))
    else:
        ctx = context(-1)
        st = attn.fadsl_attention_forward_host(ctx.attention(), _p(q), _p(k), _p(v), _p(o), _p(lse2), *args,
                                               _attention.interpreter_threads())
    ctx.attention_check(st)
    return o, lse2


@torch.library.custom_op("fadsl::attention_fwd", mutates_args=())
def attention_fwd(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float,
                  deterministic: bool) -> Tuple[Tensor, Tensor]:
    return _forward(q, k, v, causal, scale)


@attention_fwd.register_fake
def _attention_fwd_fake(q, k, v, causal, scale, deterministic):
    B, H, KVH, Nq, Nkv, D, dtype = _check(q, k, v, causal, scale)
    return q.new_empty(q.shape), q.new_empty((B, H, Nq), dtype=torch.float32)


def _backward_pass(do, q, k, v, o, lse2, dlse2, causal, scale, deterministic):
    """The backward pass's work: what the op runs, and the eager path."""
    B, H, KVH, Nq, Nkv, D, dtype = _dims(q, k, v, causal, scale, "fadsl.attention_backward")
    q, k, v, o, do = (x.contiguous() for x in (q, k, v, o, do))
    lse2 = lse2.contiguous()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if dq.numel() == 0:
        return dq, dk, dv
    args = (B, H, KVH, Nq, Nkv, D, int(causal), float(scale), _attention.DTYPES[dtype])
    if dlse2 is None:
        delta = q.new_empty((B, H, Nq), dtype=torch.float32)
    else:
        # rowsum(dO * O) - dLoss/dlse_nat, with dLoss/dlse_nat = dlse2 / ln 2
        delta = ((o.float() * do.float()).sum(-1) - dlse2.float() / LN2).contiguous()
    ex_args = (B, H, KVH, Nq, Nkv, D, float(scale), _attention.DTYPES[dtype])
    if q.is_cuda:
        ctx = context(q.device.index)
        h, s = ctx.attention(), _stream(q.device)
        if dlse2 is None:
            # the fused pass's float32 dQ accumulator, from torch's allocator
            acc = None if deterministic else torch.empty((B, H, Nq, D), dtype=torch.float32, device=q.device)
            # and, where the library prefers a program per query head (groups
            # of 4 query heads or more), dK's and dV's float32 accumulators
            dkv = None
            if acc is not None and attn.fadsl_attention_heads_preferred(H, KVH):
                dkv = torch.empty((2, B, KVH, Nkv, D), dtype=torch.float32, device=q.device)
            opts = attention_options(causal, deterministic, 0 if acc is None else acc.data_ptr(),
                                     0 if dkv is None else dkv.data_ptr())
            st = attn.fadsl_attention_backward_ex(h, ctypes.byref(opts), q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                                  o.data_ptr(), lse2.data_ptr(), do.data_ptr(), dq.data_ptr(),
                                                  dk.data_ptr(), dv.data_ptr(), delta.data_ptr(), *ex_args, s)
        else:
            st = attn.fadsl_attention_backward_delta(h, q.data_ptr(), k.data_ptr(), v.data_ptr(), lse2.data_ptr(),
                                                     do.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
                                                     delta.data_ptr(), *args, s)
    else:
        ctx = context(-1)
        h, threads = ctx.attention(), _attention.interpreter_threads()
        if dlse2 is None:
            opts = attention_options(causal, deterministic)
            st = attn.fadsl_attention_backward_host_ex(h, ctypes.byref(opts), _p(q), _p(k), _p(v), _p(o), _p(lse2),
                                                       _p(do), _p(dq), _p(dk), _p(dv), _p(delta), *ex_args, threads)
        else:
            st = attn.fadsl_attention_backward_delta_host(h, _p(q), _p(k), _p(v), _p(lse2), _p(do), _p(dq), _p(dk),
                                                          _p(dv), _p(delta), *args, threads)
    ctx.attention_check(st)
    return dq, dk, dv


@torch.library.custom_op("fadsl::attention_bwd", mutates_args=())
def attention_bwd(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse2: Tensor, dlse2: Optional[Tensor],
                  causal: bool, scale: float, deterministic: bool) -> Tuple[Tensor, Tensor, Tensor]:
    return _backward_pass(do, q, k, v, o, lse2, dlse2, causal, scale, deterministic)


@attention_bwd.register_fake
def _attention_bwd_fake(do, q, k, v, o, lse2, dlse2, causal, scale, deterministic):
    _check(q, k, v, causal, scale, "fadsl.attention_backward")
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale, deterministic = inputs
    o, lse2 = output
    ctx.save_for_backward(q, k, v, o, lse2)
    ctx.causal = causal
    ctx.scale = scale
    ctx.deterministic = deterministic
    ctx.set_materialize_grads(False)   # an unused lse has no gradient: skip the delta path


def _gradients(ctx, do, dlse2, backward_pass):
    """The inputs' gradients from the saved tensors, through backward_pass
    (the op, or on the eager path the function it runs)."""
    q, k, v, o, lse2 = ctx.saved_tensors
    if do is None:
        do = torch.zeros_like(o)
    dq, dk, dv = backward_pass(do, q, k, v, o, lse2, dlse2, ctx.causal, ctx.scale, ctx.deterministic)
    return dq, dk, dv, None, None, None


def _backward(ctx, do, dlse2):
    return _gradients(ctx, do, dlse2, torch.ops.fadsl.attention_bwd)


attention_fwd.register_autograd(_backward, setup_context=_setup_context)


# ---- the eager path ------------------------------------------------------------
#
# Through torch's dispatcher a custom op call costs 30 to 45 us of host time
# more than the same work called directly (on an H200 machine, B1 H8 N256
# D64: fadsl::attention_fwd 81 to 101 us a call, the direct path 52 to 56,
# SDPA 28 to 31).  Plain CUDA tensors outside tracing need none of what the
# dispatcher adds, so they take the same work through an autograd.Function
# (or, needing no gradient, no autograd node at all); everything else
# (compile, export, FX, fake and other tensor subclasses, vmap, dispatch and
# function modes, CPU tensors) goes through the ops.

def _is_compiling():
    f = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(f()) if f is not None else False


try:
    from torch.utils._python_dispatch import _get_current_dispatch_mode
except ImportError:     # no dispatch modes in this torch
    def _get_current_dispatch_mode():
        return None
_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", None)


def _modes_active():
    return bool(torch._C._is_torch_function_mode_enabled() or _get_current_dispatch_mode() is not None or
                (_functorch_active is not None and _functorch_active()))


def _eager(*tensors):
    """Whether the call may bypass the dispatcher: plain CUDA tensors, no
    tracing, no modes."""
    for t in tensors:
        if t is not None and (type(t) is not torch.Tensor or not t.is_cuda):
            return False
    return not _is_compiling() and not _modes_active()


class _Attention(torch.autograd.Function):
    """fadsl::attention_fwd with its autograd formula, without the dispatcher."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, deterministic):
        o, lse2 = _forward(q, k, v, causal, scale)
        _setup_context(ctx, (q, k, v, causal, scale, deterministic), (o, lse2))
        return o, lse2

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, do, dlse2):
        return _gradients(ctx, do, dlse2, _backward_pass)


def _resolved_scale(q, scale):
    return float(scale) if scale is not None else 1.0 / math.sqrt(q.shape[-1])


def attention(q, k, v, causal=False, scale=None, return_lse=False, deterministic=False):
    args = (q, k, v, bool(causal), _resolved_scale(q, scale), bool(deterministic))
    if _eager(q, k, v):
        if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
            o, lse2 = _Attention.apply(*args)
        else:   # nothing to differentiate: no autograd node (20 us a call)
            o, lse2 = _forward(*args[:5])
    else:
        o, lse2 = torch.ops.fadsl.attention_fwd(*args)
    if return_lse:
        return o, lse2 * LN2
    return o


def attention_backward(do, q, k, v, o, lse, causal=False, scale=None, dlse=None, deterministic=False):
    lse2 = lse.float() / LN2
    dlse2 = None if dlse is None else dlse.float() * LN2
    args = (do, q, k, v, o, lse2, dlse2, bool(causal), _resolved_scale(q, scale), bool(deterministic))
    if _eager(do, q, k, v, o, lse):
        with torch.no_grad():
            return _backward_pass(*args)
    return torch.ops.fadsl.attention_bwd(*args)
