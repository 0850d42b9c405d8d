"""Capture -> launch specs (origin ``captured``).

For a kernel of a parsed ``ptx_ir`` Module, :func:`specs_from_capture` turns the capture's
most time-consuming shape into a :class:`~superopt.specs.launch_spec.LaunchSpec` with the
real grid and block (ints), the real dynamic shared memory, every scalar at its captured
value (decoded by its PTX/C++ type) and every pointer as a buffer whose length is what the
allocation holds from the pointer on: ``(extent - offset) // element size``. A second, smaller
spec follows when the capture has another shape with the same block and less work (fewer
threads launched), for fast checks.

Beside them, :attr:`CapturedSpecs.weighted` holds every captured shape with at least
``WEIGHTED_SHARE`` (5%) of the kernel's GPU time, with that share: the rewrite to keep is timed
at each, weighed by it, and must not be slower at any (:mod:`superopt.search.launch_shapes`);
:attr:`CapturedSpecs.blocks` every block the program launched it with (a ``.maxntid`` must
let each of them launch).
"""
from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass, field

from superopt.specs.launch_spec import Buffer, Bytes, LaunchSpec, Scalar, SpecError, elem_type

from superopt.specs.data_roles import index_buffers, struct_field_types

from .format import MINOR_SHARE, kernel_share

__all__ = ["CaptureSpecError", "CapturedSpecs", "captured_specs", "specs_from_capture",
           "shape_to_spec", "read_only_params", "launch_table", "ORIGIN"]

ORIGIN = "captured"
WEIGHTED_SHARE = 0.05       # a captured shape with this share of the kernel's GPU time is timed


class CaptureSpecError(SpecError):
    """A captured kernel whose launch a LaunchSpec cannot express (the reason says why)."""


@dataclass
class CapturedSpecs:
    kernel: str                      # the PTX entry (mangled) name
    specs: list = field(default_factory=list)
    reason: str | None = None        # why there is no spec (not captured, not expressible)
    notes: list = field(default_factory=list)
    share: float | None = None       # fraction of the program's GPU time (None: not captured)
    captured: bool = False
    # (LaunchSpec, fraction of the kernel's GPU time) of every shape with >= WEIGHTED_SHARE, the
    # first spec's shape first
    weighted: list = field(default_factory=list)
    blocks: list = field(default_factory=list)       # every block of every captured shape
    # the kernel's entry of the capture as format.py describes it (shapes, counts, times), less
    # the data snapshots' file names; None when the captured run never launched it
    kernel_capture: dict | None = None

    @property
    def minor(self) -> bool:
        """The capture shows the kernel under 1% of GPU time (skipped by default)."""
        return self.share is not None and self.share < MINOR_SHARE


def _resolve(module, kernel: str):
    from superopt.specs.inference import _resolve as resolve
    return resolve(module, kernel)


def read_only_params(fn) -> set[int]:
    """Indices of pointer params the kernel provably never writes: no store or atomic to
    global/generic memory is relative to them, and every such store is relative to some
    other param (an unattributed store, or a call, could write anywhere)."""
    from ptx_ir import isa
    roles = fn.param_roles
    if any(i.opcode == "call" for i in fn.instructions):
        return set()
    names = {f"param:{p.name}" for p in fn.params}
    writers: set[str] = set()
    for a in fn.memory_accesses:
        if a.kind == "load" or a.space not in (".global", "generic"):
            continue
        if a.base is None or a.base not in names:
            return set()
        writers.add(a.base)
    # stores the access analysis does not model (e.g. red, st.async, cp.async.bulk to global)
    for inst in fn.instructions:
        if inst.opcode in ("red", "cp", "st", "atom") and isa.touches_memory(inst):
            if not any(a.inst is inst for a in fn.memory_accesses):
                return set()
    return {r.index for r in roles if f"param:{r.name}" not in writers and not r.written and not r.atomic}


def _struct_param(fn, info, p: dict, name: str, raw: bytes, notes: list | None):
    """A struct by value: a Bytes param with its captured bytes and, for each pointer field the
    capture found, an embedded buffer as long as the allocation holds from the pointer on
    (compared as an output: which fields the kernel writes through is not worked out)."""
    inner = p.get("inner") or []
    types = struct_field_types(fn) if inner else {}
    pointers, bufs = {}, []
    pname = fn.params[info.index].name
    for q in inner:
        at = int(q["at"])
        etype = types.get((pname, at))
        if etype is None:
            # the kernel's accesses through it could not be attributed (or there are none):
            # still a real allocation of the captured extent, its elements taken as bytes
            etype = "u8"
            if notes is not None:
                notes.append(f"{name}: the element type behind the pointer field at byte {at} is not known "
                             "from the kernel's accesses: given as bytes")
        try:
            esize = elem_type(etype).size
        except SpecError:
            etype, esize = "u8", 1
        avail = int(q["extent"]) - int(q["offset"])
        bname = f"{name}_{at}"
        pointers[at] = bname
        bufs.append(Buffer(name=bname, type=etype, length_expr=max(avail, 0) // esize, direction="inout",
                           embedded=True))
    return Bytes(name=name, size=len(raw), hex=raw.hex(), pointers=pointers), bufs


def _decode_scalar(info, raw: bytes, name: str):
    """(type, value) of a by-value param from its captured bytes."""
    if info.kind == "struct":
        if info.size in (1, 2, 4, 8) and len(raw) == info.size:
            t = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}[info.size]
            return t, int.from_bytes(raw, "little")
        raise CaptureSpecError(
            f"parameter {info.index} ({name}) is a {info.size}-byte struct passed by value: a LaunchSpec "
            "scalar holds at most 8 bytes (u8/u16/u32/u64), so its captured bytes cannot be given; "
            "needs a raw-bytes parameter kind in launch_spec (e.g. kind='bytes', hex='...')")
    t = info.scalar_type
    et = elem_type(t)
    if len(raw) < et.size:
        raise CaptureSpecError(f"parameter {info.index} ({name}): captured {len(raw)} bytes, its type {t} has {et.size}")
    b = raw[:et.size]
    if et.is_float:
        if t == "f32":
            return t, struct.unpack("<f", b)[0]
        if t == "f64":
            return t, struct.unpack("<d", b)[0]
        if t == "f16":
            return t, struct.unpack("<e", b)[0]
        return t, struct.unpack("<f", b"\0\0" + b)[0]          # bf16: the high half of an f32
    return t, int.from_bytes(b, "little", signed=et.kind == "int")


def shape_to_spec(fn, infos, names, shape: dict, read_only: set[int], notes: list | None = None) -> LaunchSpec:
    """One captured shape of ``fn`` as a LaunchSpec; CaptureSpecError when it cannot be one."""
    params = shape.get("params") or []
    if len(params) != len(infos):
        raise CaptureSpecError(f"the capture has {len(params)} parameters, the PTX entry {len(infos)}: "
                               "a different build of the kernel?")
    out = []
    embedded: list = []
    for info, p, name in zip(infos, params, names):
        ptx = fn.params[info.index]
        want = ptx.size or ptx.element_size
        if want and p["size"] != want:
            raise CaptureSpecError(f"parameter {info.index} ({name}): captured {p['size']} bytes, the PTX "
                                   f"declares {want}: a different build of the kernel?")
        hexb = p.get("bytes")
        if hexb is None:
            raise CaptureSpecError(f"parameter {info.index} ({name}): its bytes were not captured")
        raw = bytes.fromhex(hexb)
        ptr = p.get("pointer")
        if info.kind == "ptr":
            if ptr is None:
                v = int.from_bytes(raw, "little")
                what = "a null pointer" if v == 0 else f"{v:#x}, which is not in a device allocation (host or pinned memory?)"
                raise CaptureSpecError(f"parameter {info.index} ({name}) is a pointer and the program passed {what}; "
                                       "a LaunchSpec buffer cannot stand for it")
            etype = info.elem or "u8"
            esize = elem_type(etype).size
            avail = int(ptr["extent"]) - int(ptr["offset"])
            length = max(avail, 0) // esize
            if avail % esize and notes is not None:
                notes.append(f"{name}: {avail} bytes from the pointer to the end of its allocation are not "
                             f"a whole number of {etype}: {length} elements")
            if ptr.get("alias") is not None and notes is not None:
                notes.append(f"{name} points into the same allocation as parameter {ptr['alias']} "
                             "in the program; the spec gives it a buffer of its own")
            direction = "in" if info.index in read_only else "inout"
            out.append(Buffer(name=name, type=etype, length_expr=length, direction=direction))
        elif info.kind == "struct" and (info.size not in (1, 2, 4, 8) or p.get("inner")):
            b, inner_bufs = _struct_param(fn, info, p, name, raw, notes)
            out.append(b)
            embedded.extend(inner_bufs)
        else:
            if ptr is not None and notes is not None:
                notes.append(f"{name} is a {info.kind} by the kernel's signature but its value points into a "
                             "device allocation in the program; passed as the captured number")
            t, v = _decode_scalar(info, raw, name)
            if isinstance(v, float) and not math.isfinite(v) and notes is not None:
                notes.append(f"{name} = {v} in the program")
            out.append(Scalar(name=name, type=t, value=v))
    params = out + embedded
    snapshot = _snapshot_files(fn, infos, names, shape, params, notes)
    # buffers whose contents decide addresses or loop trips keep the program's data in every set
    by_ptx = {(fn.params[info.index].name, None): name for info, name in zip(infos, names)}
    by_ptx.update({(fn.params[info.index].name, off): f"{name}_{off}"
                   for info, name, p in zip(infos, names, out) if isinstance(p, Bytes) for off in p.pointers})
    index = {by_ptx[k] for k in index_buffers(fn) if k in by_ptx}
    index = {n for n in index if any(isinstance(q, Buffer) and q.name == n for q in params)}
    random_layout: tuple = ()
    if index:
        have = set((snapshot or {}).get("before", {}))
        for q in params:
            if isinstance(q, Buffer) and q.name in index and q.name in have:
                q.distribution = "snapshot"
        missing = [q.name for q in params if isinstance(q, Buffer) and q.name in index - have]
        random_layout = tuple(missing)
        if missing and notes is not None:
            notes.append(f"{', '.join(missing)}: the kernel's addresses or loop trips depend on their contents; "
                         "random contents may not be a valid input (capture with --data to check on the "
                         "program's own data)")
    return LaunchSpec(kernel=fn.name, grid=tuple(shape["grid"]), block=tuple(shape["block"]), params=params,
                      shared_bytes=int(shape.get("shared_bytes") or 0), vary_sizes=False, origin=ORIGIN,
                      snapshot=snapshot, random_layout=random_layout)


def _snapshot_files(fn, infos, names, shape: dict, params: list, notes: list | None) -> dict | None:
    """The shape's --data snapshot as {"before": {buffer: file}, "after": {buffer: file}}, for
    the buffers of ``params``; None without a complete snapshot."""
    snap = shape.get("snapshot") or {}
    if not snap.get("ok") or not snap.get("before"):
        if snap.get("skipped") and notes is not None:
            notes.append(f"no data snapshot: {snap['skipped']}")
        return None
    name_of = {}
    for info, name in zip(infos, names):
        name_of[(info.index, None)] = name
    bufs = {q.name: q for q in params if isinstance(q, Buffer)}
    out: dict = {"before": {}, "after": {}}
    for part in ("before", "after"):
        for e in snap.get(part) or []:
            at = e.get("at")
            name = name_of.get((int(e["param"]), None))
            if name is not None and at is not None:
                name = f"{name}_{int(at)}"
            b = bufs.get(name)
            if b is None or not os.path.isfile(str(e.get("path"))):
                continue
            if int(e.get("bytes", -1)) < b.length * b.elem.size:
                continue
            out[part][name] = str(e["path"])
    if set(out["before"]) != set(bufs):
        if notes is not None:
            notes.append("the data snapshot does not cover every buffer: not used")
        return None
    return out


def _work(shape: dict) -> tuple:
    threads = math.prod(shape["grid"]) * math.prod(shape["block"])
    buf = sum(int(p["pointer"]["extent"]) - int(p["pointer"]["offset"])
              for p in shape.get("params") or [] if p.get("pointer"))
    return (threads, buf)


def captured_specs(capture: dict, module, kernel: str) -> CapturedSpecs:
    """Specs for ``kernel`` (PTX name, signature or plain name) of ``module`` (a ptx_ir
    Module or PTX text) from ``capture``, with the reason when there are none."""
    import ptx_ir
    from superopt.specs.facts import param_infos
    from superopt.specs.inference import _spec_names
    if isinstance(module, str):
        module = ptx_ir.parse(module)
    fn = _resolve(module, kernel)
    if fn is None:
        return CapturedSpecs(kernel=kernel, reason=f"no kernel {kernel!r} in the module")
    res = CapturedSpecs(kernel=fn.name)
    k = (capture.get("kernels") or {}).get(fn.name)
    if k is None:
        res.reason = "the captured run never launched it"
        return res
    res.captured = True
    res.share = kernel_share(capture).get(fn.name)
    res.kernel_capture = launch_table(k)
    shapes = list(k.get("shapes") or [])
    if not shapes:
        res.reason = "the capture has its execution time but no launch (launched only from a CUDA graph?)"
        return res
    infos = param_infos(fn)
    names = _spec_names(infos, None)
    ro = read_only_params(fn)
    notes: list = []
    main = main_shape = None
    for i, s in enumerate(shapes):
        try:
            main = shape_to_spec(fn, infos, names, s, ro, notes)
            main_shape = s
            if i:
                notes.append(f"the {i} most time-consuming shape(s) could not be used; using shape {i}")
            break
        except CaptureSpecError as e:
            if res.reason is None:
                res.reason = str(e)
        except SpecError as e:
            if res.reason is None:
                res.reason = f"the captured launch is not a valid spec: {e}"
    if main is None:
        return res
    res.reason = None
    res.specs.append(main)
    smaller = sorted((s for s in shapes if s is not main_shape and tuple(s["block"]) == main.block
                      and _work(s) < _work(main_shape) and math.prod(s["grid"]) <= math.prod(main.grid)),
                     key=_work)
    for s in smaller:
        try:
            res.specs.append(shape_to_spec(fn, infos, names, s, ro))
            break
        except SpecError:
            continue
    if len(shapes) > 1:
        notes.append(f"{len(shapes)} shapes captured; spec from the one with {shapes[0]['total_ms']:.3f} ms "
                     f"of {k.get('total_ms', 0):.3f} ms")
    res.blocks = list(dict.fromkeys(tuple(int(b) for b in sh["block"]) for sh in shapes))
    res.weighted = _weighted(fn, infos, names, shapes, main, main_shape, ro, notes)
    res.notes = list(dict.fromkeys(notes))
    return res


def launch_table(k: dict) -> dict:
    """A captured kernel's launches without what only making a spec needs (the --data
    snapshots): what travels with the search to say where a candidate's fast body runs."""
    keep = ("grid", "block", "shared_bytes", "count", "timed", "total_ms", "params")
    out = {"launches": k.get("launches", 0), "total_ms": k.get("total_ms", 0.0),
           "shapes": [{f: s[f] for f in keep if f in s} for s in k.get("shapes") or []]}
    if k.get("untracked"):
        out["untracked"] = dict(k["untracked"])
    return out


def shape_shares(shapes: list[dict]) -> list[float]:
    """Each captured shape's fraction of the kernel's GPU time (of its launches when untimed)."""
    total = sum(float(sh.get("total_ms") or 0) for sh in shapes)
    if total > 0:
        return [float(sh.get("total_ms") or 0) / total for sh in shapes]
    count = sum(int(sh.get("count") or 0) for sh in shapes)
    return [int(sh.get("count") or 0) / count if count else 0.0 for sh in shapes]


def _weighted(fn, infos, names, shapes, main, main_shape, ro, notes) -> list:
    """(spec, share) of the main shape and of every other with >= WEIGHTED_SHARE of the kernel's
    time; a shape no spec can express is left out with a note."""
    shares = shape_shares(shapes)
    out = [(main, shares[shapes.index(main_shape)])]
    for sh, share in zip(shapes, shares):
        if sh is main_shape or share < WEIGHTED_SHARE:
            continue
        try:
            out.append((shape_to_spec(fn, infos, names, sh, ro), share))
        except SpecError as e:
            notes.append(f"a captured shape with {100 * share:.0f}% of the kernel's time (grid {sh['grid']}, "
                         f"block {sh['block']}) cannot be timed: {e}")
    return out


def specs_from_capture(capture: dict, module, kernel: str) -> list[LaunchSpec]:
    """Launch specs (origin ``captured``) for ``kernel`` from ``capture``: the most
    time-consuming shape first, then a smaller one of the same block when there is one.
    [] when the kernel is not in the capture; CaptureSpecError (a SpecError) with the reason
    when it is captured but no shape can be expressed as a LaunchSpec."""
    r = captured_specs(capture, module, kernel)
    if r.specs or not r.captured:
        return r.specs
    raise CaptureSpecError(f"{r.kernel}: {r.reason}")
