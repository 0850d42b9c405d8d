"""Dominators and post-dominators of a function's blocks (networkx does the work)."""
from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

_EXIT = "__exit__"


@dataclass
class Dominance:
    idom: dict            # block -> immediate dominator (entry maps to itself)
    ipdom: dict           # block -> immediate post-dominator, None when it is the exit

    def dominates(self, a, b) -> bool:
        """True when every path from the entry to ``b`` passes through ``a``."""
        return _walks_to(self.idom, b, a)

    def post_dominates(self, a, b) -> bool:
        """True when every path from ``b`` to the function's exit passes through ``a``."""
        return _walks_to(self.ipdom, b, a)


def _walks_to(tree: dict, start, target) -> bool:
    node = start
    seen = set()
    while node is not None and id(node) not in seen:
        if node is target:
            return True
        seen.add(id(node))
        parent = tree.get(node)
        if parent is node:
            return False
        node = parent
    return False


def compute_dominance(fn) -> Dominance:
    graph = fn.cfg
    entry = fn.entry_block
    idom = dict(nx.immediate_dominators(graph, entry))
    idom[entry] = entry   # networkx >= 3.5 leaves the start node out
    reverse = graph.reverse(copy=True)
    reverse.add_node(_EXIT)
    for block in graph.nodes:
        if graph.out_degree(block) == 0:
            reverse.add_edge(_EXIT, block)
    # Blocks in infinite loops never reach the exit: give them an edge so they have one.
    reachable = nx.descendants(reverse, _EXIT) | {_EXIT}
    for block in graph.nodes:
        if block not in reachable:
            reverse.add_edge(_EXIT, block)
            reachable |= nx.descendants(reverse, block) | {block}
    raw = nx.immediate_dominators(reverse, _EXIT)
    ipdom = {b: (None if p == _EXIT else p) for b, p in raw.items() if b != _EXIT}
    return Dominance(idom=idom, ipdom=ipdom)
