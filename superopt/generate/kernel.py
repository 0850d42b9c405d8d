"""A verified kernel as a Python callable: ``vadd(a, b, c, n)`` launches it.

Arguments bind to the kernel's parameters in order or by name (the spec's names). Buffers
are arrays of exactly their element type (no silent casts: a kernel launch would not cast
either); outputs are written back into the arrays given, as a launch writes device memory,
and returned (the one output buffer, or a tuple of them in parameter order). The launch
shape is the spec's, evaluated with the scalars given, unless ``grid=``/``block=``/``shared=``
say otherwise.

Where it runs (``backend``):

* ``cupy``: CuPy arrays (anything with ``__cuda_array_interface__``) are launched in place
  through ``cupy.RawModule`` (chosen automatically for CuPy arguments);
* ``gpu``: numpy arrays through nvcc-plus's GPU runner (cuda-python), copied in and out;
* ``emulator``: numpy arrays on the CPU PTX emulator (chosen when no GPU is usable) -- slow,
  but the same semantics the check used; a write outside a buffer raises.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from superopt.specs.launch_spec import Buffer, LaunchSpec, Scalar, eval_expr

__all__ = ["GeneratedKernel", "KernelLaunchError"]


class KernelLaunchError(RuntimeError):
    """The launch failed (crash, timeout, write outside a buffer, backend error)."""


class GeneratedKernel:
    def __init__(self, name: str, ptx: str, spec: LaunchSpec, *, signature: str | None = None,
                 record: dict | None = None, backend: str = "auto", timeout: float = 120.0):
        if backend not in ("auto", "gpu", "emulator", "cupy"):
            raise ValueError(f"backend must be auto, gpu, emulator or cupy, not {backend!r}")
        self.name, self.ptx, self.spec = name, ptx, replace(spec, kernel=name)
        self.signature = signature or name
        self.record = record or {}
        self.backend = backend
        self.timeout = timeout
        self._cupy_function = None

    @classmethod
    def from_result(cls, result, **kw) -> "GeneratedKernel":
        """The callable of an accepted :class:`superopt.generate.loop.GenerationResult`."""
        if not result.accepted:
            raise ValueError(f"the generation was not accepted: {result.verdict_line()}")
        t = result.task
        return cls(t.kernel, result.module_ptx, t.specs[0], signature=t.signature.text, record=result.record, **kw)

    # ------------------------------------------------------------------ binding
    @property
    def param_names(self) -> list[str]:
        return [p.name for p in self.spec.params]

    def bind(self, args: tuple, kwargs: dict) -> dict:
        names = self.param_names
        if len(args) > len(names):
            raise TypeError(f"{self.name}() takes {len(names)} arguments ({', '.join(names)}), {len(args)} given")
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"{self.name}() has no parameter {k!r} ({', '.join(names)})")
            if k in bound:
                raise TypeError(f"{self.name}() got two values for {k!r}")
            bound[k] = v
        missing = [n for n in names if n not in bound]
        if missing:
            raise TypeError(f"{self.name}() is missing {', '.join(missing)}")
        return bound

    def launch_spec(self, bound: dict, grid=None, block=None, shared=None) -> LaunchSpec:
        """The spec with these scalars and these arrays' lengths, grid and block evaluated."""
        params = []
        for p in self.spec.params:
            v = bound[p.name]
            if isinstance(p, Scalar):
                params.append(replace(p, value=v.item() if hasattr(v, "item") else v, values=None))
            else:
                n = int(v.size)
                params.append(replace(p, length_expr=n, length=n))
        env = {p.name: p.value for p in params if isinstance(p, Scalar)}
        g = _dims(grid) if grid is not None else tuple(eval_expr(x, env) for x in self.spec.grid)
        b = _dims(block) if block is not None else self.spec.block
        sh = int(shared) if shared is not None else self.spec.shared_bytes
        return LaunchSpec(self.name, grid=g, block=b, params=params, shared_bytes=sh, vary_sizes=False,
                          origin="call").resolved()

    # ------------------------------------------------------------------ launching
    def _choose(self, bound: dict) -> str:
        if self.backend != "auto":
            return self.backend
        if any(hasattr(v, "__cuda_array_interface__") for v in bound.values()):
            return "cupy"
        from superopt.generate.judge import resolve_backend
        return resolve_backend("auto")

    def __call__(self, *args, grid=None, block=None, shared=None, **kwargs):
        bound = self.bind(args, kwargs)
        spec = self.launch_spec(bound, grid, block, shared)
        where = self._choose(bound)
        if where == "cupy":
            self._launch_cupy(spec, bound)
        else:
            self._launch_runner(where, spec, bound)
        outs = [bound[b.name] for b in self.spec.buffers if b.direction in ("out", "inout")]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _launch_runner(self, where: str, spec: LaunchSpec, bound: dict) -> None:
        from superopt.judge.backends.base import get_backend
        from superopt.judge.inputs import InputSet, make_guards, make_rng
        data = {}
        for b in spec.buffers:
            arr = bound[b.name]
            if not isinstance(arr, np.ndarray):
                raise TypeError(f"{b.name}: a numpy array of {b.elem.dtype} was expected, not {type(arr).__name__}")
            if arr.dtype != b.elem.dtype:
                raise TypeError(f"{b.name}: the kernel takes {b.type} ({b.elem.dtype}) elements, "
                                f"the array holds {arr.dtype}")
            if b.direction != "in" and not arr.flags.c_contiguous:
                raise TypeError(f"{b.name}: an output array must be C-contiguous (results are written into it)")
            data[b.name] = np.ascontiguousarray(arr).reshape(-1)
        rng = make_rng(0x6E4, 1)
        iset = InputSet(index=0, label="call", seed=0, spec=spec, data=data,
                        guards={b.name: make_guards(rng) for b in spec.buffers})
        res = get_backend(where).run_many(self.ptx, spec, [iset], timeout=self.timeout)[0]
        if res.status != "ok":
            raise KernelLaunchError(f"{self.name} on the {where}: {res.status}: {res.error}")
        if res.guard_damage:
            n, d = sorted(res.guard_damage.items())[0]
            raise KernelLaunchError(f"{self.name} wrote outside buffer {n!r}: {d}")
        for b in spec.buffers:
            if b.direction != "in" or not res.inputs_unchanged.get(b.name, True):
                bound[b.name].reshape(-1)[...] = res.outputs[b.name]

    def _launch_cupy(self, spec: LaunchSpec, bound: dict) -> None:
        import os
        import tempfile
        try:
            import cupy as cp
        except ImportError:
            raise KernelLaunchError("CuPy arrays were given but cupy cannot be imported") from None
        if self._cupy_function is None:
            with tempfile.TemporaryDirectory(prefix="superopt-gen-") as tmp:
                path = os.path.join(tmp, f"{self.name}.ptx")
                with open(path, "w") as fh:
                    fh.write(self.ptx)
                self._cupy_function = cp.RawModule(path=path).get_function(self.name)
        args = []
        for p in spec.params:
            v = bound[p.name]
            if isinstance(p, Buffer):
                if v.dtype != p.elem.dtype:
                    raise TypeError(f"{p.name}: the kernel takes {p.type} elements, the array holds {v.dtype}")
                args.append(v)
            else:
                args.append(p.elem.dtype.type(p.value))
        self._cupy_function(tuple(spec.grid), tuple(spec.block), tuple(args), shared_mem=spec.shared_bytes)

    # ------------------------------------------------------------------ display
    def __repr__(self) -> str:
        status = self.record.get("status", "?")
        return f"<GeneratedKernel {self.signature}: {status}; grid {self.spec.grid} block {self.spec.block}>"

    def _repr_html_(self) -> str:
        from superopt.generate.render import record_html
        return record_html(self.record, ptx=self.ptx)


def _dims(v) -> tuple:
    if isinstance(v, int):
        v = (v,)
    v = tuple(int(x) for x in v)
    if not 1 <= len(v) <= 3 or min(v) < 1:
        raise ValueError(f"a launch dimension must be 1 to 3 positive integers, not {v!r}")
    return v + (1,) * (3 - len(v))


