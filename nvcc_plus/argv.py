"""A model of nvcc's command line: what each token is, and whether nvcc-plus optimizes the run.

nvcc's own parser (checked against nvcc 13.0):
* long options are spelled ``--name``, short ones ``-name``; never the other way round;
* an option that takes a value accepts ``-opt value`` and ``-opt=value``;
* only ``-D -U -I -L -l -O -t`` also accept the value glued on (``-DX=1``, ``-O3``);
  ``-ofile``, ``-xcu``, ``-MTfoo`` are fatal;
* a repeated single-value option keeps the last value (with a warning for some);
* ``NVCC_PREPEND_FLAGS`` / ``NVCC_APPEND_FLAGS`` are read by nvcc itself, so they only need to be
  modelled here (to classify the run), never re-applied;
* ``--options-file a,b`` is read by nvcc; it is expanded here for classification only.

This module does not run anything; :func:`classify` decides "replay" or "passthrough".
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from nvcc_plus.filetypes import CUDA_SOURCE_EXTS, HOST_SOURCE_EXTS, INPUT_EXTS  # noqa: F401 (re-exported)
# --plus-* flags live in nvcc_plus.plusflags (import-free, used on the start-up path).
from nvcc_plus.plusflags import PLUS_PREFIX, split_plus_flags  # noqa: F401 (re-exported)

VALUE = True
FLAG = False

# (long name, short name, takes a value). From `nvcc --help` of 13.0, plus the options that
# the help lists without an argument although they take one (-MF), and hidden ones
# (-Xcudafe, -Xcicc, -Xfatbin).
_SPEC: tuple[tuple[str, str | None, bool], ...] = (
    ("cuda", "cuda", FLAG), ("cubin", "cubin", FLAG), ("fatbin", "fatbin", FLAG),
    ("ptx", "ptx", FLAG), ("optix-ir", "optix-ir", FLAG), ("ltoir", "ltoir", FLAG),
    ("preprocess", "E", FLAG), ("generate-dependencies", "M", FLAG),
    ("generate-nonsystem-dependencies", "MM", FLAG),
    ("generate-dependencies-with-compile", "MD", FLAG),
    ("generate-nonsystem-dependencies-with-compile", "MMD", FLAG),
    ("dependency-output", "MF", VALUE), ("generate-dependency-targets", "MP", FLAG),
    ("compile", "c", FLAG), ("device-c", "dc", FLAG), ("device-w", "dw", FLAG),
    ("device-link", "dlink", FLAG), ("link", "link", FLAG), ("lib", "lib", FLAG),
    ("run", "run", FLAG), ("output-file", "o", VALUE), ("pre-include", "include", VALUE),
    ("objdir-as-tempdir", "objtemp", FLAG), ("library", "l", VALUE),
    ("define-macro", "D", VALUE), ("undefine-macro", "U", VALUE),
    ("include-path", "I", VALUE), ("system-include", "isystem", VALUE),
    ("library-path", "L", VALUE), ("output-directory", "odir", VALUE),
    ("compiler-bindir", "ccbin", VALUE),
    ("allow-unsupported-compiler", "allow-unsupported-compiler", FLAG),
    ("archiver-binary", "arbin", VALUE), ("cudart", "cudart", VALUE),
    ("cudadevrt", "cudadevrt", VALUE), ("libdevice-directory", "ldir", VALUE),
    ("target-directory", "target-dir", VALUE), ("use-local-env", "use-local-env", FLAG),
    ("force-cl-env-setup", "force-cl-env-setup", FLAG), ("profile", "pg", FLAG),
    ("debug", "g", FLAG), ("device-debug", "G", FLAG),
    ("generate-line-info", "lineinfo", FLAG), ("optimization-info", "opt-info", VALUE),
    ("optimize", "O", VALUE), ("Ofast-compile", "Ofc", VALUE), ("dopt", "dopt", VALUE),
    ("dlink-time-opt", "dlto", FLAG), ("lto", "lto", FLAG),
    ("gen-opt-lto", "gen-opt-lto", FLAG),
    ("ftemplate-backtrace-limit", "ftemplate-backtrace-limit", VALUE),
    ("ftemplate-depth", "ftemplate-depth", VALUE), ("no-exceptions", "noeh", FLAG),
    ("shared", "shared", FLAG), ("x", "x", VALUE), ("std", "std", VALUE),
    ("no-host-device-initializer-list", "nohdinitlist", FLAG),
    ("no-host-device-move-forward", "nohdmoveforward", FLAG),
    ("expt-relaxed-constexpr", "expt-relaxed-constexpr", FLAG),
    ("extended-lambda", "extended-lambda", FLAG),
    ("expt-extended-lambda", "expt-extended-lambda", FLAG),
    ("machine", "m", VALUE), ("m64", "m64", FLAG),
    ("compiler-options", "Xcompiler", VALUE), ("linker-options", "Xlinker", VALUE),
    ("archive-options", "Xarchive", VALUE), ("ptxas-options", "Xptxas", VALUE),
    ("nvlink-options", "Xnvlink", VALUE),
    ("cudafe-options", "Xcudafe", VALUE), ("cicc-options", "Xcicc", VALUE),
    ("fatbinary-options", "Xfatbin", VALUE),
    ("static-global-template-stub", "static-global-template-stub", VALUE),
    ("device-entity-has-hidden-visibility", "device-entity-has-hidden-visibility", VALUE),
    ("forward-unknown-to-host-compiler", "forward-unknown-to-host-compiler", FLAG),
    ("forward-unknown-to-host-linker", "forward-unknown-to-host-linker", FLAG),
    ("forward-unknown-opts", "forward-unknown-opts", FLAG),
    ("dont-use-profile", "noprof", FLAG), ("dryrun", "dryrun", FLAG),
    ("verbose", "v", FLAG), ("threads", "t", VALUE),
    ("split-compile", "split-compile", VALUE),
    ("split-compile-extended", "split-compile-extended", VALUE),
    ("fdevice-syntax-only", "fdevice-syntax-only", FLAG),
    ("fdevice-time-trace", "fdevice-time-trace", VALUE), ("keep", "keep", FLAG),
    ("keep-dir", "keep-dir", VALUE), ("save-temps", "save-temps", FLAG),
    ("clean-targets", "clean", FLAG), ("time", "time", VALUE),
    ("run-args", "run-args", VALUE), ("input-drive-prefix", "idp", VALUE),
    ("dependency-drive-prefix", "ddp", VALUE), ("drive-prefix", "dp", VALUE),
    ("dependency-target-name", "MT", VALUE), ("no-align-double", None, FLAG),
    ("no-device-link", "nodlink", FLAG), ("gpu-architecture", "arch", VALUE),
    ("gpu-code", "code", VALUE), ("generate-code", "gencode", VALUE),
    ("relocatable-device-code", "rdc", VALUE), ("entries", "e", VALUE),
    ("maxrregcount", "maxrregcount", VALUE), ("use_fast_math", "use_fast_math", FLAG),
    ("ftz", "ftz", VALUE), ("prec-div", "prec-div", VALUE),
    ("prec-sqrt", "prec-sqrt", VALUE), ("fmad", "fmad", VALUE),
    ("extra-device-vectorization", "extra-device-vectorization", FLAG),
    ("default-stream", "default-stream", VALUE), ("disable-warnings", "w", FLAG),
    ("keep-device-functions", "keep-device-functions", FLAG),
    ("source-in-ptx", "src-in-ptx", FLAG), ("restrict", "restrict", FLAG),
    ("Wreorder", "Wreorder", FLAG), ("Wdefault-stream-launch", "Wdefault-stream-launch", FLAG),
    ("Wmissing-launch-bounds", "Wmissing-launch-bounds", FLAG),
    ("Wext-lambda-captures-this", "Wext-lambda-captures-this", FLAG),
    ("Wno-deprecated-declarations", "Wno-deprecated-declarations", FLAG),
    ("Wno-deprecated-gpu-targets", "Wno-deprecated-gpu-targets", FLAG),
    ("Werror", "Werror", VALUE), ("resource-usage", "res-usage", FLAG),
    ("extensible-whole-program", "ewp", FLAG), ("no-compress", "no-compress", FLAG),
    ("qpp-config", "qpp-config", VALUE), ("compile-as-tools-patch", "astoolspatch", FLAG),
    ("list-gpu-code", "code-ls", FLAG), ("list-gpu-arch", "arch-ls", FLAG),
    ("display-error-number", "err-no", FLAG), ("no-display-error-number", "no-err-no", FLAG),
    ("diag-error", "diag-error", VALUE), ("diag-suppress", "diag-suppress", VALUE),
    ("diag-warn", "diag-warn", VALUE), ("host-linker-script", "hls", VALUE),
    ("augment-host-linker-script", "aug-hls", FLAG), ("relocatable-link", "r", FLAG),
    ("brief-diagnostics", "brief-diag", VALUE), ("jump-table-density", "jtd", VALUE),
    ("relocatable-ptx", "reloc-ptx", FLAG),
    ("device-stack-protector", "device-stack-protector", VALUE),
    ("compress-mode", "compress-mode", VALUE), ("frandom-seed", "frandom-seed", VALUE),
    ("sanitize", "sanitize", VALUE), ("jobserver", "jobserver", FLAG),
    ("help", "h", FLAG), ("version", "V", FLAG), ("options-file", "optf", VALUE),
)

# spelled form ("--output-file", "-o") -> (canonical long name, takes value)
OPTIONS: dict[str, tuple[str, bool]] = {}
for _long, _short, _takes in _SPEC:
    OPTIONS["--" + _long] = (_long, _takes)
    if _short:
        OPTIONS["-" + _short] = (_long, _takes)
# nvcc's error messages call -MF --dependency-file; accept that spelling too.
OPTIONS.setdefault("--dependency-file", ("dependency-output", VALUE))

# Short options that accept their value glued on: -DX, -Ipath, -O3, -lfoo, -t2.
GLUED = {"-D": "define-macro", "-U": "undefine-macro", "-I": "include-path",
         "-L": "library-path", "-l": "library", "-O": "optimize", "-t": "threads"}

# Any of these means: not a compilation whose PTX nvcc-plus swaps; hand the run to nvcc as is.
PASSTHROUGH_OPTIONS = {
    "version": "--version", "help": "--help", "verbose": "-v", "dryrun": "-dryrun",
    "preprocess": "-E", "generate-dependencies": "-M",
    "generate-nonsystem-dependencies": "-MM", "list-gpu-code": "--list-gpu-code",
    "list-gpu-arch": "--list-gpu-arch", "device-link": "-dlink",
    "dlink-time-opt": "-dlto", "lto": "-lto", "gen-opt-lto": "-gen-opt-lto",
    "ltoir": "-ltoir", "optix-ir": "-optix-ir", "cuda": "-cuda", "time": "-time",
    "fdevice-time-trace": "-fdevice-time-trace", "fdevice-syntax-only": "-fdevice-syntax-only",
    "run": "-run", "clean-targets": "-clean", "qpp-config": "-qpp-config",
    "objdir-as-tempdir": "-objtemp", "use-local-env": "-use-local-env",
    "force-cl-env-setup": "-force-cl-env-setup",
}

DEP_OPTIONS = {"generate-dependencies-with-compile", "generate-nonsystem-dependencies-with-compile",
               "dependency-output", "dependency-target-name", "generate-dependency-targets",
               "generate-dependencies", "generate-nonsystem-dependencies"}



@dataclass
class Item:
    """One option or input of the command line."""
    kind: str                    # "option", "unknown" (an option nvcc may reject), "input"
    name: str | None             # canonical long name for options; None otherwise
    value: str | None            # the option's value, or the input's path
    tokens: list[str]            # the tokens exactly as they were written
    origin: str = "argv"         # "argv", "options-file", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"


@dataclass
class NvccCommand:
    items: list[Item] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)   # e.g. an unreadable options file

    # ---- queries -------------------------------------------------------------------
    def options(self, name: str) -> list[Item]:
        return [it for it in self.items if it.kind == "option" and it.name == name]

    def has(self, name: str) -> bool:
        return any(it.kind == "option" and it.name == name for it in self.items)

    def last_value(self, name: str) -> str | None:
        vals = [it.value for it in self.options(name)]
        return vals[-1] if vals else None

    def values(self, name: str) -> list[str]:
        """All values of a list option, commas split (``-Xcompiler a,b`` -> a, b)."""
        out: list[str] = []
        for it in self.options(name):
            out.extend(v for v in (it.value or "").split(",") if v)
        return out

    @property
    def inputs(self) -> list[str]:
        return [it.value for it in self.items if it.kind == "input" and it.value is not None]

    def cuda_inputs(self) -> list[str]:
        lang = self.last_value("x")
        out = []
        for path in self.inputs:
            ext = os.path.splitext(path)[1]
            if ext in CUDA_SOURCE_EXTS and lang in (None, "cu"):
                out.append(path)
            elif lang == "cu" and ext in HOST_SOURCE_EXTS:
                out.append(path)
        return out

    def keeps_files(self) -> bool:
        return self.has("keep") or self.has("save-temps")

    def argv_tokens(self) -> list[str]:
        """The tokens of the real command line (no options-file or environment items)."""
        out: list[str] = []
        for it in self.items:
            if it.origin == "argv":
                out.extend(it.tokens)
        return out


def _split_env_flags(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _read_options_file(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return shlex.split(f.read())


def parse(argv: list[str], env: dict[str, str] | None = None, *, _origin: str = "argv",
          _depth: int = 0, _cmd: NvccCommand | None = None) -> NvccCommand:
    """Model ``nvcc argv`` (argv without the program name), including the environment flags."""
    cmd = _cmd if _cmd is not None else NvccCommand()
    if _depth == 0 and env is not None and env.get("NVCC_PREPEND_FLAGS", "").strip():
        parse(_split_env_flags(env["NVCC_PREPEND_FLAGS"]), None, _origin="NVCC_PREPEND_FLAGS",
              _depth=1, _cmd=cmd)
    i = 0
    n = len(argv)
    while i < n:
        tok = argv[i]
        if not tok.startswith("-") or tok == "-":
            cmd.items.append(Item("input", None, tok, [tok], _origin))
            i += 1
            continue
        name, eq, val = tok.partition("=")
        spec = OPTIONS.get(name)
        if spec is not None:
            canon, takes = spec
            if takes:
                if eq:
                    cmd.items.append(Item("option", canon, val, [tok], _origin))
                    i += 1
                elif i + 1 < n:
                    cmd.items.append(Item("option", canon, argv[i + 1], [tok, argv[i + 1]], _origin))
                    i += 2
                else:   # missing value: nvcc will complain
                    cmd.items.append(Item("option", canon, None, [tok], _origin))
                    cmd.problems.append(f"option {tok} needs a value")
                    i += 1
            else:
                cmd.items.append(Item("option", canon, val if eq else None, [tok], _origin))
                i += 1
            if canon == "options-file" and cmd.items[-1].value:
                _expand_options_files(cmd, cmd.items[-1].value, _depth)
            continue
        glued = GLUED.get(tok[:2])
        if glued is not None and len(tok) > 2:
            cmd.items.append(Item("option", glued, tok[2:], [tok], _origin))
            i += 1
            continue
        cmd.items.append(Item("unknown", None, None, [tok], _origin))
        i += 1
    if _depth == 0 and env is not None and env.get("NVCC_APPEND_FLAGS", "").strip():
        parse(_split_env_flags(env["NVCC_APPEND_FLAGS"]), None, _origin="NVCC_APPEND_FLAGS",
              _depth=1, _cmd=cmd)
    return cmd


def _expand_options_files(cmd: NvccCommand, value: str, depth: int) -> None:
    if depth > 8:
        cmd.problems.append("options files nested too deeply")
        return
    for path in value.split(","):
        if not path:
            continue
        try:
            tokens = _read_options_file(path)
        except (OSError, ValueError) as exc:
            cmd.problems.append(f"cannot read options file {path}: {exc}")
            continue
        parse(tokens, None, _origin="options-file", _depth=depth + 1, _cmd=cmd)


# ---- the decision -----------------------------------------------------------------------
@dataclass
class Decision:
    replay: bool
    reason: str


def _has_lto_target(cmd: NvccCommand) -> bool:
    for name in ("gpu-architecture", "gpu-code", "generate-code"):
        for it in cmd.options(name):
            if it.value and "lto_" in it.value:
                return True
    return False


def classify(cmd: NvccCommand) -> Decision:
    """Replay (and swap PTX) or hand the run to nvcc untouched."""
    if not cmd.items:
        return Decision(False, "no arguments")
    if cmd.problems:
        return Decision(False, cmd.problems[0])
    for it in cmd.items:
        if it.kind == "option" and it.name in PASSTHROUGH_OPTIONS:
            return Decision(False, f"{PASSTHROUGH_OPTIONS[it.name]} is passed through")
    if _has_lto_target(cmd):
        return Decision(False, "lto_ targets are passed through")
    if not cmd.cuda_inputs():
        return Decision(False, "no CUDA source among the inputs")
    # The -M* family is rewritten for the separate dependency run; it must be on the real
    # command line to be rewritten safely.
    for it in cmd.items:
        if it.kind == "option" and it.name in DEP_OPTIONS and it.origin != "argv":
            return Decision(False, f"dependency options in {it.origin}")
    if (cmd.has("generate-dependencies-with-compile")
            or cmd.has("generate-nonsystem-dependencies-with-compile")):
        sources = [p for p in cmd.inputs
                   if os.path.splitext(p)[1] in CUDA_SOURCE_EXTS | HOST_SOURCE_EXTS]
        if len(sources) > 1:
            return Decision(False, "-MD with several sources")
        if any(it.origin != "argv" for it in cmd.options("output-file")):
            return Decision(False, "-o outside the command line with -MD")
    return Decision(True, "compiles CUDA sources")
