"""Which launch specs a kernel is judged with, from which source, in order of trust.

1. **captured** — the program's real launches (``superopt capture``, handed over as
   ``NVCC_PLUS_CAPTURE=FILE`` or ``capture = "FILE"`` in nvcc-plus.toml): the real grid and
   block, the real sizes (the most time-consuming shape first) and a smaller captured shape
   for fast checks when there is one. Kernels the capture shows under 1% of the program's
   GPU time are not searched (``search_minor = true`` searches them too).
2. **explicit** — a ``[kernels."NAME"]`` table in nvcc-plus.toml or a ``// nvcc-plus:``
   comment (the user's launch contract).
3. **inferred** — from the IR (:mod:`superopt.specs.inference`).

Captured specs have fixed sizes (what the program ran); where inference also finds specs,
they are appended after the captured ones, so that the check also sees the small sizes,
tails and residues that inference proves safe, while timing uses the real size. A source
whose first spec makes nvcc's own code impossible to judge (not deterministic, faults) is
reported and the next source is tried: :func:`candidates_in_order` gives the choices, the
optimizer asks the judge which one works.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field

from superopt.config.resolved import Settings
from superopt.specs.capture.format import MINOR_SHARE, CaptureError, load_capture

CAPTURE_ENV = "NVCC_PLUS_CAPTURE"
INFERENCE_CAP_S = 10.0      # spec inference per kernel (a hard stop inside the tracer)


@dataclass
class SpecChoice:
    specs: list                      # LaunchSpecs, the first one is the size that is timed
    origin: str                      # "captured", "toml:...", "comment", "inferred"
    notes: list = field(default_factory=list)
    # the other launches the program may make, for timing the rewrite to keep there
    # (superopt.specs.program_launches); None: what the specs alone say
    launches: object = None

    @property
    def key(self) -> str:
        """Identity of the specs, for decision keys of captured specs (see optimize)."""
        return specs_key(self.specs)


def specs_key(specs: list) -> str:
    """Identity of the captured specs among ``specs`` (the program's real launches; the
    inferred shapes beside them are not part of it, so a stored decision is found without
    running inference)."""
    captured = [s.to_dict() for s in specs if s.origin == "captured"] or [s.to_dict() for s in specs]
    text = json.dumps(captured, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class SpecSources:
    kernel: str
    choices: list[SpecChoice] = field(default_factory=list)
    reason: str | None = None        # why there is no choice at all
    share: float | None = None       # fraction of the program's GPU time (captures)
    skip: str | None = None          # a reason not to search this kernel (minor in the capture)
    notes: list = field(default_factory=list)


_CAPTURES: dict = {}


def capture_path(settings: Settings | None) -> str | None:
    """The capture file NVCC_PLUS_CAPTURE / ``capture`` names (a path in nvcc-plus.toml is
    relative to the file's folder)."""
    settings = settings or Settings()
    path = settings.text(CAPTURE_ENV)
    if not path:
        return None
    from_file = settings.config_path and settings.origin(CAPTURE_ENV) == settings.config_path
    if not os.path.isabs(path) and from_file:
        path = os.path.join(os.path.dirname(settings.config_path), path)
    return str(path)


def load_configured_capture(settings: Settings | None) -> dict | None:
    """The capture named by NVCC_PLUS_CAPTURE / ``capture``, loaded once per process;
    CaptureError (naming the file) when it cannot be read."""
    path = capture_path(settings)
    if path is None:
        return None
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError as exc:
        raise CaptureError(f"{path}: cannot read the capture ({exc.strerror}); "
                           f"run `superopt capture -o {path} -- PROGRAM` or unset {CAPTURE_ENV}") from None
    key = (os.path.abspath(path), stamp)
    if key not in _CAPTURES:
        _CAPTURES.clear()
        _CAPTURES[key] = load_capture(path)
    return _CAPTURES[key]


def candidates_in_order(module, kernel: str, *, source: str | None, settings: Settings | None,
                        capture: dict | None, search_minor: bool = False,
                        min_share: float = MINOR_SHARE, deadline: float | None = None,
                        unit: str | None = None) -> SpecSources:
    """The kernel's spec choices in order of trust (the module doc). ``unit``: the path of the
    translation unit as nvcc preprocessed it, whose launches respect the build's -D and #if."""
    out = SpecSources(kernel)
    inferred, why_not = explicit_or_inferred(module, kernel, source=source, settings=settings, deadline=deadline,
                                             unit=unit)
    if capture is not None:
        from superopt.specs.capture.specs import captured_specs
        cs = captured_specs(capture, module, kernel)
        out.share = cs.share
        out.notes += cs.notes
        if cs.captured and cs.share is not None and cs.share < min_share and not search_minor:
            out.skip = (f"{100 * cs.share:.2f}% of the program's GPU time in the capture "
                        f"(under {100 * min_share:g}%): not searched")
        if cs.specs:
            extra = list(inferred.specs) if inferred is not None and inferred.origin == "inferred" else []
            moved = reblocked(extra, list(cs.specs))
            notes = [f"+ {len(extra) + len(moved)} inferred shape(s) for small sizes"
                     + (f" ({len(moved)} at the captured block)" if moved else "")] if extra else []
            from superopt.specs.program_launches import from_capture
            out.choices.append(SpecChoice(list(cs.specs) + moved + extra, "captured", notes,
                                          launches=from_capture(cs)))
        elif cs.captured and cs.reason:
            out.notes.append(f"captured launches not usable: {cs.reason}")
        elif not cs.captured:
            out.notes.append("not launched in the capture")
    if inferred is not None:
        out.choices.append(inferred)
    elif not out.choices:
        out.reason = why_not
    return out


def reblocked(inferred: list, captured: list) -> list:
    """Inferred shapes moved to the program's real block: inference guesses the block (from a
    list of usual sizes), the capture knows it. An inferred shape whose grid formula, evaluated
    at the captured scalars, gives the captured grid describes the same launch family; with the
    captured block (and dynamic shared memory) it is a small launch of the program's own kind,
    which a check can afford on every candidate. Shapes on which nvcc's own code still cannot be
    judged are dropped by the search (:func:`superopt.search.loop._screen_extra_shapes`)."""
    from dataclasses import replace
    from superopt.specs.launch_spec import Scalar
    if not inferred or not captured:
        return []
    cap = captured[0]
    block = tuple(int(b) for b in cap.block)
    if any(tuple(s.block) == block for s in inferred):
        return []
    want_grid = tuple(int(g) for g in cap.grid)
    out, seen = [], set()
    for s in inferred:
        mine, theirs = s.kernel_params, cap.kernel_params
        if len(mine) != len(theirs):
            continue
        over = {a.name: b.value for a, b in zip(mine, theirs) if isinstance(a, Scalar) and isinstance(b, Scalar)}
        try:
            if tuple(s.resolved(over).grid) != want_grid:
                continue
        except Exception:  # noqa: BLE001 - a formula that does not evaluate there is not this family
            continue
        moved = replace(s, block=block, shared_bytes=int(cap.shared_bytes))
        key = json.dumps(moved.to_dict(), sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(moved)
    return out


_KERNELS: list = [None, None]          # [the module, {kernel name: Function}]


def _kernel_named(module, name: str):
    """The kernel ``name`` of ``module``: an index built once per module (``module.kernels``
    is a new list on every access, and a lookup per kernel made a 20,000-kernel module
    quadratic)."""
    if _KERNELS[0] is not module or name not in _KERNELS[1]:
        _KERNELS[:] = [module, {k.name: k for k in module.kernels}]
    return _KERNELS[1].get(name)


_SOURCES: dict = {}


def source_text_of(source: str | None) -> str | None:
    """The text of the .cu ``source`` (undecodable bytes replaced), or None when there is no
    such regular file (a FIFO or device is never read; at most ``INPUT_LIMIT`` bytes).

    Read once per module, not once per kernel: the same file is asked for by every kernel,
    and handing out the same string lets the per-text scans of :mod:`superopt.specs.comments`
    find their cached result without comparing megabytes."""
    if not source:
        return None
    try:
        st = os.stat(source)
    except (OSError, ValueError):
        return None
    key = (os.path.abspath(source), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _SOURCES:
        from superopt.store.safe_files import INPUT_LIMIT, read_text
        try:
            text = read_text(source, INPUT_LIMIT, follow=True, errors="replace")
        except OSError:
            text = None
        _SOURCES.clear()                      # one module's source at a time
        _SOURCES[key] = text
    return _SOURCES[key]


def explicit_or_inferred(module, kernel: str, *, source: str | None, settings: Settings | None,
                         deadline: float | None = None, unit: str | None = None) -> tuple[SpecChoice | None, str | None]:
    """The kernel's explicit specs (toml table, source comment), else the inferred ones; or
    None and why not. ``deadline``: inference stops by then (it is capped anyway). ``unit``: the
    preprocessed translation unit's path; the launches inference starts from are read from it
    (superopt.specs.source_launches.unit_launch_text), else from the source's text."""
    from superopt.specs import inference
    from superopt.specs.source_launches import unit_launch_text
    source_text = source_text_of(source)
    cap = INFERENCE_CAP_S
    if deadline is not None:
        cap = max(0.5, min(cap, float(deadline) - time.time()))
    result = inference.infer_specs(module, kernel, source_text=source_text, config=_document(settings),
                                   deadline_s=cap, launch_text=unit_launch_text(unit))
    specs = getattr(result, "specs", None)
    if specs:
        from superopt.specs.program_launches import ProgramLaunches, from_inference
        origin = getattr(result, "origin", None) or "inferred"
        launches = from_inference(result) if origin == "inferred" else ProgramLaunches("explicit", runtime=False)
        return SpecChoice(list(specs), origin, list(getattr(result, "notes", []) or []), launches=launches), None
    return None, getattr(result, "reason", None) or "no launch spec"


def find_spec(module, kernel: str, *, source: str | None, settings: Settings | None) -> tuple[list | None, str]:
    """The launch specs for ``kernel`` (a list: one per launch shape): explicit (toml, source
    comment) or inferred, and where they came from; None and the reason if neither."""
    choice, why_not = explicit_or_inferred(module, kernel, source=source, settings=settings)
    return (list(choice.specs), choice.origin) if choice else (None, why_not)


def _document(settings: Settings | None) -> dict:
    return settings.spec_document() if settings is not None else {}


def explicit_specs_key(module, kernel: str, *, source: str | None, settings: Settings | None,
                       problems: list | None = None) -> str | None:
    """Identity of the user's explicit launch specs for ``kernel`` (its ``[kernels."NAME"]``
    table in nvcc-plus.toml, or its ``// nvcc-plus:`` comment), or None when it has none.

    Part of the decision cache key: a decision verified with one spec must not be reused
    after the user changes the spec (a corrected buffer length, another block). Inferred
    specs need no such key: they are a function of the kernel text, which is in the key.
    Cheap: parses the table or the comment, never runs inference. ``problems``: a line is
    appended for a table that is incomplete or invalid (:func:`table_problem`)."""
    from superopt.specs import inference
    from superopt.specs.comments import directives_of
    fn = _kernel_named(module, kernel)
    if fn is None:
        return None
    parts = []
    doc = _document(settings)
    try:
        found = inference.explicit_specs(doc, fn)
    except Exception as exc:  # noqa: BLE001 - an invalid table: in the key, and said (problems)
        found = None
        parts.append(f"invalid toml spec: {exc}")
        if problems is not None:
            problems.append(table_problem(doc, fn, str(exc), IGNORED))
    if found and problems is not None:
        misfit = _param_count_problem(found[0], fn)
        if misfit:
            problems.append(table_problem(doc, fn, misfit, NOT_VERIFIABLE))
    if found:
        parts.append(json.dumps([s.to_dict() for s in found[0]], sort_keys=True, default=str))
    text = source_text_of(source)
    if text:
        decl = inference._source_decl(text, fn)
        if decl is not None:
            parts += directives_of(text, decl.name)
    if not parts:
        return None
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _param_count_problem(specs: list, fn) -> str | None:
    """A table whose params do not match the kernel's in number (``params`` left out, one too
    few): found without the analyses inference needs."""
    for spec in specs:
        n, want = len(spec.kernel_params), len(fn.params)
        if n != want:
            missing = " (missing 'params')" if n == 0 else ""
            return f"it gives {n} params{missing}, the kernel has {want}"
    return None


# What the search does with such a table (superopt.specs.inference.infer_specs): one that does not
# parse is skipped (the comment, then inference, give the spec); one that parses but does not fit
# the kernel is its spec, and the kernel is not verifiable.
IGNORED = "the table is not used: the kernel's spec comes from its // nvcc-plus: comment or inference"
NOT_VERIFIABLE = "the kernel is not verifiable until it is fixed (nvcc's code is kept)"


def table_problem(doc: dict, fn, what: str, instead: str) -> str:
    """The line a build says (once: nvcc_plus.once) for a ``[kernels."NAME"]`` table that is
    incomplete or invalid: the file, the kernel, what is wrong, what nvcc-plus does instead."""
    from superopt.specs.inference import explicit_table
    found = explicit_table(doc, fn)
    name = found[0] if found else fn.name
    where = doc.get("config_path") or "nvcc-plus.toml"
    what = what.removeprefix(f'[kernels."{name}"]: ')
    return (f'{where}: [kernels."{name}"] for kernel {fn.signature or fn.name}: {what}; {instead} '
            f"(docs/launch-specs.md)")
