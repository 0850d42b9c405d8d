"""Is a candidate right, and is it faster? ptxas, inputs, the differential check, timing,
compute-sanitizer, the GPU lock, and the backends (GPU, CPU emulator) that run kernels.

The search sees all of it through one interface, :class:`superopt.judge.protocol.Judge`;
:class:`superopt.judge.judge.BackendJudge` is the real one and
:class:`superopt.judge.cache.CachingJudge` remembers its answers by (baseline, candidate, spec).
"""
from superopt.judge.cache import CachingJudge
from superopt.judge.judge import BackendJudge
from superopt.judge.protocol import Judge

__all__ = ["BackendJudge", "CachingJudge", "Judge"]
