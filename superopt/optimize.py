"""The pipeline of one PTX module: for each kernel, ask the decision sources in order.

1. ``nvcc-plus.lock`` (:class:`~superopt.decide.stored.LockedDecisions`),
2. the decision cache (:class:`~superopt.decide.stored.CachedDecisions`),
3. a search: on the cluster (:class:`~superopt.decide.searches.ClusterSearches`) when one is
   configured, else here (:class:`~superopt.decide.searches.LocalSearch`); with
   ``NVCC_PLUS_SEARCH=deferred`` instead a queue entry for a search after the build
   (:class:`~superopt.decide.deferred.DeferredSearches`), and nvcc's code in this one.

The first source that settles a kernel decides it. This is what :func:`superopt.api.optimize_ptx`
runs in ``optimize`` mode and what ``superopt optimize`` runs on a file.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import ptx_ir
from superopt.config.resolved import Settings
from superopt.decide.run import ModuleResult, ModuleRun
from superopt.search.options import search_options

if TYPE_CHECKING:
    from superopt.judge import Judge

__all__ = ["optimize_module", "ModuleResult"]


def optimize_module(ptx: str, *, target: str | None = None, source: str | None = None,
                    settings: Settings | None = None, deadline: float | None = None, progress=None,
                    kernels: list[str] | None = None, judge: "Judge | None" = None,
                    spec_for=None, unit: str | None = None, restrict_variant=None) -> ModuleResult:
    """Decide every kernel of ``ptx`` (or those named in ``kernels``). ``deadline``: no search
    starts after it (time.time()); ``progress``: a :class:`superopt.search.progress.SearchProgress`;
    ``judge``: judge with this instead of the configured backend; ``spec_for(module, kernel)``:
    (specs, origin) or (None, reason) instead of the configured spec sources; ``unit``: the path of
    the translation unit as nvcc preprocessed it (launch blocks are read from it);
    ``restrict_variant``: ``() -> str | None``, the same unit's PTX compiled by cicc with
    ``-kernel-params-are-restrict`` (called at most once, only when a kernel to be searched could
    use it: the ``restrict-body`` pass)."""
    module = ptx_ir.parse(ptx)
    settings = settings or Settings()
    options = search_options(settings)
    run = ModuleRun(ptx, module, target=target or (module.target[0] if module.target else "sm_75"),
                    source=source, settings=settings, options=options, kernels=kernels, deadline=deadline,
                    progress=progress, unit=unit, restrict_variant=restrict_variant)
    sources = _decision_sources(run, judge, spec_for)
    try:
        for job in run.jobs(by_expected_gain=sources[-1].searches()):
            for src in sources:
                if src.decide(job):
                    break
        for src in sources:
            src.finish()
    except BaseException as exc:
        # A hard stop (the driver's NVCC_PLUS_TIMEOUT alarm) or a failure in the middle of a
        # kernel: what was decided before it is verified and measured; the exception carries
        # that partial result, and the caller decides whether to use it.
        if not isinstance(exc, (KeyboardInterrupt, SystemExit)):
            for src in sources:
                salvage = getattr(src, "salvage", None)    # searches that ended in other threads
                if salvage is not None:
                    try:
                        salvage()
                    except Exception:  # noqa: BLE001 - the interruption is what the caller hears of
                        pass
            exc.partial = run.partial(exc)
        raise
    return run.result()


def _decision_sources(run: ModuleRun, judge: "Judge | None", spec_for) -> list:
    from superopt.decide.searches import ClusterSearches, LocalSearch
    from superopt.decide.stored import CachedDecisions, LockedDecisions
    from superopt.search.cluster import address_from, shared, worker_judge
    from superopt.store.queue import search_mode
    if search_mode(run.settings) == "deferred" and judge is None and spec_for is None:
        # The build never waits: what no stored decision settles is queued for a search after it.
        from superopt.decide.deferred import DeferredSearches
        deferred = DeferredSearches(run)
        return [LockedDecisions(run, None, can_time=deferred.can_time),
                CachedDecisions(run, None, cluster=_remembered_cluster(run.settings)), deferred]
    address = address_from(run.settings) if judge is None else None
    if address:
        # Searches go to the cluster's GPU workers; decisions come back, are cached and locked here.
        cluster = shared(address)
        return [LockedDecisions(run, judge, can_time=lambda: True), CachedDecisions(run, judge, cluster=cluster),
                ClusterSearches(run, cluster, spec_for)]
    if judge is None and run.settings.text("NVCC_PLUS_JUDGE"):
        judge = worker_judge(run.options)          # developer hook (the CPU tests, bench/scale --dry-run)
    local = LocalSearch(run, judge, spec_for)
    return [LockedDecisions(run, judge, can_time=local.can_time), CachedDecisions(run, judge), local]


def _remembered_cluster(settings):
    """With a cluster configured, the GPU models its workers had (remembered on disk), so a deferred
    build finds the decisions a runner stored under them without contacting the cluster."""
    from superopt.search.cluster import RememberedModels, address_from
    address = address_from(settings)
    return RememberedModels(address) if address else None
