"""A GPU worker stand-in that runs the real ``Worker._op_run`` (sets launched as groups) on the
fake driver of tests/judge/test_worker_groups.py: every "kernel" copies its input to its output
doubled, and the launch given by ``crash:K`` in the PTX text (the K-th launch this worker makes,
from 0) faults, ending the worker as a sticky error does. Each reply is logged (``op: log``)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from superopt.judge.backends import _gpu_worker, _proto  # noqa: E402
from fake_worker_loop import requests  # noqa: E402 - beside this script
from tests.judge.test_worker_groups import copy_doubled, group_worker  # noqa: E402

launched = [0]
crash_at = [None]


def kernel(addrs, cu):
    k = launched[0]
    launched[0] += 1
    if crash_at[0] is not None and k == crash_at[0]:
        raise MemoryError("illegal address")
    copy_doubled(addrs, cu)


_gpu_worker._OUT = None          # no early "GPU done" message: the parent asks for none here
w, cu = group_worker(kernel)
log = []
for req in requests({"name": "Fake GPU", "pid": os.getpid(), "resident_limit": 0}, log):
    text = req.get("ptx", "")
    crash_at[0] = int(text.split("crash:")[1].split()[0]) if "crash:" in text else None
    rep = w._op_run(req)
    log.append({"batch": req.get("batch", True), "statuses": [r["status"] for r in rep["results"]],
                "batched_fault": rep.get("batched_fault", False)})
    _proto.send(1, rep)
    if rep.get("fatal"):
        sys.exit(3)
