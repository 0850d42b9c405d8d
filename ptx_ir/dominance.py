"""Dominators and post-dominators of a function's blocks (networkx does the work)."""
from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

_EXIT = "__exit__"


@dataclass
class Dominance:
    idom: dict            # block -> immediate dominator (entry maps to itself)
    ipdom: dict           # block -> immediate post-dominator, None when it is the exit
    # (pre, post) numbers of each block in the dominator / post-dominator tree, made on the
    # first query: "a dominates b" is then one interval test instead of a walk up the tree
    # (a walk costs the tree's depth, which grows with the function: quadratic over all edges).
    _dom_numbers: dict | None = field(default=None, init=False, repr=False, compare=False)
    _pdom_numbers: dict | None = field(default=None, init=False, repr=False, compare=False)

    def dominates(self, a, b) -> bool:
        """True when every path from the entry to ``b`` passes through ``a``."""
        if self._dom_numbers is None:
            self._dom_numbers = _tree_numbers(self.idom)
        return _inside(self._dom_numbers, a, b)

    def post_dominates(self, a, b) -> bool:
        """True when every path from ``b`` to the function's exit passes through ``a``."""
        if self._pdom_numbers is None:
            self._pdom_numbers = _tree_numbers(self.ipdom)
        return _inside(self._pdom_numbers, a, b)


def _inside(numbers: dict, a, b) -> bool:
    if a is b:
        return True
    na, nb = numbers.get(a), numbers.get(b)
    if na is None or nb is None:
        return False
    return na[0] <= nb[0] and nb[1] <= na[1]


def _tree_numbers(tree: dict) -> dict:
    """(pre, post) DFS numbers of every node of a forest given as child -> parent (a root maps
    to itself or to None); a node is an ancestor of another iff its interval contains the
    other's. Iterative: the tree may be as deep as the function is long."""
    children: dict = {}
    roots = []
    for node, parent in tree.items():
        if parent is None or parent is node or parent not in tree:
            roots.append(node)
        else:
            children.setdefault(parent, []).append(node)
    numbers: dict = {}
    clock = 0
    for root in roots:
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                numbers[node] = (numbers[node], clock)
                clock += 1
                continue
            if node in numbers:          # a cycle in a malformed tree: count each node once
                continue
            numbers[node] = clock
            clock += 1
            stack.append((node, True))
            stack.extend((c, False) for c in children.get(node, ()))
    return numbers


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
