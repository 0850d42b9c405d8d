"""``%load_ext superopt`` and the ``%%ptxgen`` cell magic (IPython / Jupyter).

::

    %load_ext superopt

    def vadd_ref(a, b, c, n):
        c[:n] = a[:n] + b[:n]

    %%ptxgen --signature "vadd(const float* a, const float* b, float* c, int n)" --reference vadd_ref
    Add two float vectors: c[i] = a[i] + b[i] for i < n.

The cell's body is the description; the line holds the options of ``superopt generate``
(``--reference`` may also name a function in the notebook; ``--model-from NAME`` takes a
model backend object from the notebook). Progress shows while it works; the record is shown
inline. A verified kernel is returned and bound to ``--name`` (default: the kernel's name)
as a :class:`superopt.generate.kernel.GeneratedKernel`: call it with numpy arrays (the CPU
emulator, or the GPU runner where a GPU is usable) or CuPy arrays (``cupy.RawModule``).
Nothing verified: the report (reasons, every answer) is returned instead; no exception.

IPython is an optional dependency (``pip install 'nvcc-plus[notebook]'``).
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

from IPython.core import magic_arguments
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.display import display

__all__ = ["PtxgenMagics", "load_ipython_extension", "GenerationReport"]

_BACKENDS: dict = {}          # model backends by option, loaded once per kernel session


class GenerationReport:
    """A generation that verified nothing (or could not judge): the record, shown inline."""

    def __init__(self, result):
        self.result = result
        self.record = result.record
        self.status = result.status
        self.reasons = result.reasons

    def _repr_html_(self):
        from superopt.generate.render import record_html
        return record_html(self.record)

    def __repr__(self):
        from superopt.generate.render import record_text
        return record_text(self.record)


def _model(args, shell):
    from superopt.model.cli import _backend_from_options
    if args.model_from:
        obj = shell.user_ns.get(args.model_from)
        if obj is None or not hasattr(obj, "complete"):
            raise ValueError(f"--model-from {args.model_from}: no model backend of that name in the notebook "
                             f"(an object with complete(messages, constraint=..., n=..., max_tokens=...))")
        return obj
    key = (args.test_model, args.local, args.url, args.model)
    if key not in _BACKENDS:
        _BACKENDS[key] = _backend_from_options(args.test_model, args.local, args.url, args.model)
    return _BACKENDS[key]


def _reference(name: str, shell):
    from superopt.generate.reference import numpy_reference_from_callable
    obj = shell.user_ns.get(name)
    if obj is not None and callable(obj):
        return numpy_reference_from_callable(obj, name)
    head = name.rpartition(":")[0] if ":" in name else name
    if Path(name).exists() or Path(head).exists():
        return name
    raise ValueError(f"--reference {name}: neither a function in the notebook nor a file")


@magics_class
class PtxgenMagics(Magics):
    @magic_arguments.magic_arguments()
    @magic_arguments.argument("--signature", help="The kernel's C signature.")
    @magic_arguments.argument("--reference", required=True,
                              help="A numpy function of the notebook, or a .py / .cu file (FILE[:NAME]).")
    @magic_arguments.argument("--spec", help="Launch spec: a file or inline comment items.")
    @magic_arguments.argument("--name", help="Bind the kernel to this name (default: the kernel's name).")
    @magic_arguments.argument("--arch", default="sm_90")
    @magic_arguments.argument("--backend", default="auto", choices=["auto", "gpu", "emulator"])
    @magic_arguments.argument("--policy", default="exact")
    @magic_arguments.argument("--sets", type=int, default=4)
    @magic_arguments.argument("--test-model", action="store_true", help="The offline test model.")
    @magic_arguments.argument("--local", help="An in-process model folder or .gguf file.")
    @magic_arguments.argument("--url", help="An OpenAI-compatible server.")
    @magic_arguments.argument("--model", help="The served model name.")
    @magic_arguments.argument("--model-from", help="A model backend object of the notebook.")
    @magic_arguments.argument("--rounds", type=int, default=3)
    @magic_arguments.argument("--samples", type=int, default=2)
    @magic_arguments.argument("--budget", type=float, default=600.0,
                              help="Wall seconds for the whole generation, a hard limit.")
    @magic_arguments.argument("--max-tokens", type=int, default=2048)
    @magic_arguments.argument("--max-statements", type=int, default=160)
    @magic_arguments.argument("--temperature", type=float, default=0.7)
    @magic_arguments.argument("--seed", type=int, default=0)
    @magic_arguments.argument("-o", "--output", help="Also write the verified PTX (and its record) here.")
    @magic_arguments.argument("--no-dataset", action="store_true")
    @cell_magic
    def ptxgen(self, line, cell):
        """Generate a PTX kernel from the cell's description, verified against a reference."""
        from superopt.generate.judge import JudgeUnavailable, ReferenceJudge
        from superopt.generate.kernel import GeneratedKernel
        from superopt.generate.loop import GenerateOptions
        from superopt.generate.loop import write_record
        from superopt.generate.task import TaskError, build_task
        from superopt.judge.check import Policy
        from superopt.model.base import ModelError

        try:
            argv = shlex.split(line)       # IPython's own splitter keeps the quotes
        except ValueError as e:
            print(f"COULD NOT JUDGE: %%ptxgen options: {e}", file=sys.stderr)
            return None
        args = self.ptxgen.parser.parse_args(argv)
        try:
            Policy.parse(args.policy)
            options = GenerateOptions(rounds=args.rounds, samples=args.samples, budget_s=args.budget,
                                      max_tokens=args.max_tokens, max_statements=args.max_statements,
                                      temperature=args.temperature, seed=args.seed,
                                      save_dataset=not args.no_dataset).validate()
            task = build_task(cell, reference=_reference(args.reference, self.shell), signature=args.signature,
                              spec=args.spec, target=args.arch)
            judge = ReferenceJudge(task.reference, task.stub_ptx, backend=args.backend, policy=args.policy,
                                   sets=args.sets)
            model = _model(args, self.shell)
        except (TaskError, JudgeUnavailable, ModelError, ValueError) as e:
            print(f"COULD NOT JUDGE: {e}", file=sys.stderr)
            return None
        result = _generate_with_progress(self.shell, task, model, judge, options)
        if args.output:
            out = Path(args.output)
            if result.accepted:
                out.write_text(result.module_ptx)
            write_record(result.record, out.with_name(out.name.removesuffix(".ptx") + ".record.json"))
        if not result.accepted:
            return GenerationReport(result)
        kernel = GeneratedKernel.from_result(result)
        self.shell.user_ns[args.name or task.kernel] = kernel
        return kernel


def in_jupyter(shell) -> bool:
    """Whether ``shell`` runs under a Jupyter kernel (whose output areas can be updated in
    place); a terminal IPython has no kernel and prints every update anew."""
    return getattr(shell, "kernel", None) is not None


def _generate_with_progress(shell, task, model, judge, options):
    """The loop, with its progress in one updated output area under Jupyter, or on the
    terminal (a live status line; each step printed once) elsewhere."""
    from superopt.generate.loop import generate
    from superopt.generate.progress import GenerationProgress, NotebookProgress, TerminalProgress
    progress = GenerationProgress(options.budget_s, notes=task.notes)
    if in_jupyter(shell):
        view = NotebookProgress(progress, display=display)
        return generate(task, model, judge, options, on_event=view.on_event)
    from rich.console import Console
    with TerminalProgress(Console(highlight=False, soft_wrap=True), progress) as term:
        return generate(task, model, judge, options, on_event=term.on_event)


def load_ipython_extension(ipython) -> None:
    """``%load_ext superopt``: registers ``%%ptxgen``."""
    ipython.register_magics(PtxgenMagics)
