"""What every ``superopt`` command does with what a user hands it: bad input is one line
naming the file and what is wrong, and exit status 2, never a Python traceback.

* Files are read through :mod:`superopt.store.safe_files`: regular files only (a FIFO, a
  device such as ``/dev/zero``, a folder are refused at once instead of hanging or reading
  until memory runs out), at most ``INPUT_LIMIT`` bytes, UTF-8 checked.
* Outputs (``-o``) that cannot be written are named, not a traceback.
* Numbers: :class:`FiniteFloat` refuses ``nan`` and ``inf`` (click's ``FloatRange`` lets
  ``nan`` through every bound: ``nan < 0`` is false).
* PTX of a ``.cu`` file comes from the real nvcc (:func:`ptx_from_file`, also what ``superopt
  generate`` and ``superopt model`` use).
* :class:`SafeGroup` is the last line: deep nesting (``RecursionError``), ``MemoryError``
  and any error a command did not foresee become one line and exit 2
  (``NVCC_PLUS_DEBUG=1`` shows the traceback, as ``superopt generate`` does).
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from superopt.config.settings import env_value
from superopt.store import safe_files

EXIT_BAD_INPUT = 2


class BadInput(click.ClickException):
    """Bad input to a command: the message names the file or option; exit status 2."""
    exit_code = EXIT_BAD_INPUT


def _why(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.start} is 0x{exc.object[exc.start]:02x})"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


def read_input(path, what: str, *, limit: int | None = None, errors: str = "strict",
               allow_empty: bool = False) -> str:
    """The UTF-8 text of the input file ``path`` (``what`` says what it should be: "PTX",
    "launch spec", ...; at most ``limit`` bytes, default ``INPUT_LIMIT``; not only blanks
    unless ``allow_empty``), or :class:`BadInput`."""
    try:
        text = safe_files.read_text(path, limit or safe_files.INPUT_LIMIT, follow=True, errors=errors)
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read the {what}: {_why(exc)}") from None
    if not allow_empty and not text.strip():
        raise BadInput(f"{path}: the {what} is empty")
    return text


def read_input_bytes(path, what: str, *, limit: int | None = None) -> bytes:
    try:
        return safe_files.read_bytes(path, limit or safe_files.INPUT_LIMIT, follow=True)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the {what}: {_why(exc)}") from None


def require_regular(path, what: str) -> None:
    """``path`` is a regular file (for inputs handed to another program, such as a .cu file
    to nvcc, which would wait on a FIFO for ever)."""
    try:
        os.close(safe_files.open_regular(path, follow=True))
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the {what}: {_why(exc)}") from None


def ptx_input(path, arch: str = "sm_90", nvcc_args=(), keep_dir=None) -> str:
    """PTX text of a .ptx file (read as an input), or of a .cu file compiled by nvcc
    (:func:`ptx_from_file`; the file must be a regular file, nvcc would
    wait on a FIFO); nvcc's failure is :class:`BadInput` with its messages."""
    if Path(path).suffix == ".ptx":
        return read_input(path, "PTX")
    require_regular(path, "CUDA source")
    try:
        return ptx_from_file(Path(path), arch, nvcc_args, keep_dir=keep_dir)
    except PtxSourceError as exc:
        raise BadInput(str(exc)) from None


def parse_ptx(text: str, path):
    """The parsed module, or :class:`BadInput` naming ``path`` and the parser's complaint."""
    import ptx_ir
    try:
        return ptx_ir.parse(text)
    except Exception as exc:  # noqa: BLE001 - whatever the parser raises on this input, it is bad input
        msg = " ".join(str(exc).split())[:300]
        raise BadInput(f"{path}: not PTX that can be parsed ({type(exc).__name__}: {msg})") from None


def write_output(path, text: str, what: str) -> None:
    """Write ``text`` to the output ``path`` or :class:`BadInput` naming it."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise BadInput(f"{path}: cannot write the {what}: {_why(exc)}") from None


def make_folder(path, what: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"{path}: cannot create the {what} folder: {_why(exc)}") from None


class BackendChoice(click.Choice):
    """``--backend``: ``auto`` or a registered judge backend (``gpu``, ``emulator``, and any a
    plugin or a test registered with :func:`superopt.judge.backends.base.register_backend`);
    the registry is read when the option is parsed, not when the command is built."""

    def __init__(self):
        super().__init__(["auto", "gpu", "emulator"])

    def convert(self, value, param, ctx):
        from superopt.judge.backends.base import backend_names
        self.choices = ("auto", *backend_names())
        return super().convert(value, param, ctx)


class FiniteFloat(click.FloatRange):
    """A float option within bounds that is also finite (``nan``/``inf`` are refused)."""
    name = "finite float"

    def convert(self, value, param, ctx):
        rv = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(rv, param, ctx)


class SafeGroup(click.Group):
    """A click group whose commands never end in a traceback (see the module doc)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except RecursionError:
            raise BadInput("the input is nested too deeply to read") from None
        except MemoryError:
            raise BadInput("not enough memory for the input (is it far larger than it should be?)") from None
        except Exception as exc:  # noqa: BLE001 - the last line before a traceback; limits are not Exceptions here
            if env_value("NVCC_PLUS_DEBUG") == "1":
                raise
            sub = ctx.invoked_subcommand or ""
            where = f"superopt {sub}".strip()
            msg = " ".join(str(exc).split())[:300]
            click.echo(f"Error: {where}: internal error: {type(exc).__name__}: {msg} "
                       f"(NVCC_PLUS_DEBUG=1 shows the traceback)", err=True)
            sys.exit(EXIT_BAD_INPUT)


# ---------------------------------------------------------------- PTX of a file

class PtxSourceError(RuntimeError):
    """nvcc could not make PTX of a .cu file."""


def ptx_from_file(path: Path, arch: str, nvcc_args: tuple | list = (), keep_dir=None) -> str:
    """PTX text of a .ptx file, or of a .cu file compiled with the real nvcc (``-arch=arch -O3``
    unless ``nvcc_args`` give their own; ``nvcc_args`` are the user's compiler flags: ``-I``,
    ``-D``, ``-std``, ...); raises :class:`PtxSourceError` with nvcc's messages when it fails.
    ``keep_dir``: nvcc keeps its intermediate files there (``--keep``), the preprocessed unit
    among them (:func:`preprocessed_unit`)."""
    path = Path(path)
    if path.suffix == ".ptx":
        return path.read_text()
    args = [a for a in nvcc_args if a not in ("-c", "--compile")]
    defaults = []
    if not _gives(args, ("-arch", "--gpu-architecture", "-gencode", "--generate-code")):
        defaults.append(f"-arch={arch}")
    if not _gives(args, ("-O", "--optimize")):
        defaults.append("-O3")
    with tempfile.TemporaryDirectory(prefix="superopt-") as tmp:
        out = Path(tmp) / "x.ptx"
        keep = ["--keep", "--keep-dir", str(keep_dir)] if keep_dir is not None else []
        cmd = [env_value("NVCC_PLUS_REAL_NVCC") or "nvcc", *defaults, *args, *keep, "-ptx", str(path),
               "-o", str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        except OSError as exc:
            raise PtxSourceError(f"cannot run {cmd[0]} for {path}: {exc.strerror}; set NVCC_PLUS_REAL_NVCC") from None
        if proc.returncode != 0:
            shown = " ".join([*defaults, *args, "-ptx", str(path)])
            raise PtxSourceError(f"nvcc failed on {path} ({shown}):\n{proc.stderr.strip()}")
        return out.read_text()


def preprocessed_unit(keep_dir) -> str | None:
    """The translation unit nvcc preprocessed into ``keep_dir`` (``-ptx``: the device-side
    ``gcc -E`` output, ``*.cpp1.ii``; host code is in it, launches included), or None."""
    found = sorted(Path(keep_dir).glob("*.cpp1.ii")) + sorted(Path(keep_dir).glob("*.cpp4.ii"))
    return str(found[0]) if found else None


def _gives(args, names) -> bool:
    """Whether the user's nvcc flags set an option (``-O2``, ``-arch=sm_80``, ``-arch sm_80``)."""
    for a in args:
        for n in names:
            if a == n or a.startswith(n + "=") or (n == "-O" and len(a) == 3 and a.startswith("-O")):
                return True
    return False
