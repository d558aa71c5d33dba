"""The C libraries, loaded with ctypes: where they are found, the functions'
signatures, and errors as Python exceptions.

libfadsl and libfadsl_attention are looked for, each in turn:
  1. in $FADSL_LIB_DIR (one directory, or several separated by ':');
  2. in the package itself (fadsl/_native/, where `pip install` puts the
     copies it builds);
  3. in `pkg-config --variable=libdir fadsl`;
  4. on the dynamic loader's path.
libfadsl is loaded first and globally, so that libfadsl_attention, which
needs it, finds that very copy.
"""
import ctypes
import os
import shutil
import subprocess
import threading
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_NATIVE = _HERE / "_native"

# ---- statuses and exceptions ------------------------------------------------

STATUS_NAMES = [
    "SUCCESS", "INVALID_ARGUMENT", "OUT_OF_MEMORY", "NO_DRIVER", "NO_DEVICE", "NO_NVRTC",
    "CUDA", "PROGRAM", "NVRTC", "NOT_FOUND", "BINDING", "IO", "UNSUPPORTED", "TIMEOUT",
]


class FadslError(RuntimeError):
    """A call into fadsl failed.  `status` names the library's status
    ("INVALID_ARGUMENT", "PROGRAM", ...); the message is the library's."""

    def __init__(self, message, status="INVALID_ARGUMENT"):
        super().__init__(message)
        self.status = status


class FadslInvalidArgument(FadslError, ValueError):
    """Bad shapes, dtypes, devices, sizes: a FadslError and a ValueError."""


class FadslBindingError(FadslError, TypeError):
    """An argument of the wrong kind, unknown, missing or given twice."""


def error_for(status, message):
    name = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else str(status)
    cls = {"INVALID_ARGUMENT": FadslInvalidArgument, "BINDING": FadslBindingError}.get(name, FadslError)
    return cls(message, name)


# ---- structures of fadsl.h --------------------------------------------------

ARG_NONE, ARG_PTR, ARG_I32, ARG_I64, ARG_F32, ARG_F64, ARG_INT, ARG_FLOAT, ARG_BOOL, ARG_DTYPE = range(10)
PARAM_POINTER, PARAM_SCALAR, PARAM_CONSTEXPR = range(3)


class _ValueUnion(ctypes.Union):
    _fields_ = [("ptr", ctypes.c_uint64), ("i32", ctypes.c_int32), ("i64", ctypes.c_int64),
                ("f32", ctypes.c_float), ("f64", ctypes.c_double), ("dtype", ctypes.c_char_p)]


class Value(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("v", _ValueUnion)]


class KernelInfo(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_char_p), ("entry", ctypes.c_char_p), ("arch", ctypes.c_char_p),
                ("constexprs", ctypes.c_char_p), ("warps", ctypes.c_int), ("stages", ctypes.c_int),
                ("config_source", ctypes.c_char_p), ("cache", ctypes.c_char_p),
                ("threads", ctypes.c_int), ("shared_bytes", ctypes.c_size_t),
                ("registers", ctypes.c_int), ("spill_bytes", ctypes.c_int),
                ("local_bytes", ctypes.c_int), ("grid", ctypes.c_uint * 3),
                ("cuda_source", ctypes.c_char_p), ("static_shared_bytes", ctypes.c_int),
                ("max_threads", ctypes.c_int), ("pipeline", ctypes.c_char_p),
                ("schedule", ctypes.c_char_p)]


class ParamInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int), ("dtype", ctypes.c_char_p),
                ("dtype_param", ctypes.c_char_p), ("has_default", ctypes.c_int),
                ("tunable", ctypes.c_int)]


class HostRegion(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("bytes", ctypes.c_size_t)]


class InterpretOptions(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_int), ("grid", ctypes.c_int64 * 3)]


class InterpretInfo(ctypes.Structure):
    _fields_ = [("constexprs", ctypes.c_char * 512), ("warps", ctypes.c_int), ("stages", ctypes.c_int),
                ("config_source", ctypes.c_char_p), ("grid", ctypes.c_int64 * 3)]


# ---- finding and loading ----------------------------------------------------

def _pkg_config_libdir():
    exe = shutil.which("pkg-config")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--variable=libdir", "fadsl"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def _candidates(soname):
    dirs = [d for d in os.environ.get("FADSL_LIB_DIR", "").split(os.pathsep) if d]
    dirs.append(str(_NATIVE))
    libdir = _pkg_config_libdir()
    if libdir:
        dirs.append(libdir)
    paths = [os.path.join(d, soname) for d in dirs]
    return [p for p in paths if os.path.exists(p)] + [soname]


def _load(soname, mode):
    tried = []
    for path in _candidates(soname):
        try:
            return ctypes.CDLL(path, mode=mode), path
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise ImportError(
        f"fadsl: cannot load {soname}; tried\n  " + "\n  ".join(tried) +
        "\nInstall the package from the repository (pip install ./python builds the libraries), "
        "or set FADSL_LIB_DIR to the directory holding libfadsl.so.0 and libfadsl_attention.so.0.")


def _use_wheel_nvrtc():
    """Points libfadsl at the libnvrtc of an NVIDIA pip wheel (as PyTorch's
    CUDA wheels bring) when the machine has no other: the library looks for
    libnvrtc on the loader's path, in $CUDA_HOME and in the CUDA directory it
    was configured with, and $FADSL_NVRTC_PATH overrides all of them."""
    if os.environ.get("FADSL_NVRTC_PATH"):
        return
    for name in ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"):
        try:
            ctypes.CDLL(name)
            return
        except OSError:
            pass
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and any(Path(home, "lib64").glob("libnvrtc.so*")):
            return
    import site
    import sys
    roots = list(sys.path)
    try:
        roots += site.getsitepackages()
    except AttributeError:
        pass
    for root in roots:
        nvidia = Path(root) / "nvidia"
        if not nvidia.is_dir():
            continue
        found = sorted(nvidia.glob("*/lib/libnvrtc.so.*"))
        found = [p for p in found if "builtins" not in p.name]
        if found:
            os.environ["FADSL_NVRTC_PATH"] = str(found[-1].parent)
            return


_use_wheel_nvrtc()
_core, core_path = _load("libfadsl.so.0", ctypes.RTLD_GLOBAL)
_attn, attention_path = _load("libfadsl_attention.so.0", ctypes.RTLD_GLOBAL)

_P = ctypes.c_void_p
_U64 = ctypes.c_uint64
_I = ctypes.c_int
_F = ctypes.c_float


def _sig(lib, name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


core = _core
attn = _attn
_sig(core, "fadsl_version", ctypes.c_char_p)
_sig(core, "fadsl_status_string", ctypes.c_char_p, _I)
_sig(core, "fadsl_context_create", _I, _I, ctypes.POINTER(_P))
_sig(core, "fadsl_context_destroy", None, _P)
_sig(core, "fadsl_context_last_error", ctypes.c_char_p, _P)
_sig(core, "fadsl_program_load_file", _I, _P, ctypes.c_char_p, ctypes.POINTER(_P))
_sig(core, "fadsl_program_load_string", _I, _P, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_P))
_sig(core, "fadsl_program_destroy", None, _P)
_sig(core, "fadsl_program_kernel_count", _I, _P)
_sig(core, "fadsl_program_kernel_name", ctypes.c_char_p, _P, _I)
_sig(core, "fadsl_program_kernel", _I, _P, ctypes.c_char_p, ctypes.POINTER(_P))
_sig(core, "fadsl_kernel_param_count", _I, _P)
_sig(core, "fadsl_kernel_param_info", _I, _P, _I, ctypes.POINTER(ParamInfo))
_sig(core, "fadsl_args_create", _I, _P, ctypes.POINTER(_P))
_sig(core, "fadsl_args_destroy", None, _P)
_sig(core, "fadsl_args_clear", None, _P)
_sig(core, "fadsl_args_set_at", _I, _P, _I, Value)
_sig(core, "fadsl_args_set", _I, _P, ctypes.c_char_p, Value)
_sig(core, "fadsl_args_set_config", _I, _P, _I, _I)
_sig(core, "fadsl_args_set_config_axis", _I, _P, ctypes.c_char_p, _I)
_sig(core, "fadsl_config_value", _I, ctypes.c_char_p, ctypes.c_char_p)
_sig(core, "fadsl_config_allowed", ctypes.c_char_p, ctypes.c_char_p)
_sig(core, "fadsl_args_set_grid", _I, _P, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_sig(core, "fadsl_launch", _I, _P, _P, _P, ctypes.POINTER(KernelInfo))
_sig(core, "fadsl_interpret", _I, _P, _P, ctypes.POINTER(HostRegion), _I,
     ctypes.POINTER(InterpretOptions), ctypes.POINTER(InterpretInfo))

_sig(attn, "fadsl_attention_create", _I, _P, ctypes.POINTER(_P))
_sig(attn, "fadsl_attention_destroy", None, _P)
_sig(attn, "fadsl_attention_last_error", ctypes.c_char_p, _P)
_sig(attn, "fadsl_attention_check_shape", _I, _P, _I, _I, _I, _I, _I, _I, _I, _F, _I)
_sig(attn, "fadsl_attention_forward", _I, _P, _U64, _U64, _U64, _U64, _U64,
     _I, _I, _I, _I, _I, _I, _I, _F, _I, _P)
_sig(attn, "fadsl_attention_backward", _I, _P, _U64, _U64, _U64, _U64, _U64, _U64, _U64, _U64, _U64, _U64,
     _I, _I, _I, _I, _I, _I, _I, _F, _I, _P)
_sig(attn, "fadsl_attention_backward_delta", _I, _P, _U64, _U64, _U64, _U64, _U64, _U64, _U64, _U64, _U64,
     _I, _I, _I, _I, _I, _I, _I, _F, _I, _P)
_sig(attn, "fadsl_attention_forward_host", _I, _P, _P, _P, _P, _P, _P,
     _I, _I, _I, _I, _I, _I, _I, _F, _I, _I)
_sig(attn, "fadsl_attention_backward_host", _I, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P,
     _I, _I, _I, _I, _I, _I, _I, _F, _I, _I)
_sig(attn, "fadsl_attention_backward_delta_host", _I, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P,
     _I, _I, _I, _I, _I, _I, _I, _F, _I, _I)


class AttentionOptions(ctypes.Structure):
    """fadsl_attention_options (fadsl_attention.h), set up by
    fadsl_attention_options_init_size with this mirror's own size (the
    library writes nothing past it and takes later fields as defaults)."""
    _fields_ = [("size", ctypes.c_size_t), ("causal", _I), ("window_left", _I), ("window_right", _I),
                ("softcap", _F), ("alibi", _U64), ("sinks", _U64), ("dsinks", _U64),
                ("cu_seqlens_q", _U64), ("cu_seqlens_k", _U64), ("nseq", _I), ("max_seqlen_q", _I),
                ("max_seqlen_k", _I), ("dq_accum", _U64), ("deterministic", _I), ("fuse_delta", _I),
                ("dkv_accum", _U64)]


def attention_options(causal, deterministic, dq_accum=0, dkv_accum=0):
    """Options of a plain (no variant) backward pass: fused with the
    accumulator dq_accum (a device or host address), unless deterministic;
    with dkv_accum (a device address) and grouped queries, a program per
    query head."""
    o = AttentionOptions()
    attn.fadsl_attention_options_init_size(ctypes.byref(o), ctypes.sizeof(o))
    o.causal = int(bool(causal))
    o.deterministic = int(bool(deterministic))
    o.dq_accum = int(dq_accum)
    o.dkv_accum = int(dkv_accum)
    return o


_sig(attn, "fadsl_attention_options_init_size", None, ctypes.POINTER(AttentionOptions), ctypes.c_size_t)
_sig(attn, "fadsl_attention_dq_accum_bytes", ctypes.c_size_t, _I, _I, _I, _I)
_sig(attn, "fadsl_attention_heads_preferred", _I, _I, _I)
_sig(attn, "fadsl_attention_backward_ex", _I, _P, ctypes.POINTER(AttentionOptions), _U64, _U64, _U64, _U64, _U64,
     _U64, _U64, _U64, _U64, _U64, _I, _I, _I, _I, _I, _I, _F, _I, _P)
_sig(attn, "fadsl_attention_backward_host_ex", _I, _P, ctypes.POINTER(AttentionOptions), _P, _P, _P, _P, _P, _P,
     _P, _P, _P, _P, _I, _I, _I, _I, _I, _I, _F, _I, _I)

VERSION = core.fadsl_version().decode()


# ---- contexts, one per device ------------------------------------------------

class Context:
    """An fadsl_context (device -1: the interpreter and compiling only), with
    the attention handle made on it when first needed."""

    def __init__(self, device):
        self.device = device
        self.handle = _P()
        st = core.fadsl_context_create(device, ctypes.byref(self.handle))
        if not self.handle:
            raise error_for(st, f"fadsl_context_create({device}) failed: status {st}")
        if st != 0:
            msg = self.last_error()
            core.fadsl_context_destroy(self.handle)
            self.handle = _P()
            raise error_for(st, f"no usable CUDA device {device}: {msg}")
        self._attention = None
        self._lock = threading.Lock()

    def last_error(self):
        return (core.fadsl_context_last_error(self.handle) or b"").decode(errors="replace")

    def check(self, status, what=None):
        if status != 0:
            msg = self.last_error()
            raise error_for(status, f"{what}: {msg}" if what else msg)

    def attention(self):
        with self._lock:
            if self._attention is None:
                h = _P()
                st = attn.fadsl_attention_create(self.handle, ctypes.byref(h))
                if st != 0:
                    msg = (attn.fadsl_attention_last_error(h) or b"").decode()
                    attn.fadsl_attention_destroy(h)
                    raise error_for(st, msg)
                self._attention = h
            return self._attention

    def attention_check(self, status):
        if status != 0:
            msg = (attn.fadsl_attention_last_error(self._attention) or b"").decode(errors="replace")
            raise error_for(status, msg)

    def __del__(self):
        try:
            if getattr(self, "_attention", None):
                attn.fadsl_attention_destroy(self._attention)
            if getattr(self, "handle", None):
                core.fadsl_context_destroy(self.handle)
        except Exception:   # interpreter shutdown: the libraries may be gone
            pass


_contexts = {}
_contexts_lock = threading.Lock()


def context(device=-1):
    """The shared context of a device (-1: the host one)."""
    with _contexts_lock:
        ctx = _contexts.get(device)
        if ctx is None:
            ctx = _contexts[device] = Context(device)
        return ctx
