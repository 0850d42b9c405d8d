"""Basic blocks and the control-flow graph of a function.

Blocks are split at labels and after control transfers. ``brx.idx`` successors come from
the ``.branchtargets`` directive its operand names. Calls do not end blocks. The graph is a
``networkx.DiGraph`` over :class:`BasicBlock` objects; edges carry ``kind``: ``fallthrough``,
``branch`` or ``switch``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from ptx_ir.errors import IRError
from ptx_ir.nodes import Directive, Instruction, Label, Sym


@dataclass(eq=False)
class BasicBlock:
    index: int
    labels: list[str] = field(default_factory=list)
    instructions: list[Instruction] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.labels[0] if self.labels else f"bb{self.index}"

    @property
    def terminator(self) -> Instruction | None:
        if self.instructions and self.instructions[-1].opcode in ("bra", "brx", "ret", "exit", "trap"):
            return self.instructions[-1]
        return None

    def __repr__(self) -> str:
        return f"<BasicBlock {self.name}: {len(self.instructions)} instructions>"

    def __hash__(self) -> int:
        return id(self)


@dataclass
class ControlFlow:
    blocks: list[BasicBlock]
    graph: nx.DiGraph
    entry: BasicBlock
    block_of: dict[int, BasicBlock]   # id(instruction) -> block


def branch_targets(body: list) -> dict[str, list[str]]:
    """``label -> [targets]`` for every ``label: .branchtargets a, b, c;`` in a body."""
    tables: dict[str, list[str]] = {}
    pending: list[str] = []
    for stmt in body:
        if isinstance(stmt, Label):
            pending.append(stmt.name)
            continue
        if isinstance(stmt, Directive) and stmt.name == ".branchtargets":
            targets = [str(a) for a in stmt.args if str(a) != ","]
            for name in pending:
                tables[name] = targets
        pending = []
    return tables


def build_cfg(fn) -> ControlFlow:
    if fn.body is None:
        raise IRError(f"{fn.name} is a declaration and has no control flow")
    blocks: list[BasicBlock] = []
    current = BasicBlock(0)
    blocks.append(current)
    for stmt in fn.body:
        if isinstance(stmt, Label):
            if current.instructions:
                current = BasicBlock(len(blocks))
                blocks.append(current)
            current.labels.append(stmt.name)
        elif isinstance(stmt, Instruction):
            current.instructions.append(stmt)
            if stmt.opcode in ("bra", "brx", "ret", "exit", "trap"):
                current = BasicBlock(len(blocks))
                blocks.append(current)
    if len(blocks) > 1 and not blocks[-1].instructions and not blocks[-1].labels:
        blocks.pop()

    by_label = {name: b for b in blocks for name in b.labels}
    tables = branch_targets(fn.body)
    graph = nx.DiGraph()
    graph.add_nodes_from(blocks)
    block_of: dict[int, BasicBlock] = {}
    for i, block in enumerate(blocks):
        for inst in block.instructions:
            block_of[id(inst)] = block
        term = block.terminator
        falls_through = term is None or term.guard is not None
        if term is not None and term.opcode == "bra":
            target = term.operands[0]
            if not isinstance(target, Sym) or target.name not in by_label:
                raise IRError(f"{fn.name}: branch to unknown label {target}")
            graph.add_edge(block, by_label[target.name], kind="branch")
        elif term is not None and term.opcode == "brx":
            table = term.operands[1] if len(term.operands) > 1 else None
            names = tables.get(str(table), [])
            if not names:
                raise IRError(f"{fn.name}: brx.idx uses unknown target table {table}")
            for name in names:
                if name not in by_label:
                    raise IRError(f"{fn.name}: branch table {table} names unknown label {name}")
                graph.add_edge(block, by_label[name], kind="switch")
            falls_through = term.guard is not None
        if falls_through and i + 1 < len(blocks):
            graph.add_edge(block, blocks[i + 1], kind="fallthrough")
    return ControlFlow(blocks, graph, blocks[0], block_of)
