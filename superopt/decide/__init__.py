"""Getting each kernel's decision: the four ways the pipeline asks, in order.

* :class:`~superopt.decide.stored.LockedDecisions` -- ``nvcc-plus.lock``;
* :class:`~superopt.decide.stored.CachedDecisions` -- the decision cache (under the explicit,
  captured and cluster-GPU keys);
* :class:`~superopt.decide.searches.ClusterSearches` -- a search sent to a Dask cluster;
* :class:`~superopt.decide.searches.LocalSearch` -- a search here, on a leased GPU or the emulator;
* with ``NVCC_PLUS_SEARCH=deferred``, :class:`~superopt.decide.deferred.DeferredSearches` in place of
  the two searches -- nvcc's code now, and a queue entry that the runner
  (:mod:`superopt.decide.queue_runner`) searches after the build.

Each is a :class:`~superopt.decide.job.DecisionSource`: it settles a kernel (records it, and
applies what it decided to the module run, :class:`~superopt.decide.run.ModuleRun`) or leaves it
to the next. :mod:`superopt.optimize` is the pipeline that asks them.
"""
