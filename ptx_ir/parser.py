"""Recursive-descent parser from PTX text to :mod:`ptx_ir.nodes`.

Every failure is a :class:`ptx_ir.errors.ParseError` with line, column and token; the
top-level :func:`parse` converts any unexpected internal exception into one as well, so
callers only ever need to catch ``ParseError``.
"""
from __future__ import annotations

from ptx_ir.errors import ParseError
from ptx_ir.lexer import SourceMap, scan
from ptx_ir.nodes import (
    Addr, BinExpr, Brace, CallExpr, DataLine, Directive, Function, Guard, Imm, Instruction,
    Label, Module, Neg, Pair, Paren, Reg, STATE_SPACES, ScopeClose, ScopeOpen, Section, Sink,
    Sym, TYPE_NAMES, VECTOR_WIDTHS, VarDecl, Vec,
)
from ptx_ir.opcodes import OPCODES

LINKAGES = frozenset({".visible", ".extern", ".weak", ".common"})
DECL_SPACES = frozenset({".global", ".const", ".shared", ".local", ".param", ".reg", ".tex"})
OPAQUE_TYPES = frozenset({".texref", ".samplerref", ".surfref"})
# Directives between a function's header and its body, with numeric arguments.
PERF_DIRECTIVES = frozenset({".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm",
                             ".maxnreg", ".maxclusterrank", ".reqnctapercluster"})
FLAG_DIRECTIVES = frozenset({".noreturn", ".explicitcluster", ".blocksareclusters"})
# Body directives ending with ';' whose arguments are kept as tokens.
BODY_DIRECTIVES = frozenset({".pragma", ".callprototype", ".branchtargets", ".calltargets"})
DATA_TYPES = frozenset({".b8", ".b16", ".b32", ".b64"})
SPECIAL_COMPONENTS = frozenset({".x", ".y", ".z", ".w"})


class Parser:
    def __init__(self, text: str):
        self.text = text
        self.fragment = False          # accept a text without .version (see parse)
        self._src: SourceMap | None = None
        self.toks, self.nl, self.lines = scan(text)   # lines: for emit(keep_lines=True)
        self.i = 0
        self.reg_names: set[str] = set()
        self.interned: dict[str, Reg] = {}    # operands are immutable: share equal registers

    # ------------------------------------------------------------------ helpers
    @property
    def src(self) -> SourceMap:
        if self._src is None:
            self._src = SourceMap(self.text)
        return self._src

    def error(self, message: str, tok=None) -> ParseError:
        tok = tok or self.toks[self.i]
        return self.src.error(message, tok[2], tok[1] if tok[0] != "EOF" else "end of input")

    def peek(self, k: int = 0):
        return self.toks[self.i + k] if self.i + k < len(self.toks) else self.toks[-1]

    def advance(self):
        tok = self.toks[self.i]
        if tok[0] != "EOF":
            self.i += 1
        return tok

    def at(self, text: str) -> bool:
        return self.toks[self.i][1] == text and self.toks[self.i][0] in ("PUNCT", "DOTWORD")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None):
        tok = self.toks[self.i]
        if tok[1] != text or tok[0] not in ("PUNCT", "DOTWORD", "IDENT"):
            raise self.error(f"expected {what or repr(text)}")
        self.i += 1
        return tok

    def expect_kind(self, kind: str, what: str):
        tok = self.toks[self.i]
        if tok[0] != kind:
            raise self.error(f"expected {what}")
        self.i += 1
        return tok

    def expect_int(self, what: str) -> int:
        tok = self.expect_kind("NUMBER", what)
        try:
            value = int(tok[1].rstrip("U"), 0) if not tok[1].startswith("0") or tok[1] == "0" \
                or tok[1][:2].lower() in ("0x", "0b") else int(tok[1].rstrip("U"), 8)
        except ValueError:
            raise self.error(f"expected {what}", tok) from None
        return value

    def newline_here(self) -> bool:
        return self.nl[self.i] if self.i < len(self.nl) else True

    def raw_until_semicolon(self) -> list[str]:
        out = []
        while not self.at(";"):
            tok = self.toks[self.i]
            if tok[0] == "EOF" or (tok[0] == "PUNCT" and tok[1] in "{}"):
                raise self.error("expected ';'")
            out.append(tok[1])
            self.i += 1
        self.i += 1
        return out

    def raw_until_newline(self) -> list[str]:
        out = []
        while True:
            tok = self.toks[self.i]
            if tok[0] == "EOF" or self.nl[self.i] or (tok[0] == "PUNCT" and tok[1] in "{};"):
                break
            out.append(tok[1])
            self.i += 1
        return out

    # ------------------------------------------------------------------ module
    def parse_module(self) -> Module:
        module = Module(header=[])
        while self.peek()[0] != "EOF":
            tok = self.peek()
            start = self.i
            count = len(module.items)
            if tok[0] != "DOTWORD":
                raise self.error("expected a directive at module level")
            word = tok[1]
            if word == ".version":
                self.advance()
                module.version = self.expect_kind("NUMBER", "a version number like 9.0")[1]
                module.header.append(word)
            elif word == ".target":
                self.advance()
                names = [self.expect_kind("IDENT", "a target name like sm_90")[1]]
                while self.accept(","):
                    names.append(self.expect_kind("IDENT", "a target name")[1])
                module.target = names
                module.header.append(word)
            elif word == ".address_size":
                self.advance()
                module.address_size = self.expect_int("32 or 64")
                module.header.append(word)
            elif word == ".file":
                self.advance()
                module.items.append(Directive(".file", self.raw_until_newline(), terminated=False))
            elif word == ".section":
                module.items.append(self.parse_section())
            elif word in (".pragma", ".alias"):
                self.advance()
                module.items.append(Directive(word, self.raw_until_semicolon()))
            else:
                module.items.append(self.parse_declaration())
            last = self.toks[self.i - 1]
            for item in module.items[count:]:
                item.line = self.lines[start]
                item.span = (self.toks[start][2], last[2] + len(last[1]))
        module.source_text = self.text
        if not module.version and not self.fragment:
            tok = self.toks[0]
            raise self.src.error("missing .version directive", tok[2], tok[1])
        return module

    def parse_declaration(self):
        linkage = []
        while self.peek()[0] == "DOTWORD" and self.peek()[1] in LINKAGES:
            linkage.append(self.advance()[1])
        word = self.peek()[1] if self.peek()[0] == "DOTWORD" else None
        if word in (".entry", ".func"):
            return self.parse_function(tuple(linkage))
        if word in DECL_SPACES:
            decls = self.parse_var_decl(tuple(linkage))
            self.expect(";")
            if len(decls) != 1:
                raise self.error("expected one variable per module-level declaration")
            return decls[0]
        raise self.error("expected .entry, .func or a variable declaration")

    def parse_section(self) -> Section:
        self.advance()
        name = self.expect_kind("DOTWORD", "a section name like .debug_info")[1]
        section = Section(name)
        self.expect("{")
        while not self.accept("}"):
            tok = self.peek()
            if tok[0] == "IDENT" and self.peek(1)[1] == ":":
                self.i += 2
                section.entries.append(Label(tok[1]))
            elif tok[0] == "DOTWORD" and tok[1] in DATA_TYPES:
                self.advance()
                values = [self.parse_data_value()]
                while self.accept(","):
                    values.append(self.parse_data_value())
                section.entries.append(DataLine(tok[1], values))
            else:
                raise self.error("expected a label or .b8/.b16/.b32/.b64 data in a section")
        return section

    def parse_data_value(self):
        tok = self.peek()
        if tok[0] == "DOTWORD" and tok[1] not in DATA_TYPES:
            self.advance()
            value = Sym(tok[1])
            while self.peek()[1] in ("+", "-") and self.peek()[0] == "PUNCT":
                op = self.advance()[1]
                value = BinExpr(op, value, self.parse_expr_term())
            return value
        return self.parse_expr()

    # ------------------------------------------------------------------ variables
    def parse_var_decl(self, linkage: tuple[str, ...]) -> list[VarDecl]:
        space = self.advance()[1]
        attributes, align, vector, type_, ptr, ptr_space, ptr_align = [], None, None, None, False, None, None
        while self.peek()[0] == "DOTWORD":
            word = self.peek()[1]
            if word == ".align":
                self.advance()
                value = self.expect_int("an alignment")
                if ptr:
                    ptr_align = value
                else:
                    align = value
            elif word == ".attribute":
                self.advance()
                self.expect("(")
                inner = []
                depth = 1
                while depth:
                    tok = self.advance()
                    if tok[0] == "EOF":
                        raise self.error("unterminated .attribute(")
                    if tok[1] == "(":
                        depth += 1
                    elif tok[1] == ")":
                        depth -= 1
                        if not depth:
                            break
                    inner.append(tok[1])
                attributes.append(".attribute(" + join_tokens(inner) + ")")
            elif word in VECTOR_WIDTHS:
                self.advance()
                vector = word
            elif word in TYPE_NAMES or word in OPAQUE_TYPES:
                if type_ is not None:
                    raise self.error("a declaration has one type")
                self.advance()
                type_ = word
            elif word == ".ptr":
                self.advance()
                ptr = True
            elif ptr and word in STATE_SPACES:
                self.advance()
                ptr_space = word
            else:
                raise self.error("unexpected qualifier in a declaration")
        if type_ is None:
            raise self.error("expected a type (.b32, .f32, .u64, ...) in a declaration")
        decls = []
        while True:
            name_tok = self.expect_kind("IDENT", "a variable name")
            name = name_tok[1]
            dims: list[int | None] = []
            rng = None
            while self.accept("["):
                if self.accept("]"):
                    dims.append(None)
                else:
                    dims.append(self.expect_int("an array size"))
                    self.expect("]")
            if self.accept("<"):
                rng = self.expect_int("a register count")
                self.expect(">")
            init = None
            if self.accept("="):
                init = self.parse_expr()
            decls.append(VarDecl(space=space, type=type_, name=name, linkage=linkage,
                                 attributes=tuple(attributes), align=align, vector=vector,
                                 ptr=ptr, ptr_space=ptr_space, ptr_align=ptr_align,
                                 dims=tuple(dims), range=rng, init=init))
            if space == ".reg":
                if rng is None:
                    self.reg_names.add(name)
            if space == ".param" or not self.accept(","):
                break
        return decls

    # ------------------------------------------------------------------ expressions
    def parse_expr(self):
        left = self.parse_expr_term()
        while self.peek()[0] == "PUNCT" and self.peek()[1] in ("+", "-", "*"):
            op = self.advance()[1]
            left = BinExpr(op, left, self.parse_expr_term())
        return left

    def parse_expr_term(self):
        tok = self.peek()
        kind, text = tok[0], tok[1]
        if kind in ("NUMBER", "FLOAT"):
            self.advance()
            return Imm(text)
        if kind == "PUNCT" and text == "-" and self.peek(1)[0] in ("NUMBER", "FLOAT"):
            self.advance()
            return Imm("-" + self.advance()[1])
        if kind == "PUNCT" and text == "{":
            self.advance()
            items = []
            if not self.accept("}"):
                items.append(self.parse_expr())
                while self.accept(","):
                    items.append(self.parse_expr())
                self.expect("}")
            return Brace(tuple(items))
        if kind == "PUNCT" and text == "(":
            self.advance()
            inner = self.parse_expr()
            self.expect(")")
            return inner
        if kind == "IDENT":
            self.advance()
            if self.at("("):
                self.advance()
                args = [self.parse_expr()]
                while self.accept(","):
                    args.append(self.parse_expr())
                self.expect(")")
                return CallExpr(text, tuple(args))
            return Sym(text)
        raise self.error("expected a value")

    # ------------------------------------------------------------------ functions
    def parse_param_list(self) -> list[VarDecl]:
        self.expect("(")
        params: list[VarDecl] = []
        if self.accept(")"):
            return params
        while True:
            tok = self.peek()
            if tok[0] != "DOTWORD" or tok[1] not in (".param", ".reg"):
                raise self.error("expected a .param or .reg parameter")
            params.extend(self.parse_var_decl(()))
            if self.accept(")"):
                return params
            self.expect(",", "',' or ')'")

    def parse_function(self, linkage: tuple[str, ...]) -> Function:
        kind = self.advance()[1]
        returns = None
        if kind == ".func" and self.at("("):
            returns = self.parse_param_list()
        name = self.expect_kind("IDENT", "a function name")[1]
        has_list = self.at("(")
        params = self.parse_param_list() if has_list else []
        directives = []
        while self.peek()[0] == "DOTWORD":
            word = self.peek()[1]
            if word in PERF_DIRECTIVES:
                self.advance()
                args = [str(self.expect_int("a number"))]
                while self.accept(","):
                    args.append(str(self.expect_int("a number")))
                directives.append(Directive(word, args, terminated=False))
            elif word in FLAG_DIRECTIVES:
                self.advance()
                directives.append(Directive(word, [], terminated=False))
            elif word == ".pragma":
                self.advance()
                directives.append(Directive(word, self.raw_until_semicolon()))
            else:
                raise self.error("unexpected directive after a function header")
        if self.accept(";"):
            return Function(name, kind, linkage=linkage, params=params, returns=returns,
                            has_param_list=has_list, directives=directives, body=None)
        if not self.at("{"):
            raise self.error("expected '{' or ';' after a function header")
        self.advance()
        self.reg_names = set()
        body = self.parse_body()
        return Function(name, kind, linkage=linkage, params=params, returns=returns,
                        has_param_list=has_list, directives=directives, body=body)

    def parse_body(self) -> list:
        body: list = []
        append = body.append
        depth = 0
        lines = self.lines
        stamped = 0
        line = lines[self.i]
        while True:
            for stmt in body[stamped:]:
                stmt.line = line
            stamped = len(body)
            line = lines[self.i]
            tok = self.peek()
            kind, text = tok[0], tok[1]
            if kind == "PUNCT":
                if text == "}":
                    self.advance()
                    if depth == 0:
                        return body
                    depth -= 1
                    append(ScopeClose())
                    continue
                if text == "{":
                    self.advance()
                    depth += 1
                    append(ScopeOpen())
                    continue
                if text == "@":
                    append(self.parse_instruction())
                    continue
                raise self.error("expected an instruction, label or directive")
            if kind == "IDENT":
                if self.peek(1)[1] == ":" and self.peek(1)[0] == "PUNCT":
                    self.i += 2
                    append(Label(text))
                    continue
                append(self.parse_instruction())
                continue
            if kind == "DOTWORD":
                if text in DECL_SPACES:
                    body.extend(self.parse_var_decl(()))
                    self.expect(";")
                elif text == ".loc":
                    self.advance()
                    append(Directive(".loc", self.raw_until_newline(), terminated=False))
                elif text in BODY_DIRECTIVES:
                    self.advance()
                    append(Directive(text, self.raw_until_semicolon()))
                else:
                    raise self.error("unknown directive in a function body")
                continue
            if kind == "EOF":
                raise self.error("function body is not closed with '}'")
            raise self.error("expected an instruction, label or directive")

    # ------------------------------------------------------------------ instructions
    def parse_instruction(self) -> Instruction:
        guard = None
        if self.accept("@"):
            negated = self.accept("!")
            reg = self.expect_kind("IDENT", "a predicate register")[1]
            guard = Guard(Reg(reg), negated)
        tok = self.expect_kind("IDENT", "an instruction")
        opcode = tok[1]
        if opcode not in OPCODES:
            raise self.error("unknown instruction", tok)
        modifiers = []
        toks = self.toks
        while toks[self.i][0] == "DOTWORD":
            modifiers.append(toks[self.i][1])
            self.i += 1
        operands = []
        interned = self.interned
        tok = toks[self.i]
        if tok[1] == ";" and tok[0] == "PUNCT":
            self.i += 1
            return Instruction(opcode, modifiers, operands, guard)
        while True:
            # Fast path: a plain register or number followed by ',' or ';'.
            tok = toks[self.i]
            nxt = toks[self.i + 1] if self.i + 1 < len(toks) else tok
            if nxt[0] == "PUNCT" and (nxt[1] == "," or nxt[1] == ";"):
                kind, text = tok[0], tok[1]
                if kind == "IDENT" and text[0] == "%":
                    reg = interned.get(text)
                    if reg is None:
                        reg = interned[text] = Reg(text)
                    operands.append(reg)
                    self.i += 1
                elif kind == "NUMBER" or kind == "FLOAT":
                    operands.append(Imm(text))
                    self.i += 1
                else:
                    operands.append(self.parse_operand())
            else:
                operands.append(self.parse_operand())
            tok = toks[self.i]
            if tok[0] == "PUNCT" and tok[1] == ",":
                self.i += 1
                continue
            if tok[0] == "PUNCT" and tok[1] == ";":
                self.i += 1
                return Instruction(opcode, modifiers, operands, guard)
            raise self.error("expected ',' or ';' after an operand")

    def parse_operand(self):
        op = self.parse_simple_operand()
        if self.at("|"):
            self.advance()
            op = Pair(op, self.parse_simple_operand())
        return op

    def parse_simple_operand(self):
        tok = self.peek()
        kind, text = tok[0], tok[1]
        if kind == "IDENT":
            self.advance()
            if text.startswith("%"):
                nxt = self.peek()
                if nxt[0] == "DOTWORD" and nxt[1] in SPECIAL_COMPONENTS:
                    self.advance()
                    return Reg(text + nxt[1])
                return Reg(text)
            if text == "_":
                return Sink()
            if text in self.reg_names:
                return Reg(text)
            base = Sym(text)
            if self.peek()[0] == "PUNCT" and self.peek()[1] in ("+", "-"):
                op = self.advance()[1]
                return BinExpr(op, base, self.parse_expr_term())
            return base
        if kind in ("NUMBER", "FLOAT"):
            self.advance()
            return Imm(text)
        if kind == "PUNCT":
            if text == "-" and self.peek(1)[0] in ("NUMBER", "FLOAT"):
                self.advance()
                return Imm("-" + self.advance()[1])
            if text == "!":
                self.advance()
                return Neg(self.parse_simple_operand())
            if text == "{":
                self.advance()
                items = [self.parse_operand()]
                while self.accept(","):
                    items.append(self.parse_operand())
                self.expect("}", "'}' closing a vector operand")
                return Vec(tuple(items))
            if text == "(":
                self.advance()
                items = []
                if not self.accept(")"):
                    items.append(self.parse_operand())
                    while self.accept(","):
                        items.append(self.parse_operand())
                    self.expect(")", "')' closing an argument list")
                return Paren(tuple(items))
            if text == "[":
                return self.parse_address()
        raise self.error("expected an operand")

    def parse_address(self) -> Addr:
        self.expect("[")
        tok = self.peek()
        if tok[0] == "IDENT":
            self.advance()
            name = tok[1]
            if name.startswith("%") or name in self.reg_names:
                base = Reg(name)
            else:
                base = Sym(name)
        elif tok[0] in ("NUMBER", "FLOAT") or tok[1] == "-":
            base = self.parse_expr_term()
        else:
            raise self.error("expected a register, name or address in '[ ]'")
        offset = None
        if self.at("+") or self.at("-"):
            sign = -1 if self.advance()[1] == "-" else 1
            if self.accept("-"):
                sign = -sign
            offset = sign * self.expect_int("an address offset")
        extra = []
        while self.accept(","):
            extra.append(self.parse_operand())
        self.expect("]", "']' closing an address")
        return Addr(base, offset, tuple(extra))


def join_tokens(tokens: list[str]) -> str:
    """Canonical spacing for directive arguments kept as tokens."""
    out = ""
    prev = ""
    for tok in tokens:
        if out and prev not in ("(", "[", "{", "!", "@") and tok not in (",", ")", "]", "}", ";", ":") \
                and not (tok == "(" and prev.startswith(".attribute")):
            out += " "
        out += tok
        prev = tok
    return out


def parse(text: str, *, fragment: bool = False) -> Module:
    """Parse PTX text into a :class:`Module`. Raises only :class:`ParseError`.

    ``fragment``: accept text without the ``.version`` directive a module must start with
    (declarations cut out of a module, as a signature check may be given)."""
    parser = None
    try:
        parser = Parser(text)
        parser.fragment = fragment
        return parser.parse_module()
    except ParseError:
        raise
    except RecursionError:
        raise _fallback_error(parser, text, "nesting too deep") from None
    except Exception as exc:  # a bug in the parser must still surface as a ParseError
        raise _fallback_error(parser, text, f"internal parser error: {type(exc).__name__}: {exc}") from exc


def _fallback_error(parser, text: str, message: str) -> ParseError:
    if parser is None or not parser.toks:
        return ParseError(message, 1, 1, "")
    tok = parser.toks[min(parser.i, len(parser.toks) - 1)]
    return parser.src.error(message, tok[2], tok[1])
