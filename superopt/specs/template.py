"""The fix for "not verifiable": a ``// nvcc-plus:`` comment and a ``[kernels."NAME"]`` table,
filled with what the IR does tell (parameter names from the source, which parameters are
buffers and which scalars, element types, which buffers the kernel writes, a required block
size), with the rest guessed and named as such, so a user edits three numbers instead of
learning the spec format from scratch.

Guesses: the block (256 unless the kernel declares ``.reqntid``/``.maxntid``), the size
(4096 for the first integer scalar), every buffer's length (that scalar) and the grid
(``cdiv(size, block)``). The comment parses as written (``tests/spec_inference/test_spec_template.py``
checks it), so pasting it unedited gives a spec; the guesses must still be checked against how
the program launches the kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field

GUESS_SIZE = 4096
GUESS_BLOCK = 256


@dataclass
class SpecTemplate:
    kernel: str                    # the PTX name
    name: str                      # the plain C++ name (the toml table's key)
    comment: str                   # one ``// nvcc-plus:`` line
    toml: str                      # a ``[kernels."NAME"]`` table
    guessed: list[str] = field(default_factory=list)     # what to check
    cannot: list[str] = field(default_factory=list)      # what the format cannot express
    toml_only: list[str] = field(default_factory=list)   # why only the toml table can (structs' bytes)

    def text(self) -> str:
        """The fix as shown to users: the comment, the table, what to check (or, when the
        spec format cannot describe the kernel, only that: a template that cannot work would
        send the user on a wrong errand)."""
        if self.cannot:
            return ("a launch spec cannot describe this kernel yet: " + "; ".join(self.cannot)
                    + ". Until it can, nvcc's code is kept for it.")
        if self.toml_only:
            lines = [f"To verify and optimize it, add to nvcc-plus.toml (a // nvcc-plus: comment cannot give "
                     f"{'; '.join(self.toml_only)}), or capture the program's own launch "
                     f"(superopt capture --data -- ./app):"]
        else:
            lines = ["To verify and optimize it, add above the kernel in the source:", f"  {self.comment}",
                     "or to nvcc-plus.toml:"]
        lines += ["  " + ln for ln in self.toml.rstrip().splitlines()]
        if self.guessed:
            lines.append("guessed, check against how the program launches it: " + "; ".join(self.guessed))
        return "\n".join(lines)


def _block(fn) -> tuple[list[int], bool]:
    """(block, guessed) from ``.reqntid``/``.maxntid``."""
    for want in (".reqntid", ".maxntid"):
        for d in fn.directives:
            if getattr(d, "name", None) == want:
                try:
                    dims = [int(str(a)) for a in d.args]
                except (TypeError, ValueError):
                    continue
                if dims:
                    return dims, False
    return [GUESS_BLOCK], True


def spec_template(module, kernel: str, source_text: str | None = None) -> SpecTemplate:
    from superopt.specs.facts import param_infos
    from superopt.specs.inference import _resolve, _short, _source_decl, _spec_names

    fn = _resolve(module, kernel)
    if fn is None:
        raise KeyError(f"no kernel {kernel!r} in the module")
    infos = param_infos(fn)
    decl = _source_decl(source_text, fn) if source_text else None
    names = _spec_names(infos, decl.params if decl else None)
    roles = fn.param_roles
    block, block_guessed = _block(fn)
    guessed: list[str] = []
    cannot: list[str] = []
    toml_only: list[str] = []

    size = next((n for n, p in zip(names, infos) if p.kind == "int"), None)
    length = size or str(GUESS_SIZE)
    items, params = [], []
    for i, (name, p) in enumerate(zip(names, infos)):
        if p.kind == "ptr":
            role = roles[i] if i < len(roles) else None
            if role is not None and (role.read or role.written):
                direction = role.role
            else:
                # Not proven from the IR: a const pointer is read, anything else may be
                # written (inout is always safe: the check compares every written byte).
                direction = "in" if "const" in (p.cxx or "") else "inout"
            elem = p.elem or "u8"
            if not p.elem:
                guessed.append(f"{name}'s element type (u8)")
            items.append(f"{name}:{elem}[{length}] {direction}")
            params.append({"name": name, "kind": "buffer", "type": elem, "length": length,
                           "direction": direction})
        elif p.kind == "struct" and p.size not in (1, 2, 4, 8):
            toml_only.append(f"the bytes of {name}, a {p.size}-byte struct passed by value")
            guessed.append(f"{name}'s bytes (zeros here: write the struct's little-endian bytes; a pointer field "
                           f"goes in pointers = {{\"OFFSET\" = \"BUFFER\"}}, BUFFER a buffer of the table with "
                           f"embedded = true)")
            items.append(f"{name}=0")
            params.append({"name": name, "kind": "bytes", "size": p.size, "hex": "00" * p.size})
        elif p.kind == "struct":
            items.append(f"{name}=0")
            guessed.append(f"{name}'s value (a {p.size}-byte struct as one integer, little-endian)")
            params.append({"name": name, "kind": "scalar", "type": p.scalar_type, "value": 0})
        elif p.kind == "float":
            items.append(f"{name}=1.5")
            params.append({"name": name, "kind": "scalar", "type": p.scalar_type, "value": 1.5})
        else:
            value = GUESS_SIZE if name == size else 1
            items.append(f"{name}={value}")
            params.append({"name": name, "kind": "scalar", "type": p.scalar_type, "value": value})
    if size:
        grid = f"cdiv({size},{block[0]})"
        guessed.append(f"{size}={GUESS_SIZE}, buffer lengths {size}, grid {grid}")
    else:
        grid = max(1, GUESS_SIZE // block[0])
        guessed.append(f"buffer lengths {GUESS_SIZE}, grid {grid}")
    if block_guessed:
        guessed.insert(0, f"block {block[0]}")
    block_text = "x".join(str(b) for b in block)
    comment = f"// nvcc-plus: grid={grid} block={block_text} " + " ".join(items)
    plain = _short(fn.signature) if fn.signature else fn.name
    toml = _toml_table(plain, [grid, 1, 1], (block + [1, 1])[:3], params)
    return SpecTemplate(kernel=fn.name, name=plain, comment=comment.rstrip(), toml=toml,
                        guessed=guessed, cannot=cannot, toml_only=toml_only)


def _toml_value(v) -> str:
    import json
    if isinstance(v, str):
        return json.dumps(v)            # a TOML basic string for these plain names and expressions
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def _toml_table(name: str, grid: list, block: list, params: list[dict]) -> str:
    """The compact form of docs/launch-specs.md: one inline table per parameter."""
    lines = [f"[kernels.{_toml_value(name)}]", f"grid = {_toml_value(grid)}", f"block = {_toml_value(block)}",
             "params = ["]
    for p in params:
        lines.append("  {" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in p.items()) + "},")
    lines.append("]")
    return "\n".join(lines) + "\n"
