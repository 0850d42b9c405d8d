"""Def-use chains over registers and memory-order edges, as one networkx graph.

Reaching definitions are solved over the CFG with Python ints as bit sets. A guarded
definition (``@%p mov ...``) does not kill earlier ones: the old value may survive.

The graph (``fn.dataflow``) is a ``networkx.MultiDiGraph`` whose nodes are instructions plus
the string node ``"entry"``: registers read before any definition get an edge from it. Edges carry ``kind``: ``data`` (with ``reg``) or
``memory`` (an order that a rewrite must keep: store→load, load→store, store→store in
spaces that may alias, and everything against barriers/fences/calls within a block).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ptx_ir import isa
from ptx_ir.nodes import Instruction

if TYPE_CHECKING:
    import networkx as nx

ENTRY = "entry"


@dataclass
class DefUse:
    graph: nx.MultiDiGraph
    # id(use instruction) -> {reg name: [defining instructions]} ("entry" when undefined)
    reaching: dict
    defs_of: dict                      # reg name -> [defining instructions]

    def definitions(self, inst: Instruction, reg: str) -> list:
        """Instructions whose write of ``reg`` may reach ``inst`` (``"entry"`` if none)."""
        return self.reaching.get(id(inst), {}).get(reg, [])

    def users(self, inst: Instruction) -> list[Instruction]:
        return [v for _, v, d in self.graph.out_edges(inst, data=True) if d["kind"] == "data"]


def build_dataflow(fn) -> DefUse:
    import networkx as nx   # here, not at import: passes that only need ENTRY stay light
    blocks = fn.blocks
    graph_cfg = fn.cfg
    # Number every definition.
    def_list: list[tuple[Instruction, str]] = []
    defs_of: dict[str, list[Instruction]] = {}
    bits_of_reg: dict[str, int] = {}
    for block in blocks:
        for inst in block.instructions:
            for reg in isa.defs(inst):
                idx = len(def_list)
                def_list.append((inst, reg.name))
                defs_of.setdefault(reg.name, []).append(inst)
                bits_of_reg[reg.name] = bits_of_reg.get(reg.name, 0) | (1 << idx)
    gen: dict = {}
    kill: dict = {}
    idx = 0
    for block in blocks:
        g = 0
        k = 0
        for inst in block.instructions:
            for reg in isa.defs(inst):
                bit = 1 << idx
                if inst.guard is None:
                    all_bits = bits_of_reg[reg.name]
                    g &= ~all_bits
                    k |= all_bits
                g |= bit
                idx += 1
        gen[block] = g
        kill[block] = k
    in_sets = {b: 0 for b in blocks}
    out_sets = {b: gen[b] for b in blocks}
    order = list(nx.dfs_preorder_nodes(graph_cfg, fn.entry_block))
    order += [b for b in blocks if b not in set(order)]
    changed = True
    while changed:
        changed = False
        for block in order:
            new_in = 0
            for pred in graph_cfg.predecessors(block):
                new_in |= out_sets[pred]
            new_out = gen[block] | (new_in & ~kill[block])
            in_sets[block] = new_in
            if new_out != out_sets[block]:
                out_sets[block] = new_out
                changed = True

    graph = nx.MultiDiGraph()
    graph.add_node(ENTRY)
    reaching: dict = {}
    idx = 0
    for block in blocks:
        live = in_sets[block]
        for inst in block.instructions:
            graph.add_node(inst)
            rmap = {}
            for reg in isa.uses(inst):
                if reg.is_special or reg.name in rmap:
                    continue
                mask = live & bits_of_reg.get(reg.name, 0)
                sources = []
                while mask:
                    low = mask & -mask
                    sources.append(def_list[low.bit_length() - 1][0])
                    mask ^= low
                if not sources:
                    sources = [ENTRY]
                rmap[reg.name] = sources
                for src in sources:
                    graph.add_edge(src, inst, kind="data", reg=reg.name)
            reaching[id(inst)] = rmap
            for reg in isa.defs(inst):
                if inst.guard is None:
                    live &= ~bits_of_reg[reg.name]
                live |= 1 << idx
                idx += 1
    _add_memory_order(blocks, graph)
    return DefUse(graph=graph, reaching=reaching, defs_of=defs_of)


def _may_alias(a: Instruction, b: Instruction) -> bool:
    sa, sb = a.space, b.space
    if sa is None or sb is None:       # generic addressing may reach any window
        return True
    sa, sb = sa.split("::")[0], sb.split("::")[0]
    return sa == sb


def _add_memory_order(blocks, graph: nx.MultiDiGraph) -> None:
    """Order memory accesses within each block; blocks themselves are ordered by the CFG."""
    for block in blocks:
        seen: list[Instruction] = []
        for inst in block.instructions:
            if isa.is_fence(inst):
                for prev in seen:
                    graph.add_edge(prev, inst, kind="memory")
                seen = [inst]
                continue
            if not isa.touches_memory(inst):
                continue
            writes = isa.is_store(inst)
            for prev in seen:
                if isa.is_fence(prev):
                    graph.add_edge(prev, inst, kind="memory")
                elif (writes or isa.is_store(prev)) and _may_alias(prev, inst):
                    graph.add_edge(prev, inst, kind="memory")
            seen.append(inst)
