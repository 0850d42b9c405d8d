"""stage-loads: make a block's strided global loads coalesced by gathering them into shared
memory before the kernel's body runs.

The mirror of :mod:`superopt.passes.stage_stores`. The read-strided naive transpose
(``out[y*w + x] = in[x*h + y]``), NHWC->NCHW permutes and other column-wise readers load one
element per lane at addresses ``stride`` bytes apart: every lane of a warp touches its own
32-byte sector. This pass runs the kernel's body twice, for the block shape the program
launches (``block``, from the launch spec):

* PHASE A (addresses): a copy of the body (labels renamed) in which each of the K staged loads
  ``[g] ld.global.T d, [a]`` becomes ``[g]`` a write of ``a + 1`` (0 = "not loaded"; every
  slot is first set to 0 by its owner) into the thread's own slot of a shared address array
  (``d`` is set to 0), every global store is dropped and every exit jumps to the exchange.
* EXCHANGE: ``bar.sync 0``; each thread reads K address slots of *other* threads, chosen (the
  permutation of stage-stores) so that the 32 lanes of a warp read consecutive addresses, and
  for each non-zero one loads the element (``ld.global`` with the original modifiers) into the
  owner's slot of a shared value array; ``bar.sync 0``.
* PHASE B (the body): a second copy of the body in which each staged load becomes ``[g]
  ld.shared.T d, [own value slot]``; everything else, the stores included, runs as written.
  A staged load that can execute after one of the thread's own global stores compares its
  address with those stores' (recorded in registers as phase B performs them) and takes the
  latest stored value on a match (store-to-load forwarding): the original thread read its
  own store, the exchange read memory before it.
* A block-uniform test ``%ntid == block`` at entry runs nvcc's original code, kept as a copy,
  for any other block shape.

Why results stay the same (the argument the checks below make sound):
* Phase A computes what the original computes up to the loads' values: no branch, guard
  predicate or address depends (through the def-use graph, transitively) on a staged load's
  value, and nothing else reads global memory (every global load is staged; ``.param`` and
  ``.const`` are read-only, ``.local`` is refused). So phase A, phase B and the original take
  the same path and compute the same addresses: slot u is non-zero exactly when the original
  executed load u, and holds its address.
* The exchange performs each executed load exactly once (the permutation is a bijection of
  the K*T slots) from its own address with its own modifiers, and nothing else; phase B hands
  each load its own value. A 1-byte load from address 2^64 - 1 (which faults) would read as
  skipped.
* Within one thread, loads were only moved earlier, before the thread's stores: a load that
  follows one of its own stores and overlaps it takes the stored value (forwarding, exact
  because those stores are scalar, of the load's width and naturally aligned, so they
  overlap only when equal; for several, the latest in program order wins). Stores are
  performed as written, in program order.
* Between threads nothing was ordered before (no barrier, fence, atomic or shared memory):
  a load that reads another thread's store was a data race whose result the original does
  not define, so reading the value from before the block's stores is one allowed outcome.

What the pass proves from the IR (else it returns [] and leaves the kernel alone): the kernel
conditions of stage-stores (:func:`~superopt.passes._staging.kernel_eligibility`: an
acyclic ``.entry``, no shared memory, barrier, fence, atomic, call, trap, warp collective or
generic/ordered access, ``.reqntid``/``.maxntid`` consistent); no ``.local`` access; every
global load is a scalar ``ld.global`` (``.nc`` and cache operators allowed), of one 1-, 2-,
4- or 8-byte type and one modifier set, with a 64-bit register address that is affine in
``%tid``/``%ctaid``/``%nctaid`` and parameters, all K forms equal up to distinct constants,
``%tid.x`` coefficient not the element width (already coalesced), a dense run of at least one
32-byte sector (:func:`~superopt.passes._staging.dense_run`); the loaded values feed no
branch, guard or address (def-use taint); a global store that can precede a staged load is
scalar, of the load's width (4 or 8 bytes: a forwarded byte or half would need the load's
extension), with a 64-bit register address, and the load's destination has the load's size;
the staging arrays fit ``MAX_STAGE_BYTES``.
Assumed (as :mod:`ptx_ir.affine` does): 32-bit index arithmetic does not overflow (it only
matters for *choosing* the permutation; addresses are the owners' own).
"""
from __future__ import annotations

from ptx_ir import isa
from ptx_ir.dataflow import ENTRY
from ptx_ir.nodes import Addr, Guard, Imm, Instruction, Label, Reg, VarDecl, operand_registers, type_size
from superopt.passes import Change, register
from superopt.passes._loop_tools import I, bra, register_type
from superopt.passes._staging import (Emitter, StagingPlan, allowed_atoms, array_names, choose_padding,
                                      dense_run, forward_to_load, forwarding_registers,
                                      kernel_eligibility, permuted_slot, prologue, reaching_stores,
                                      remember_store, renamer, retarget, staging_arrays, u64_address,
                                      value_reg_type)

__all__ = ["stage_loads", "plan_load_staging"]

MAX_LOADS = 32
LOAD_MODIFIERS_OK = frozenset({".nc", ".ca", ".cg", ".cs", ".lu",
                               ".L1::evict_normal", ".L1::evict_unchanged", ".L1::evict_first",
                               ".L1::evict_last", ".L1::no_allocate",
                               ".L2::64B", ".L2::128B", ".L2::256B"})


def _reg_size(fn, name: str) -> int | None:
    t = register_type(fn, name)
    if t is None or t == ".pred":
        return None
    return type_size(t)


def plan_load_staging(fn, block) -> tuple[StagingPlan | None, str]:
    """The plan for ``fn`` launched with ``block`` (``plan.stores`` holds the staged *loads*;
    ``plan.forwards`` maps a staged load to the global stores that can precede it, in program
    order), or (None, why not)."""
    block, order, why = kernel_eligibility(fn, block)
    if block is None:
        return None, why
    loads: list[Instruction] = []
    stores: list[Instruction] = []
    for inst in order:
        if not isa.touches_memory(inst):
            continue
        if inst.space == ".local":
            return None, "local memory (a value could reach a branch through it)"
        if isa.is_store(inst):
            if inst.opcode != "st" or inst.space != ".global":
                return None, f"{inst.name} is not handled"
            stores.append(inst)
        elif inst.space == ".global" or inst.opcode != "ld":
            if inst.opcode != "ld" or inst.space != ".global":
                return None, f"{inst.name} is not handled"
            loads.append(inst)
    if not loads or len(loads) > MAX_LOADS:
        return None, "no global load" if not loads else "too many loads"
    first = loads[0]
    width = type_size(first.type) if first.type else 0
    if width not in (1, 2, 4, 8):
        return None, "load width is not 1, 2, 4 or 8 bytes"
    for ld in loads:
        if ld.modifiers != first.modifiers or ld.vector_width != 1:
            return None, "global loads differ in type or modifiers, or are vectors"
        if set(ld.modifiers) - {".global", first.type} - LOAD_MODIFIERS_OK:
            return None, f"{ld.name}: unexpected modifier"
        if not u64_address(fn, ld):
            return None, "a load address is not a 64-bit register"
        if not isinstance(ld.operands[0], Reg) or _reg_size(fn, ld.operands[0].name) is None:
            return None, "a load destination is not a plain register"
    accesses = {id(m.inst): m for m in fn.memory_accesses}
    forms = []
    for ld in loads:
        m = accesses.get(id(ld))
        if m is None or m.affine is None or not allowed_atoms(m.affine):
            return None, "a load address is not affine in the launch and parameters"
        forms.append(m.affine)
    unit_order, run, others, why = dense_run(forms, width, block)
    if unit_order is None:
        return None, why
    loads = [loads[i] for i in unit_order]
    why = _taint_check(fn, order, loads)
    if why:
        return None, why
    plan = StagingPlan(block, loads, width, run, others)
    why = choose_padding(plan)
    if why:
        return None, why
    # Staged loads that may follow one of the thread's own stores: forwarding.
    staged = {id(ld) for ld in loads}
    reach = reaching_stores(fn, order, stores)
    forwards = {}
    for ld, idx in reach.items():
        if id(ld) not in staged:
            continue
        if width < 4:
            return None, f"{ld.name} after a global store (a forwarded {width}-byte value needs the load's extension)"
        if _reg_size(fn, ld.operands[0].name) != width:
            return None, f"{ld.name}: destination wider than the load, after a store"
        for i in idx:
            st = stores[i]
            if st.vector_width != 1 or not st.type or type_size(st.type) != width:
                return None, f"{st.name} before a staged load has another width"
            if not u64_address(fn, st):
                return None, "a store before a staged load has no 64-bit register address"
        forwards[ld] = [stores[i] for i in sorted(idx, key=lambda i: order.index(stores[i]))]
    plan.forwards = forwards
    return plan, ""


def _taint_check(fn, order, loads) -> str:
    """'' when no branch, guard or address depends on a staged load's value, else why."""
    du = fn.def_use
    tainted = {id(ld) for ld in loads}
    for inst in order:            # topological: every reaching definition is seen first
        bad = set()
        for r in isa.uses(inst):
            if any(d != ENTRY and id(d) in tainted for d in du.definitions(inst, r.name)):
                bad.add(r.name)
        if not bad:
            continue
        if inst.guard is not None and inst.guard.reg.name in bad:
            return f"{inst.name}: a guard or branch depends on a loaded value"
        a = isa.address_operand(inst)
        if a is not None and {r.name for r in operand_registers(a)} & bad:
            return f"{inst.name}: an address depends on a loaded value"
        if inst.opcode in ("bra", "brx", "call"):
            return f"{inst.name}: control flow depends on a loaded value"
        tainted.add(id(inst))
    return ""


def stage_loads_rewrite(fn, plan: StagingPlan) -> list[Change]:
    width = plan.width
    vtype = value_reg_type(width)
    ltype = plan.stores[0].type
    lmods = plan.stores[0].modifiers
    k = len(plan.stores)
    vals, adrs = array_names(fn, "ldstage")
    orig_label = fn.new_label("ldstage_orig")
    exch_label = fn.new_label("ldstage_exchange")
    code = [s for s in fn.body if not isinstance(s, VarDecl)]
    taken = {s.name for s in fn.body if isinstance(s, Label)} | {orig_label, exch_label}
    rename_a = renamer(code, taken, "ldstage_a")
    rename_b = renamer(code, taken, "ldstage_b")

    # --- prologue: the block test, the thread's slots, address slots zeroed
    pro = Emitter(fn)
    slots = prologue(pro, plan, orig_label, vals, adrs)
    load_index = {id(s): i for i, s in enumerate(plan.stores)}

    # --- phase A: addresses only
    phase_a: list = []
    for s in code:
        if isinstance(s, Label):
            phase_a.append(Label(rename_a[s.name]))
            continue
        if not isinstance(s, Instruction):
            phase_a.append(s)
            continue
        if s.opcode == "bra":
            phase_a.append(retarget(s.copy(), rename_a))
            continue
        if s.opcode in ("ret", "exit"):
            phase_a.append(bra(exch_label, s.guard))
            continue
        if isa.is_store(s):                      # st.global only (plan): dropped
            continue
        i = load_index.get(id(s))
        if i is not None:
            em = Emitter(fn)
            g = s.guard
            a = isa.address_operand(s)
            ef = em.reg(".b64")
            dst = s.operands[0]
            em(I("add", ".s64", ef, a.base, (a.offset or 0) + 1, guard=g),
               I("st", ".shared.u64", Addr(slots.addr[i]), ef, guard=g),
               I("mov", f".b{8 * _reg_size(fn, dst.name)}", dst, 0, guard=g))
            phase_a.extend(em.out)
            continue
        phase_a.append(s.copy())

    # --- the exchange: each warp loads a run of consecutive addresses
    ex = Emitter(fn)
    ex(Label(exch_label), Instruction("bar", (".sync",), (Imm("0"),)))
    for u in range(k):
        sa, sv = permuted_slot(ex, plan, slots.lin, u, vals, adrs)
        a, v = ex.reg(".b64"), ex.reg(vtype)
        pf = ex.reg(".pred")
        ex(I("ld", ".shared.u64", a, Addr(sa)),
           I("setp", ".ne.b64", pf, a, 0),
           I("sub", ".s64", a, a, 1),
           Instruction("ld", lmods, (v, Addr(a)), Guard(pf)),
           I("st", f".shared{ltype}", Addr(sv), v, guard=Guard(pf)))
    ex(Instruction("bar", (".sync",), (Imm("0"),)))

    # --- phase B: the body, staged loads read the value slots, stores forwarded
    pb = Emitter(fn)
    fwd_stores = []
    for sts in plan.forwards.values():
        for st in sts:
            if all(st is not x for x in fwd_stores):
                fwd_stores.append(st)
    remembered = dict(zip((id(st) for st in fwd_stores),
                          forwarding_registers(pb, len(fwd_stores), vtype, slots.lin)))
    for s in code:
        if isinstance(s, Label):
            pb(Label(rename_b[s.name]))
            continue
        if not isinstance(s, Instruction):
            pb(s)
            continue
        if s.opcode == "bra":
            pb(retarget(s.copy(), rename_b))
            continue
        i = load_index.get(id(s))
        if i is not None:
            pb(I("ld", f".shared{ltype}", s.operands[0], Addr(slots.val[i]), guard=s.guard))
            sts = plan.forwards.get(s, [])
            if sts:           # program order: the latest match wins
                forward_to_load(pb, s, [remembered[id(st)] for st in sts], vtype)
            continue
        pb(s.copy())
        f = remembered.get(id(s))
        if f is not None:
            a = isa.address_operand(s)
            ea = pb.reg(".b64")
            pb(I("add", ".s64", ea, a.base, a.offset or 0, guard=s.guard))
            remember_store(pb, f, ea, s.operands[1], vtype, slots.lin, s.guard)

    decls = [s for s in fn.body if isinstance(s, VarDecl)]     # with the new registers
    fn.body = (decls + staging_arrays(plan, vals, adrs) + pro.out + phase_a + ex.out + pb.out
               + [Label(orig_label)] + code)
    fn.invalidate()
    fn.validate()
    run = " x ".join(f"{n}[{e}]" for n, e in plan.run)
    nfwd = sum(len(v) for v in plan.forwards.values())
    return [Change(f"stage-loads: {k} strided ld.global{ltype} per thread gathered through "
                   f"{plan.padded_slots * (width + 8)} bytes of shared memory for block "
                   f"{plan.block[0]}x{plan.block[1]}x{plan.block[2]}; each warp loads a run of "
                   f"{plan.run_length} consecutive elements ({run}); "
                   f"{nfwd} store/load pairs forwarded; other block shapes run nvcc's code",
                   plan.stores[0])]


@register(
    name="stage-loads",
    order=11,
    launch_params={"block": "timed_block"},
    summary="coalesce strided global loads (read-strided transposes, layout permutes) by "
            "gathering a block's elements through shared memory before the body runs",
    assumes=("block (from the launch spec) is the block the rewrite is specialised for; a runtime "
             "%ntid test runs the original code for any other. Proves from the IR: acyclic "
             "kernel without shared memory, barriers, atomics, fences, calls, local or generic "
             "accesses; every global load a scalar ld.global of one width with affine addresses "
             "equal up to constants; no branch, guard or address depends on a loaded value "
             "(def-use); stores that precede a staged load have its width (forwarded)"),
    params={},
)
def stage_loads(fn, *, block=None) -> list[Change]:
    plan, _why = plan_load_staging(fn, block)
    if plan is None:
        return []
    return stage_loads_rewrite(fn, plan)
