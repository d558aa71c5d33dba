"""fadsl.load: a .fa program whose kernels are called like Triton's
@triton.jit functions.

    prog = fadsl.load("add.fa")
    prog.add(x, y, out, n)                 # grid from @kernel(grid=...)
    prog.add[(4,)](x, y, out, n, BLOCK=256)   # a given grid (Triton's kernel[grid])

Arguments fill the kernel's parameters in source order, then by name;
constexprs are keyword (or positional) arguments.  Arrays on a CUDA device
(torch tensors) launch the compiled kernel on torch's current stream, with the
configuration from the tuning database (or the default) unless warps=,
stages= or the @autotune constexprs are given; numpy arrays and torch CPU
tensors run it on the CPU interpreter, in place.  A dtype constexpr that
types a pointer (`x: *T`) and is not given is taken from the array, as Triton
takes a pointer's element type from the tensor.
"""
import ctypes
import numbers
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from . import _arrays
from ._lib import (ARG_BOOL, ARG_DTYPE, ARG_F32, ARG_F64, ARG_FLOAT, ARG_I32, ARG_I64, ARG_INT, ARG_PTR,
                   PARAM_CONSTEXPR, PARAM_POINTER, FadslBindingError, FadslError, FadslInvalidArgument,
                   HostRegion, InterpretInfo, InterpretOptions, KernelInfo, ParamInfo, Value, context, core,
                   error_for)

_SCALAR_KIND = {"i1": ARG_I32, "i8": ARG_I32, "i16": ARG_I32, "i32": ARG_I32, "u32": ARG_I32, "i64": ARG_I64,
                "f16": ARG_F32, "bf16": ARG_F32, "f32": ARG_F32, "f64": ARG_F64}


@dataclass
class LaunchInfo:
    """What a call ran: the constexprs and configuration, where they came
    from ("explicit", "tuned", "nearest", "default", "explicit+default"), and
    the grid; on the GPU also the architecture, the kernel-cache hit and the
    pipeline and schedule it was compiled with ("tma", "tma_ws_pp", ... on
    sm_90a, "cp_async" elsewhere; "grid" or "persistent")."""
    kernel: str
    constexprs: str
    warps: int
    stages: int
    config_source: str
    grid: Tuple[int, int, int]
    device: str                 # "interpreter" or "cuda:N"
    arch: Optional[str] = None
    cache: Optional[str] = None
    pipeline: Optional[str] = None
    schedule: Optional[str] = None


@dataclass
class Param:
    name: str
    kind: int
    dtype: Optional[str]
    dtype_param: Optional[str]
    has_default: bool
    tunable: bool


def _s(b):
    return b.decode() if b else None


class Program:
    """A loaded, checked .fa program.  Kernels are attributes (prog.name) and
    items (prog["name"]); `kernels` lists their names."""

    def __init__(self, text, name):
        self.name = name
        self._text = text.encode()
        self._loaded = {}           # device -> fadsl_program handle
        self._lock = threading.Lock()
        host = self._program(-1)    # parse and check now: errors surface at load
        n = core.fadsl_program_kernel_count(host)
        self.kernels = [core.fadsl_program_kernel_name(host, i).decode() for i in range(n)]
        self._kernels = {k: Kernel(self, k) for k in self.kernels}

    def _program(self, device):
        with self._lock:
            p = self._loaded.get(device)
            if p is None:
                ctx = context(device)
                p = ctypes.c_void_p()
                ctx.check(core.fadsl_program_load_string(ctx.handle, self.name.encode(), self._text, ctypes.byref(p)))
                self._loaded[device] = p
            return p

    def _kernel(self, device, name):
        k = ctypes.c_void_p()
        ctx = context(device)
        ctx.check(core.fadsl_program_kernel(self._program(device), name.encode(), ctypes.byref(k)))
        return k

    def __getitem__(self, name):
        try:
            return self._kernels[name]
        except KeyError:
            raise error_for(9, f"{self.name} has no kernel '{name}' (it has: {', '.join(self.kernels)})") from None

    def __getattr__(self, name):
        if name.startswith("_") or name in ("name", "kernels"):
            raise AttributeError(name)
        try:
            return self[name]
        except FadslError as e:
            raise AttributeError(str(e)) from None

    def __dir__(self):
        return list(super().__dir__()) + self.kernels

    def __del__(self):
        for p in getattr(self, "_loaded", {}).values():
            try:
                core.fadsl_program_destroy(p)
            except Exception:
                pass

    def __repr__(self):
        return f"<fadsl program {self.name}: {', '.join(self.kernels)}>"


def load(path):
    """Loads a .fa program from a file (parsed and checked now: a bad program
    raises FadslError with the compiler's located diagnostics)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise FadslError(f"{path}: cannot read: {e.strerror}", "IO") from None
    return Program(text, str(path))


def load_string(text, name="<string>"):
    """Loads a .fa program from source text."""
    return Program(text, name)


class Kernel:
    """One @kernel of a program, callable on arrays: kernel(*args, **kw), or
    kernel[grid](*args, **kw) with a grid of 1 to 3 dimensions instead of the
    kernel's @kernel(grid=...), on the GPU and the interpreter.  Keywords besides
    the parameters: warps, stages (num_warps / num_stages too), grid, threads
    (interpreter threads; default 1, since programs that store to the same
    element would race)."""

    def __init__(self, program, name):
        self.program = program
        self.name = name
        host = program._kernel(-1, name)
        self.params = []
        for i in range(core.fadsl_kernel_param_count(host)):
            pi = ParamInfo()
            core.fadsl_kernel_param_info(host, i, ctypes.byref(pi))
            self.params.append(Param(_s(pi.name), pi.kind, _s(pi.dtype), _s(pi.dtype_param), bool(pi.has_default),
                                     bool(pi.tunable)))
        self._index = {p.name: i for i, p in enumerate(self.params)}

    def __repr__(self):
        return f"<fadsl kernel {self.name}({', '.join(p.name for p in self.params)})>"

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            return self(*args, grid=grid, **kwargs)
        return launch

    # ---- turning Python values into fadsl_values -------------------------------

    def _collect(self, args, kwargs):
        if len(args) > len(self.params):
            raise FadslBindingError(f"kernel '{self.name}' takes {len(self.params)} arguments; got {len(args)}",
                                    "BINDING")
        values = {self.params[i].name: a for i, a in enumerate(args)}
        for name, a in kwargs.items():
            if name not in self._index:
                raise FadslBindingError(
                    f"kernel '{self.name}' has no parameter '{name}' (its parameters: "
                    f"{', '.join(p.name for p in self.params)})", "BINDING")
            if name in values:
                raise FadslBindingError(f"argument '{name}' of kernel '{self.name}' is given twice", "BINDING")
            values[name] = a
        return values

    def _dtype_constexprs(self, values):
        """Fills dtype constexprs that type a pointer from the arrays given."""
        for p in self.params:
            if p.kind != PARAM_POINTER or not p.dtype_param or p.name not in values:
                continue
            a = values[p.name]
            if not _arrays.is_array(a):
                continue
            have = _arrays.dtype_name(a)
            given = values.get(p.dtype_param)
            if given is None:
                if have is None:
                    raise FadslInvalidArgument(
                        f"argument '{p.name}' of kernel '{self.name}': fadsl has no dtype for {a.dtype}")
                values[p.dtype_param] = have
            elif _arrays.dtype_of_value(given) != have:
                raise FadslInvalidArgument(
                    f"argument '{p.name}' of kernel '{self.name}' points to {p.dtype_param} = "
                    f"{_arrays.dtype_of_value(given)}, but the array holds {a.dtype}")

    def _value(self, p, a, values):
        """The fadsl_value for parameter p, and a keep-alive for its bytes."""
        if p.kind == PARAM_POINTER:
            if not _arrays.is_array(a):
                raise FadslBindingError(
                    f"argument '{p.name}' of kernel '{self.name}' is a pointer and takes an array "
                    f"(numpy or torch), not {type(a).__name__}", "BINDING")
            want = p.dtype or _arrays.dtype_of_value(values.get(p.dtype_param))
            have = _arrays.dtype_name(a)
            if want is not None and have != want:
                raise FadslInvalidArgument(
                    f"argument '{p.name}' of kernel '{self.name}' points to {want}, but the array holds {a.dtype}")
            v = Value(ARG_PTR)
            v.v.ptr = _arrays.address(a)
            return v, None
        if p.kind == PARAM_CONSTEXPR:
            v = Value()
            if isinstance(a, (bool, np.bool_)):
                v.kind, v.v.i64 = ARG_BOOL, int(a)
            elif isinstance(a, numbers.Integral):
                v.kind, v.v.i64 = ARG_INT, int(a)
            elif isinstance(a, numbers.Real):
                v.kind, v.v.f64 = ARG_FLOAT, float(a)
            else:
                name = _arrays.dtype_of_value(a)
                if name is None:
                    raise FadslBindingError(
                        f"argument '{p.name}' of kernel '{self.name}' is a constexpr and takes an int, float, "
                        f"bool or dtype, not {type(a).__name__}", "BINDING")
                keep = name.encode()
                v.kind, v.v.dtype = ARG_DTYPE, keep
                return v, keep
            return v, None
        dt = p.dtype or _arrays.dtype_of_value(values.get(p.dtype_param))
        kind = _SCALAR_KIND.get(dt) if dt else (ARG_F64 if isinstance(a, float) else ARG_I64)
        if _arrays.is_array(a) or not isinstance(a, (int, float)):
            if hasattr(a, "item") and getattr(a, "shape", None) in ((), None):
                a = a.item()
            else:
                raise FadslBindingError(
                    f"argument '{p.name}' of kernel '{self.name}' is a {dt or 'scalar'} scalar and takes a number, "
                    f"not {type(a).__name__}", "BINDING")
        v = Value(kind)
        if kind in (ARG_I32, ARG_I64):
            if isinstance(a, float) and not a.is_integer():
                raise FadslBindingError(f"argument '{p.name}' of kernel '{self.name}' is an {dt} and takes an "
                                        f"integer, not {a}", "BINDING")
            lo, hi = (-(1 << 31), (1 << 32) - 1) if kind == ARG_I32 else (-(1 << 63), (1 << 63) - 1)
            if not lo <= int(a) <= hi:
                raise FadslInvalidArgument(f"argument '{p.name}' of kernel '{self.name}': {a} does not fit an {dt}")
            if kind == ARG_I32:
                v.v.i32 = int(a) if int(a) < (1 << 31) else int(a) - (1 << 32)
            else:
                v.v.i64 = int(a)
        elif kind == ARG_F32:
            v.v.f32 = float(a)
        else:
            v.v.f64 = float(a)
        return v, None

    # ---- the call ------------------------------------------------------------------

    def __call__(self, *args, grid=None, warps=None, stages=None, num_warps=None, num_stages=None, threads=1,
                 pipeline=None, schedule=None, **kwargs):
        launch_axes = _launch_axes(pipeline=pipeline, schedule=schedule)
        values = self._collect(args, kwargs)
        self._dtype_constexprs(values)
        arrays = [a for a in values.values() if _arrays.is_array(a)]
        devices = {_arrays.device_of(a) for a in arrays}
        if len(devices) > 1:
            raise FadslInvalidArgument(
                f"kernel '{self.name}': the arrays are on different devices ({', '.join(map(str, devices))}); "
                "fadsl runs a kernel on one CUDA device or on the interpreter (numpy arrays, CPU tensors)")
        device = devices.pop() if devices else -1
        warps = warps if warps is not None else num_warps
        stages = stages if stages is not None else num_stages
        grid = self._grid(grid)
        kernel = self.program._kernel(device, self.name)
        ctx = context(device)
        a = ctypes.c_void_p()
        ctx.check(core.fadsl_args_create(kernel, ctypes.byref(a)))
        try:
            keep = []
            for name, val in values.items():
                p = self.params[self._index[name]]
                v, k = self._value(p, val, values)
                keep.append(k)
                ctx.check(core.fadsl_args_set_at(a, self._index[name], v))
            if warps or stages:
                ctx.check(core.fadsl_args_set_config(a, int(warps or 0), int(stages or 0)))
            for axis, value in launch_axes:
                ctx.check(core.fadsl_args_set_config_axis(a, axis.encode(), value))
            if grid is not None:
                ctx.check(core.fadsl_args_set_grid(a, *grid))
            if device < 0:
                return self._interpret(ctx, kernel, a, values, threads)
            return self._launch(ctx, kernel, a, device)
        finally:
            core.fadsl_args_destroy(a)

    def _grid(self, grid):
        """A given grid as three dimensions (missing ones 1), or None."""
        if grid is None:
            return None
        g = (grid,) if isinstance(grid, numbers.Integral) else tuple(grid)
        if not 1 <= len(g) <= 3 or not all(isinstance(n, numbers.Integral) for n in g):
            raise FadslInvalidArgument(f"kernel '{self.name}': a grid is 1 to 3 integers, not {grid!r}")
        return tuple(int(n) for n in g) + (1,) * (3 - len(g))

    def _interpret(self, ctx, kernel, a, values, threads):
        ptrs = [values[p.name] for p in self.params if p.kind == PARAM_POINTER and p.name in values]
        regions = (HostRegion * max(1, len(ptrs)))()
        for i, arr in enumerate(ptrs):
            if hasattr(arr, "flags") and not arr.flags.writeable:
                raise FadslInvalidArgument(
                    f"kernel '{self.name}': a read-only numpy array was given (the interpreter writes in place); "
                    "pass a writeable copy (arr.copy())")
            regions[i].data, regions[i].bytes = _arrays.region(arr)
        opt = InterpretOptions()
        opt.threads = int(threads or 1)
        info = InterpretInfo()
        ctx.check(core.fadsl_interpret(kernel, a, regions, len(ptrs), ctypes.byref(opt), ctypes.byref(info)))
        return LaunchInfo(self.name, info.constexprs.decode(), info.warps, info.stages, _s(info.config_source),
                          tuple(info.grid), "interpreter")

    def _launch(self, ctx, kernel, a, device):
        import torch
        info = KernelInfo()
        stream = ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)
        ctx.check(core.fadsl_launch(kernel, a, stream, ctypes.byref(info)))
        return LaunchInfo(self.name, _s(info.constexprs), info.warps, info.stages, _s(info.config_source),
                          tuple(info.grid), f"cuda:{device}", _s(info.arch), _s(info.cache),
                          _s(info.pipeline), _s(info.schedule))



def _launch_axes(**given):
    """The named launch settings a call gives (pipeline="tma_ws", schedule="persistent") as
    (axis, number) pairs for fadsl_args_set_config_axis; an unknown name is refused here, before
    anything is bound.  None leaves a setting to the tuning database, the default or the
    environment (FADSL_PIPELINE, FADSL_SCHEDULE)."""
    out = []
    for axis, name in given.items():
        if name is None:
            continue
        value = core.fadsl_config_value(axis.encode(), str(name).encode()) if isinstance(name, str) else -1
        if value <= 0:
            allowed = core.fadsl_config_allowed(axis.encode()).decode()
            raise FadslInvalidArgument(f"{axis}={name!r}: want {allowed}")
        out.append((axis, value))
    return out
