"""What one generation is about: description, signature, reference, launch specs, target,
and the module the model writes into -- built and checked before the model is asked, so
that every bad input is reported (exit 2) without spending model time."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import ptx_ir
from superopt.generate.reference import (CudaReference, NumpyReference, ReferenceError, load_cuda_reference,
                                         load_numpy_reference, split_reference_arg)
from superopt.generate.signature import (DEFAULT_TARGET, KernelSignature, SignatureError, parse_signature,
                                         ptx_version_for, stub_module_text)
from superopt.generate.spec import check_fits, default_spec, spec_from_option
from superopt.specs.launch_spec import SpecError

__all__ = ["GenerationTask", "TaskError", "build_task"]

MAX_DESCRIPTION = 20000


class TaskError(ValueError):
    """Bad input: the message says which and why (exit 2)."""


@dataclass
class GenerationTask:
    description: str
    signature: KernelSignature
    reference: NumpyReference | CudaReference
    specs: list                     # LaunchSpecs (kernel = the signature's name); the first is timed
    target: str
    stub_ptx: str                   # the pinned header with an empty body, as a module
    notes: list = field(default_factory=list)

    @property
    def kernel(self) -> str:
        return self.signature.name

    @property
    def stub_module(self) -> ptx_ir.Module:
        return ptx_ir.parse(self.stub_ptx)

    @property
    def ptx_version(self) -> str:
        return self.stub_module.version

    @property
    def header(self) -> str:
        from superopt.model.grammar import function_header
        return function_header(self.stub_module.function(self.kernel))

    @property
    def header_params(self) -> list[str]:
        fn = self.stub_module.function(self.kernel)
        return [f"{p.name} ({p.type})" for p in fn.params]

    def describe(self) -> dict:
        return {"description": self.description, "kernel": self.kernel, "signature": self.signature.text,
                "target": self.target, "reference": self.reference.describe(),
                "specs": [s.to_dict() for s in self.specs], "header": self.header, "notes": list(self.notes)}


def _target_ok(target: str) -> str:
    try:
        ptx_version_for(target)
    except SignatureError as e:
        raise TaskError(str(e)) from None
    return target


def build_task(description: str, *, reference, signature: str | None = None, spec: str | None = None,
               target: str = DEFAULT_TARGET) -> GenerationTask:
    """Everything checked that can be checked without the model. ``reference``: a path
    (``.py``/``.cu``, optionally ``:NAME``), or a :class:`NumpyReference` (notebooks)."""
    description = (description or "").strip()
    if not description:
        raise TaskError("the description is empty: say what the kernel computes")
    if len(description) > MAX_DESCRIPTION:
        raise TaskError(f"the description is {len(description)} characters (at most {MAX_DESCRIPTION})")
    target = _target_ok(target)
    sig = None
    if signature is not None:
        try:
            sig = parse_signature(signature)
        except SignatureError as e:
            raise TaskError(f"--signature: {e}") from None
    notes: list[str] = []
    try:
        if isinstance(reference, NumpyReference):
            ref = reference
        else:
            path, name = split_reference_arg(reference)
            if path.suffix == ".py":
                ref = load_numpy_reference(path, name)
            elif path.suffix in (".cu", ".cuh"):
                ref = load_cuda_reference(path, name, sig, target)
            else:
                raise TaskError(f"--reference {path}: a numpy reference (.py) or a CUDA kernel (.cu)")
    except ReferenceError as e:
        raise TaskError(f"--reference: {e}") from None
    if ref.kind == "numpy":
        if sig is None:
            raise TaskError("--signature is required with a numpy reference (e.g. "
                            "'vadd(const float* a, const float* b, float* c, int n)')")
        stub = stub_module_text(sig, target)
    else:
        sig = ref.signature
        try:
            stub = ref.stub_module_text()
        except ptx_ir.ParseError as e:
            raise TaskError(f"the reference kernel's header cannot be read: {e}") from None
    try:
        if spec:
            specs = [spec_from_option(spec, sig)]
        elif ref.kind == "cuda":
            specs = _cuda_specs(ref, notes)
            if not specs:
                s, note = default_spec(sig)
                specs = [s]
                notes.append(note)
        else:
            s, note = default_spec(sig)
            specs = [s]
            notes.append(note)
        for s in specs:
            check_fits(s, sig, names=ref.kind == "numpy")
    except SpecError as e:
        raise TaskError(f"launch spec: {e}") from None
    if ref.kind == "numpy":
        try:
            ref.check_parameters([p.name for p in specs[0].params])
        except ReferenceError as e:
            raise TaskError(f"--reference: {e}") from None
    return GenerationTask(description, sig, ref, specs, target, stub, notes)


def _cuda_specs(ref: CudaReference, notes: list) -> list:
    """The reference kernel's own specs: its ``// nvcc-plus:`` comment, else inference."""
    from superopt.specs.sources import find_spec
    from superopt.generate.reference import rename_entry
    original = rename_entry(ref.ptx, ref.kernel, ref.original_entry) if ref.kernel != ref.original_entry else ref.ptx
    module = ptx_ir.parse(original)
    specs, why = find_spec(module, ref.original_entry, source=ref.path, settings=None)
    if not specs:
        notes.append(f"the reference kernel has no launch spec ({why})")
        return []
    notes.append(f"launch spec from the reference kernel ({specs[0].origin or 'inferred'})")
    return [replace(s, kernel=ref.kernel) for s in specs]

