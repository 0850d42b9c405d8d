"""stage-stores: make a block's strided global stores coalesced by staging them in shared memory.

The naive matrix transpose (``out[x*h + y] = in[y*w + x]``), NCHW->NHWC permutes and other
column-wise writers store one element per lane at addresses ``stride`` bytes apart: every lane
of a warp touches its own 32-byte sector, and the store side runs at a fraction of bandwidth.
The classic cure stages the block's values in a shared-memory tile and lets each warp write a
contiguous run. This pass does it at the PTX level, for the block shape the program launches
(``block``, from the launch spec), without knowing the strides' values:

* Each of the kernel's K global stores ``[g] st.global.T [a], v`` becomes a write of ``v`` and
  of the address plus one (0 marks "no store": the owner skipped it) into the thread's own slot
  of two shared arrays; every slot is first set to 0 by its owner. For 2-, 4- and 8-byte stores
  the address is even, so ``a + 1`` is never 0; a 1-byte store to address 2^64 - 1 (which
  faults) would read as skipped.
* Every exit (``ret``/``exit``) becomes a jump to an epilogue: ``bar.sync 0``, then each thread
  reads K slots of *other* threads, chosen so that the 32 lanes of a warp hold consecutive
  addresses, and performs the flagged stores with the original store's modifiers.
* A load that can execute after one of the thread's own staged stores compares its address
  with those stores and takes the latest staged value on a match (store-to-load forwarding),
  so a thread still reads what it wrote itself (an output that aliases an input).
* A block-uniform test ``%ntid == block`` at entry runs the original code, kept as a copy,
  for any other block shape: the rewrite never depends on the launch being the spec's.

Which permutation: the stores' byte addresses are :class:`~ptx_ir.affine.Affine` forms that
share one form up to a constant per store. The thread coordinates whose coefficient is a
*constant* (and the store index, when the K constants form an arithmetic progression) make up
the "dense run" when, sorted by coefficient, they tile consecutive elements: ``w``,
``w*n1``, ``w*n1*n2`` ... (``w`` the element width). For the naive transpose (block 32x8, 4
stores 8 rows apart) ``%tid.y`` (coefficient 4, 8 values) and the store index (32, 4 values)
form a run of 32 elements = 128 bytes, while ``%tid.x`` has the symbolic coefficient ``4*h``.
Writer slot ``W = u*T + lane_linear`` takes run position ``W % L`` and the other coordinates
from ``W / L``: a warp writes one 128-byte line. The addresses themselves come from the
owners (staged), so the symbolic parts never need to be recomputed.

Why results stay the same (the argument the checks below make sound):
* Every executed store is performed exactly once, with its own address and value, by the
  permutation (a bijection of the K*T slots); a store that was skipped is not performed.
* Within one thread, stores were only moved later: no later load of that thread can miss
  its own store (forwarding, exact because all global accesses after a staged store have
  the store's width and are naturally aligned, so they overlap only when equal), and two of
  its stores never target one address (their address forms differ by non-zero constants),
  so the last-writer order among its own stores does not matter.
* Between threads nothing was ordered before (the kernel has no barrier, fence, atomic or
  shared memory), so any other interleaving of their stores was already a possible
  execution.

What the pass proves from the IR (else it returns [] and leaves the kernel alone):
  ``.entry``; no loops (acyclic CFG); no nested ``{ }`` scopes; no shared memory, barrier,
  fence, atomic/reduction, call, trap, warp-collective, texture/surface, async copy or
  generic (space-less) memory access; every global store is a plain scalar ``st.global``
  (cache operators allowed, no ordering or L2 hint) of one 1-, 2-, 4- or 8-byte width, with one
  modifier set, whose address is affine in ``%tid``/``%ctaid``/``%nctaid`` and parameters
  (no opaque registers), all K forms equal up to distinct constants; the ``%tid.x``
  coefficient is not already the element width (already coalesced: nothing to gain); a
  dense run of at least one 32-byte sector exists; global loads reachable from a staged
  store are scalar, of the stores' width, and there are none after 1- or 2-byte stores (the
  forwarded value would need the load's zero or sign extension); 64-bit addresses; the staging
  arrays stay within
  ``MAX_STAGE_BYTES``; no ``.reqntid``/``.maxntid`` that contradicts ``block``.
Assumed (stated, as :mod:`ptx_ir.affine` does): 32-bit index arithmetic does not overflow
(it only matters for *choosing* the permutation; addresses are the owners' own).
"""
from __future__ import annotations

from ptx_ir import isa
from ptx_ir.nodes import Addr, Guard, Imm, Instruction, Label, VarDecl, type_size
from superopt.passes import Change, register
from superopt.passes._loop_tools import I, bra
from superopt.passes._staging import (Emitter, StagingPlan, allowed_atoms, array_names, choose_padding,
                                      dense_run, forward_to_load, forwarding_registers,
                                      kernel_eligibility, permuted_slot, prologue, reaching_stores,
                                      remember_store, renamer, retarget, staging_arrays, u64_address,
                                      value_reg_type)

__all__ = ["stage_stores", "plan_staging"]

MAX_STORES = 32
STORE_CACHE_OPS = frozenset({".wb", ".cg", ".cs", ".wt"})
LOAD_SPACES_SAFE = frozenset({".param", ".const", ".local"})    # never written by st.global


def plan_staging(fn, block) -> tuple[StagingPlan | None, str]:
    """The staging plan for ``fn`` launched with ``block``, or (None, why not)."""
    block, order, why = kernel_eligibility(fn, block)
    if block is None:
        return None, why
    stores: list[Instruction] = []
    for inst in order:
        if isa.is_store(inst):
            if inst.space == ".local":
                continue
            if inst.opcode != "st" or inst.space != ".global":
                return None, f"{inst.name} is not handled"
            stores.append(inst)
    if not stores or len(stores) > MAX_STORES:
        return None, "no global store" if not stores else "too many stores"
    first = stores[0]
    width = type_size(first.type) if first.type else 0
    if width not in (1, 2, 4, 8):
        return None, "store width is not 1, 2, 4 or 8 bytes"
    for st in stores:
        if st.modifiers != first.modifiers or st.vector_width != 1:
            return None, "stores differ in type or modifiers, or are vectors"
        if set(st.modifiers) - {".global", first.type} - STORE_CACHE_OPS:
            return None, f"{st.name}: unexpected modifier"
        if not u64_address(fn, st):
            return None, "store address is not a 64-bit register"
    accesses = {id(m.inst): m for m in fn.memory_accesses}
    forms = []
    for st in stores:
        m = accesses.get(id(st))
        if m is None or m.affine is None or not allowed_atoms(m.affine):
            return None, "a store address is not affine in the launch and parameters"
        forms.append(m.affine)
    unit_order, run, others, why = dense_run(forms, width, block)
    if unit_order is None:
        return None, why
    stores = [stores[i] for i in unit_order]
    plan = StagingPlan(block, stores, width, run, others)
    why = choose_padding(plan)
    if why:
        return None, why
    # Loads that may follow a staged store: forwarding needs scalar loads of the store width.
    order_stores = sorted(range(len(stores)), key=lambda i: order.index(stores[i]))
    reach = reaching_stores(fn, order, stores)
    for ld, idx in reach.items():
        if ld.space in LOAD_SPACES_SAFE:
            continue
        if width < 4:
            # a forwarded byte or half would have to be extended as the load extends it
            return None, f"{ld.name} after a staged {width}-byte store"
        if ld.vector_width != 1 or not ld.type or type_size(ld.type) != width:
            return None, f"{ld.name} after a staged store has another width"
        if not u64_address(fn, ld):
            return None, "a load after a staged store has no 64-bit register address"
        reach[ld] = sorted(idx, key=order_stores.index)
    plan.forwards = {ld: idx for ld, idx in reach.items() if ld.space not in LOAD_SPACES_SAFE}
    return plan, ""


# --------------------------------------------------------------------------- code generation

def stage_stores_rewrite(fn, plan: StagingPlan) -> list[Change]:
    width = plan.width
    vtype = value_reg_type(width)
    stype = plan.stores[0].type
    k = len(plan.stores)
    vals, adrs = array_names(fn, "stage")
    orig_label = fn.new_label("stage_orig")
    epi_label = fn.new_label("stage_epilogue")
    code = [s for s in fn.body if not isinstance(s, VarDecl)]
    taken = {s.name for s in fn.body if isinstance(s, Label)} | {orig_label, epi_label}
    rename = renamer(code, taken, "stage")

    pro = Emitter(fn)
    slots = prologue(pro, plan, orig_label, vals, adrs)
    fwd_needed = sorted({i for idx in plan.forwards.values() for i in idx})
    remembered = dict(zip(fwd_needed, forwarding_registers(pro, len(fwd_needed), vtype, slots.lin)))

    # --- the staged copy: labels renamed, exits to the epilogue, stores staged, loads forwarded
    store_index = {id(s): i for i, s in enumerate(plan.stores)}
    staged: list = []
    for s in code:
        if isinstance(s, Label):
            staged.append(Label(rename[s.name]))
            continue
        if not isinstance(s, Instruction):
            staged.append(s)
            continue
        if s.opcode == "bra":
            staged.append(retarget(s.copy(), rename))
            continue
        if s.opcode in ("ret", "exit"):
            staged.append(bra(epi_label, s.guard))
            continue
        i = store_index.get(id(s))
        if i is not None:
            em = Emitter(fn)
            g = s.guard
            a = isa.address_operand(s)
            ea, ef = em.reg(".b64"), em.reg(".b64")
            em(I("add", ".s64", ea, a.base, a.offset or 0, guard=g),
               I("add", ".s64", ef, ea, 1, guard=g),
               I("st", ".shared.u64", Addr(slots.addr[i]), ef, guard=g),
               I("st", f".shared{stype}", Addr(slots.val[i]), s.operands[1], guard=g))
            if i in remembered:
                remember_store(em, remembered[i], ea, s.operands[1], vtype, slots.lin, g)
            staged.extend(em.out)
            continue
        staged.append(s.copy())
        if s in plan.forwards:
            em = Emitter(fn)
            forward_to_load(em, s, [remembered[j] for j in plan.forwards[s]], vtype)
            staged.extend(em.out)

    # --- the epilogue: barrier, then the permuted stores
    epi = Emitter(fn)
    epi(Label(epi_label), Instruction("bar", (".sync",), (Imm("0"),)))
    smods = plan.stores[0].modifiers
    for u in range(k):
        sa, sv = permuted_slot(epi, plan, slots.lin, u, vals, adrs)
        a, v = epi.reg(".b64"), epi.reg(vtype)
        pf = epi.reg(".pred")
        epi(I("ld", ".shared.u64", a, Addr(sa)),
            I("setp", ".ne.b64", pf, a, 0),
            I("sub", ".s64", a, a, 1),
            I("ld", f".shared{stype}", v, Addr(sv), guard=Guard(pf)),
            Instruction("st", smods, (Addr(a), v), Guard(pf)))
    epi(Instruction("ret", (), ()))

    decls = [s for s in fn.body if isinstance(s, VarDecl)]     # with the new registers
    fn.body = (decls + staging_arrays(plan, vals, adrs) + pro.out + staged + epi.out
               + [Label(orig_label)] + code)
    fn.invalidate()
    fn.validate()
    run = " x ".join(f"{n}[{e}]" for n, e in plan.run)
    return [Change(f"stage-stores: {k} strided st.global{stype} per thread staged through "
                   f"{plan.padded_slots * (width + 8)} bytes of shared memory for block "
                   f"{plan.block[0]}x{plan.block[1]}x{plan.block[2]}; each warp writes a run of "
                   f"{plan.run_length} consecutive elements ({run}); "
                   f"{sum(len(v) for v in plan.forwards.values())} load/store pairs forwarded; "
                   f"other block shapes run nvcc's code", plan.stores[0])]


@register(
    name="stage-stores",
    order=10,
    launch_params={"block": "timed_block"},
    summary="coalesce strided global stores (naive transposes, layout permutes) by staging a "
            "block's values through shared memory",
    assumes=("block (from the launch spec) is the block the rewrite is specialised for; a runtime "
             "%ntid test runs the original code for any other. Proves from the IR: acyclic "
             "kernel without shared memory, barriers, atomics, fences, calls or generic "
             "accesses; scalar 4/8-byte st.global with affine addresses equal up to constants; "
             "loads after a staged store of the same width (forwarded)"),
    params={},
)
def stage_stores(fn, *, block=None) -> list[Change]:
    plan, _why = plan_staging(fn, block)
    if plan is None:
        return []
    return stage_stores_rewrite(fn, plan)
