"""The one entry point the driver calls: PTX text in, PTX text out.

Contract with `nvcc_plus`:
* the returned PTX declares the same kernels, device functions and globals with the
  same names and parameters as the input (the host stub registers them by name);
* if anything goes wrong inside, this function raises; the driver then keeps nvcc's
  own PTX and prints one line. It never returns half-done text.
"""
from __future__ import annotations

from dataclasses import dataclass, field

MODES = ("off", "roundtrip", "optimize")


@dataclass
class OptimizeOutcome:
    ptx: str
    changed: bool
    # One line each, shown to the user on stderr by the driver (already prefixed by it).
    messages: list[str] = field(default_factory=list)
    # The per-kernel records (reports' JSON schema) when a search ran.
    records: list[dict] = field(default_factory=list)
    # Where those records were written (NVCC_PLUS_REPORT_DIR), so that a driver that does not
    # use the rewrite after all (a later tool rejects it) can say so in them.
    record_paths: list[str] = field(default_factory=list)
    # Lines true of the whole build rather than of this module (no GPU and no lockfile, an
    # invalid [kernels] table of nvcc-plus.toml): the driver says each once per build.
    build_notes: list[str] = field(default_factory=list)


def optimize_ptx(ptx: str, *, mode: str = "optimize", source: str | None = None,
                 target: str | None = None, config=None) -> OptimizeOutcome:
    """Return a (possibly) optimized version of one PTX module produced by cicc.

    ``mode`` is ``roundtrip`` (parse and re-emit, no rewrites) or ``optimize``.
    ``source`` is the .cu file it came from and ``target`` its virtual architecture
    (``compute_90``), both for messages, records and the cache key. ``config``: the driver's
    dict (the nvcc-plus.toml document with ``config_path``; ``overrides``: flags by toml key; the
    run's ``deadline`` and ``progress`` observer; ``preprocessed``: the path of the translation
    unit as nvcc preprocessed it, launch blocks are read from it; ``restrict_variant``: a callable
    ``() -> str | None`` giving the same unit's PTX for this ``target`` compiled by cicc with
    ``-kernel-params-are-restrict`` -- what ``nvcc -restrict`` makes -- or None when it cannot be made.
    It is called at most once, and only when a kernel about to be searched could use it (the
    ``restrict-body`` pass: two or more pointer parameters, one written); the caller memoizes it and
    reports its own errors, and an exception it raises only loses that variant) or a
    :class:`superopt.config.resolved.Settings`.
    """
    if mode not in MODES:
        raise ValueError(f"unknown nvcc-plus mode {mode!r} (expected one of {', '.join(MODES)})")
    if mode == "off":
        return OptimizeOutcome(ptx=ptx, changed=False)
    import ptx_ir

    if mode == "roundtrip":
        module = ptx_ir.parse(ptx)
        canonical = ptx_ir.emit(module)
        if ptx_ir.emit(ptx_ir.parse(canonical)) != canonical:
            raise RuntimeError("ptx_ir printer is not stable on this module (emit(parse(emit(m))) != emit(m))")
        # Faithful printing: an unchanged module is its source text byte for byte, so the
        # PTX that fatbinary embeds as the JIT fallback is nvcc's own.
        return OptimizeOutcome(ptx=ptx_ir.emit(module, faithful=True), changed=False)
    from superopt.config.resolved import Settings
    from superopt.optimize import optimize_module

    cfg = config if isinstance(config, dict) else {}
    settings = Settings.from_config(config)
    try:
        result = optimize_module(ptx, target=target, source=source, settings=settings,
                                 deadline=cfg.get("deadline"), progress=cfg.get("progress"),
                                 unit=cfg.get("preprocessed"), restrict_variant=cfg.get("restrict_variant"))
    except BaseException as exc:
        partial = getattr(exc, "partial", None)
        if partial is not None:
            # What was decided before the stop, for a caller that may use it (the driver
            # does on its own timeout: those kernels were verified and measured).
            exc.outcome = _outcome(partial, ptx, source, settings)
        raise
    return _outcome(result, ptx, source, settings)


def _outcome(result, ptx: str, source: str | None, settings) -> OptimizeOutcome:
    try:
        saved = _save_records(result.records, source, settings.text("NVCC_PLUS_REPORT_DIR"))
    except OSError as exc:
        # A record that cannot be written must not discard the decision (the rewrite is
        # verified and measured); say where and why.
        saved = None
        result.messages.append(f"records not written to {exc.filename or 'NVCC_PLUS_REPORT_DIR'}: "
                               f"{exc.strerror or exc}")
    # Unchanged modules go back byte for byte as nvcc made them (a -G build embeds the PTX
    # text in the cubin, so even whitespace would show).
    return OptimizeOutcome(ptx=result.ptx if result.changed else ptx, changed=result.changed,
                           messages=result.messages, records=[result.records],
                           record_paths=[saved] if saved else [],
                           build_notes=list(getattr(result, "build_notes", None) or []))


def _save_records(records: dict, source: str | None, folder: str | None) -> str | None:
    """Write the module's record under ``folder`` (NVCC_PLUS_REPORT_DIR), if the user asked for reports."""
    import json
    from pathlib import Path

    if not folder or not records.get("kernels"):
        return None
    from superopt.store.cache import atomic_write_text
    from superopt.search.candidates import text_hash

    stem = Path(source).name if source else "module"
    name = f"{stem}.{records.get('target')}.{text_hash(json.dumps(records, sort_keys=True))[:8]}.json"
    path = Path(folder) / name
    atomic_write_text(path, json.dumps(records, indent=1))
    return str(path)
