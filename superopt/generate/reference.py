"""The reference: what a generated kernel must compute. A numpy function, or a CUDA kernel.

**numpy** (``--reference ref.py`` or ``ref.py:NAME``; in a notebook, a function object)::

    import numpy as np

    def reference(a, b, c, n):          # one keyword argument per kernel parameter, by name
        c[:n] = a[:n] + b[:n]           # write outputs in place ...
        # ... or return them: {"c": a + b}, or one array when there is one output buffer

The contract:

* it is called as ``reference(**params)``: every buffer as a 1-D numpy array of its element
  type (``f32`` -> ``float32``, ``s32`` -> ``int32``, ``f16`` -> ``float16``; ``bf16`` as its
  ``uint16`` bits), every scalar as a numpy scalar of its type (``np.int32(4099)``,
  ``np.float32(1.5)``), so numpy computes in the kernel's precision;
* ``in`` buffers hold the check's inputs (NaN, Inf, denormals, -0.0 among them); ``out``
  buffers arrive filled with a poison pattern: an element the reference leaves alone is one
  the kernel must not write either; ``inout`` buffers hold inputs to update;
* it writes outputs in place (``c[:] = ...``; ``c.reshape(rows, cols)[...] = ...`` writes
  through), or returns ``{name: array}`` (each of the buffer's length), or one array when
  there is exactly one ``out``/``inout`` buffer;
* it is deterministic: it runs twice per input set (with different poisons) and the two
  runs must agree. numpy warnings (overflow, invalid) are silenced;
* a function named ``reference``, else the only function the file defines, else name it:
  ``ref.py:my_function``.

Comparison is bit-exact (any NaN equals any NaN) unless ``--policy ulp:N`` / ``rel:X``.
numpy's ``a * b + c`` rounds twice where a GPU ``fma`` rounds once: write the reference as
the kernel should compute it, or opt into a tolerance.

**CUDA** (``--reference ref.cu`` or ``ref.cu:KERNEL``): compiled by nvcc to PTX at the target,
its kernel (renamed to the signature's name) is the baseline of the ordinary differential
check on the same judge (GPU or emulator), and, on a GPU, the generated kernel is timed
against it. Without ``--signature`` the kernel's own C signature is used.
"""
from __future__ import annotations

import importlib.util
import inspect
import itertools
import re
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

import ptx_ir
from superopt.generate.signature import KernelSignature, SignatureError, parse_signature
from superopt.judge.backends.base import Backend, RunResult
from superopt.specs.launch_spec import Buffer

__all__ = ["ReferenceError", "NumpyReference", "CudaReference", "NumpyReferenceBackend", "load_numpy_reference",
           "load_cuda_reference", "split_reference_arg", "numpy_reference_from_callable"]

_MODULE_COUNTER = itertools.count()


class ReferenceError(ValueError):
    """A reference that cannot be loaded or used (the message says why)."""


def split_reference_arg(text: str) -> tuple[Path, str | None]:
    """``ref.py`` -> (ref.py, None); ``ref.py:fn`` / ``ref.cu:kernel`` -> (path, name)."""
    text = str(text)
    path, name = Path(text), None
    if not path.exists():
        head, sep, tail = text.rpartition(":")
        if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_:]*", tail) and Path(head).exists():
            path, name = Path(head), tail
    if not path.exists():
        raise ReferenceError(f"reference {text!r} does not exist")
    if not path.is_file():
        raise ReferenceError(f"reference {text!r} is not a file")
    return path, name


# ---------------------------------------------------------------------------------- numpy

@dataclass
class NumpyReference:
    fn: Callable
    label: str                  # "ref.py:reference", or the function's name in a notebook
    source: str                 # the function's source, for the prompt and the record
    path: str | None = None
    kind: str = field(default="numpy", init=False)

    def check_parameters(self, names: list[str]) -> None:
        """The function must take every kernel parameter by name (or ``**kwargs``)."""
        try:
            params = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            return                  # builtins and the like: find out when it is called
        if any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return
        takes = {n for n, p in params.items() if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                            inspect.Parameter.KEYWORD_ONLY)}
        missing = [n for n in names if n not in takes]
        required_extra = [n for n, p in params.items() if n not in names and p.default is inspect.Parameter.empty
                          and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
        if missing or required_extra:
            why = []
            if missing:
                why.append(f"does not take {', '.join(missing)}")
            if required_extra:
                why.append(f"requires {', '.join(required_extra)}, which are not kernel parameters")
            raise ReferenceError(f"the reference {self.label}{inspect.signature(self.fn)} {' and '.join(why)}: "
                                 f"it is called as reference({', '.join(f'{n}=...' for n in names)})")

    def describe(self) -> dict:
        return {"kind": "numpy", "label": self.label, "path": self.path, "source": self.source}

    def run(self, spec, data: dict) -> dict:
        """Final contents of every buffer after the reference ran on ``data`` (copies are
        made); raises whatever the reference raises, or ReferenceError for a bad return."""
        arrays = {b.name: np.array(data[b.name], copy=True) for b in spec.buffers}
        kwargs: dict = {}
        for p in spec.params:
            if isinstance(p, Buffer):
                kwargs[p.name] = arrays[p.name]
            else:
                kwargs[p.name] = p.elem.dtype.type(p.value)
        with np.errstate(all="ignore"):
            ret = self.fn(**kwargs)
        if ret is not None:
            writable = [b for b in spec.buffers if b.direction in ("out", "inout")]
            if isinstance(ret, dict):
                items = ret.items()
            elif len(writable) == 1:
                items = [(writable[0].name, ret)]
            else:
                raise ReferenceError(f"the reference returned a {type(ret).__name__}; with "
                                     f"{len(writable)} output buffers return a dict {{name: array}} "
                                     f"or write them in place")
            for name, value in items:
                if name not in arrays:
                    raise ReferenceError(f"the reference returned {name!r}, which is not a buffer "
                                         f"({', '.join(arrays)})")
                v = np.asarray(value).reshape(-1)
                if v.size != arrays[name].size:
                    raise ReferenceError(f"the reference returned {v.size} elements for buffer {name!r} "
                                         f"of {arrays[name].size}")
                with np.errstate(all="ignore"):
                    arrays[name][...] = v
        for name, a in arrays.items():
            if a.shape != np.shape(data[name]) or a.dtype != np.asarray(data[name]).dtype:
                raise ReferenceError(f"buffer {name!r} changed shape or type inside the reference")
        return arrays


def _where(exc: BaseException, path: str | None) -> str:
    """'line N of ref.py' for the innermost frame in the reference's file."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if path and Path(f.filename).resolve() == Path(path).resolve()]
    f = (mine or frames[-1:] or [None])[-1]
    if f is None:
        return ""
    return f" (line {f.lineno} of {Path(f.filename).name}: {(f.line or '').strip()})"


class NumpyReferenceBackend(Backend):
    """The judge's backend with the reference behind the stub module: asked to run the stub
    (the header with an empty body) it runs the numpy function instead; every other module
    runs on the real backend (GPU or emulator). So the ordinary differential check -- inputs,
    poisons, determinism, guards, the static check -- compares the kernel with the reference."""

    def __init__(self, inner: Backend, stub_ptx: str, reference: NumpyReference):
        self.inner, self.stub_ptx, self.reference = inner, stub_ptx, reference
        self.name = inner.name

    def available(self):
        return self.inner.available()

    def describe(self) -> dict:
        return {**self.inner.describe(), "reference": f"numpy {self.reference.label}"}

    def run_many(self, ptx, spec, input_sets, *, timeout=None):
        if ptx != self.stub_ptx:
            return self.inner.run_many(ptx, spec, input_sets, timeout=timeout)
        return [self._run(s) for s in input_sets]

    def _run(self, s) -> RunResult:
        t0 = time.perf_counter()
        try:
            outs = self.reference.run(s.spec, s.data)
        except ReferenceError as e:
            return RunResult("crash", error=str(e))
        except Exception as e:   # noqa: BLE001 - the user's function: any error is its verdict
            return RunResult("crash", error=f"the reference raised {type(e).__name__}: {e}"
                                            f"{_where(e, self.reference.path)}")
        r = RunResult("ok", elapsed=time.perf_counter() - t0)
        for b in s.spec.buffers:
            before = np.ascontiguousarray(s.data[b.name])
            after = outs[b.name]
            same = before.tobytes() == after.tobytes()
            r.outputs[b.name] = s.data[b.name] if same else after
            r.inputs_unchanged[b.name] = same
            r.guards_intact[b.name] = True
        return r


def _load_module(path: Path):
    name = f"_superopt_reference_{next(_MODULE_COUNTER)}"
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise ReferenceError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise ReferenceError(f"{path}: line {e.lineno}: {e.msg}") from None
    except Exception as e:   # noqa: BLE001 - importing the user's file: report, never a traceback
        raise ReferenceError(f"{path}: importing it raised {type(e).__name__}: {e}{_where(e, str(path))}") from None
    return module


def load_numpy_reference(path: Path, function: str | None = None) -> NumpyReference:
    module = _load_module(path)
    if function:
        fn = getattr(module, function, None)
        if not callable(fn):
            raise ReferenceError(f"{path} defines no function {function!r}")
    elif callable(getattr(module, "reference", None)):
        fn, function = module.reference, "reference"
    else:
        own = [n for n, v in vars(module).items()
               if inspect.isfunction(v) and v.__module__ == module.__name__ and not n.startswith("_")]
        if len(own) != 1:
            raise ReferenceError(f"{path}: no function named 'reference'"
                                 + (f", and it defines {len(own)} functions ({', '.join(own)}): "
                                    f"name one as {path}:NAME" if own else ", and no other function"))
        function = own[0]
        fn = getattr(module, function)
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = path.read_text()
    return NumpyReference(fn, f"{path.name}:{function}", source, str(path))


def numpy_reference_from_callable(fn: Callable, label: str | None = None) -> NumpyReference:
    """A reference from a function object (the notebook's ``--reference NAME``)."""
    if not callable(fn):
        raise ReferenceError(f"the reference {label or fn!r} is not callable")
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = f"# source not available for {label or getattr(fn, '__name__', fn)}"
    return NumpyReference(fn, label or getattr(fn, "__name__", "reference"), source, None)


# ---------------------------------------------------------------------------------- CUDA

@dataclass
class CudaReference:
    path: str
    source: str                 # the .cu text (for the prompt and the record)
    ptx: str                    # nvcc's PTX with the kernel renamed to the signature's name
    kernel: str                 # the signature's name (the entry in ``ptx``)
    original_entry: str         # the entry's name in nvcc's PTX (mangled or not)
    signature: KernelSignature
    module_header: tuple        # (version, targets, address_size) of nvcc's PTX
    display_name: str = ""      # the kernel's C++ name (demangled)
    kind: str = field(default="cuda", init=False)

    @property
    def label(self) -> str:
        return f"{Path(self.path).name}:{self.display_name or self.original_entry}"

    def describe(self) -> dict:
        return {"kind": "cuda", "label": self.label, "path": self.path, "entry": self.original_entry,
                "source": self.source}

    def stub_module_text(self) -> str:
        """The header nvcc made for the reference (renamed), with an empty body."""
        from superopt.model.grammar import function_header
        module = ptx_ir.parse(self.ptx)
        header = function_header(module.function(self.kernel))
        version, targets, asize = self.module_header
        head = f".version {version}\n" + (f".target {', '.join(targets)}\n" if targets else "")
        if asize is not None:
            head += f".address_size {asize}\n"
        return ptx_ir.emit(ptx_ir.parse(head + "\n" + header + "\tret;\n}\n"))


def _base_name(fn) -> str:
    sig = fn.signature or ""
    name = sig.split("(")[0].strip() if sig else fn.name
    return name.split("::")[-1].split("<")[0].strip() or fn.name


def rename_entry(ptx: str, old: str, new: str) -> str:
    """``old`` -> ``new`` as a whole token, and ``old_param_N`` -> ``new_param_N``."""
    if old == new:
        return ptx
    tok = r"(?<![\w$.]){}(?![\w$])"
    if re.search(tok.format(re.escape(new)), ptx):
        raise ReferenceError(f"the reference's PTX already uses the name {new!r}; choose another kernel name")
    ptx = re.sub(tok.format(re.escape(old) + r"_param_(\d+)"), lambda m: f"{new}_param_{m.group(1)}", ptx)
    return re.sub(tok.format(re.escape(old)), new, ptx)


def load_cuda_reference(path: Path, kernel: str | None, sig: KernelSignature | None, target: str) -> CudaReference:
    """Compile ``path`` with nvcc, pick its kernel (``kernel``, else the signature's name, else
    the only one), rename it to the signature's name, and check that the signatures agree."""
    from superopt.cli_input import PtxSourceError, ptx_from_file
    from superopt.specs.comments import find_kernels
    source = path.read_text(errors="replace")
    try:
        ptx = ptx_from_file(path, target)
    except PtxSourceError as e:
        raise ReferenceError(str(e)) from None
    except FileNotFoundError as e:
        raise ReferenceError(f"cannot compile the CUDA reference: nvcc not found ({e}); set NVCC_PLUS_REAL_NVCC "
                             f"or put nvcc on PATH") from None
    module = ptx_ir.parse(ptx)
    entries = list(module.kernels)
    if not entries:
        raise ReferenceError(f"{path} defines no __global__ kernel")
    want = kernel or (sig.name if sig else None)
    if want:
        hits = [f for f in entries if want in (f.name, _base_name(f), f.signature or "")]
        if not hits and kernel is None and len(entries) == 1:
            hits = entries           # the signature names the kernel to write, not the reference
    else:
        hits = entries
    if len(hits) != 1:
        names = ", ".join(f.signature or f.name for f in entries)
        what = f"match {want!r}" if want else "and no name was given"
        raise ReferenceError(f"{path}: {len(hits) or 'no'} kernel(s) {what} (kernels: {names}); "
                             f"write --reference {path}:KERNEL")
    fn = hits[0]
    base = _base_name(fn)
    if sig is None:
        decls = [d for d in find_kernels(source) if d.name == base]
        if not decls:
            raise ReferenceError(f"cannot find the declaration of {base} in {path}: give --signature")
        d = decls[0]
        text = f"{base}(" + ", ".join(f"{t} {n}" for t, n in zip(d.param_types, d.params)) + ")"
        try:
            sig = parse_signature(text)
        except SignatureError as e:
            raise ReferenceError(f"the reference kernel's signature {text!r} cannot be used ({e}): give --signature") from None
    ref_params = [(p.type, p.size) for p in fn.params]
    if len(ref_params) != len(sig.params):
        raise ReferenceError(f"the reference kernel {fn.signature or fn.name} has {len(ref_params)} parameters, "
                             f"the signature {sig.text} {len(sig.params)}")
    for p, (ptype, size) in zip(sig.params, ref_params):
        want_size = 8 if p.pointer else {".u8": 1, ".u16": 2, ".b16": 2, ".u32": 4, ".f32": 4, ".u64": 8,
                                         ".f64": 8}[p.ptx_type]
        if size != want_size:
            raise ReferenceError(f"parameter {p.index} ({p.describe()}) is {want_size} bytes, but the reference's "
                                 f"is {ptype} ({size} bytes)")
    renamed = rename_entry(ptx, fn.name, sig.name)
    return CudaReference(str(path), source, renamed, sig.name, fn.name, sig,
                         (module.version, tuple(module.target or ()), module.address_size), base)
