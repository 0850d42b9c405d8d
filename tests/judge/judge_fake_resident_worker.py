"""A GPU worker stand-in that keeps inputs as the real one does (superopt.judge.backends.resident,
``_gpu_worker.Worker._resident_blobs``) on a fake device (host arrays), and answers each run
with the bytes it would have copied into every buffer: the parent's results are then the
inputs as the worker saw them (a buffer equal to the array the request expects it to hold is
answered "expected", as the real worker's device compare answers it). python judge_fake_resident_worker.py MODE (keep | forget:
the store is emptied after every request, so the parent's next "use" finds nothing)."""
import os
import sys

import numpy as np

from fake_worker_loop import requests  # beside this script
from superopt.judge.backends import _proto
from superopt.judge.backends._gpu_worker import Worker
from superopt.judge.backends.resident import WorkerStore

mode = sys.argv[1]
device: dict = {}


def alloc(n):
    device[len(device)] = bytearray(n)
    return len(device) - 1


def upload(d, host):
    device[d][:] = host.tobytes()


w = object.__new__(Worker)
w.store = WorkerStore(64 << 20, alloc, upload, lambda d: device.pop(d, None),
                      lambda d, n: hash(bytes(device[d][:n])))
log = []
prepared = None         # (id, blobs, kept device copies) of a prepared timing
for req in requests({"name": "Fake GPU", "pid": os.getpid(), "resident_limit": w.store.limit}, log):
    if req.get("op") == "time_prepare":
        # the real worker's setup of a timing before its rounds (under a shared GPU step): it
        # chooses what the copies are filled from, kept for the "time" request naming it
        prepared = (req["prepare_id"], *w._timing_blobs(req))
        log.append({"op": "time", "resident": req.get("resident"), "from_device": sorted(prepared[2]),
                    "kept": len(w.store), "prepared": True})
        _proto.send(1, {"prepared": req["prepare_id"]})
        continue
    if req.get("op") == "time":
        # the real worker's choice of what a timing fills from kept copies; the reply says
        # which bytes each buffer of the set would get
        if prepared is not None and req.get("prepared") == prepared[0]:
            _, blobs, dev = prepared
        else:
            blobs, dev = w._timing_blobs(req)
            log.append({"op": "time", "resident": req.get("resident"), "from_device": sorted(dev),
                        "kept": len(w.store)})
        prepared = None
        seen = [bytes(device[dev[it[1]]]) if it[1] in dev else np.asarray(blobs[it[1]]).tobytes()
                for it in req["set"]["params"] if it[0] in ("b", "e", "u")]
        _proto.send(1, {"a_ms": [1.0] * 30, "b_ms": [1.0] * 30, "seen": [x.hex() for x in seen]})
        if mode == "forget":
            w.store.clear()
        continue
    blobs = _proto.read_blobs(req["blobs"])
    sent = [int(b.nbytes) for b in blobs]
    blobs, dev, missing = w._resident_blobs(req, blobs)
    log.append({"sent": sent, "resident": req.get("resident"), "missing": missing, "kept": len(w.store)})
    if missing:
        _proto.send(1, {"resident_missing": missing, "fatal": False})
        continue
    res = []
    expected = 0
    for s in req["sets"]:
        bufs = []
        expect = s.get("expect") or {}
        for pos, it in enumerate(x for x in s["params"] if x[0] not in ("s", "t")):
            idx = it[1]
            data = np.frombuffer(bytes(device[dev[idx]]), np.uint8) if idx in dev else np.asarray(blobs[idx])
            want = expect.get(pos)
            if want in dev and bytes(device[dev[want]]) == data.tobytes():
                bufs.append(("expected", it[2], it[3]))     # as the real worker answers it
                expected += 1
            else:
                bufs.append((np.array(data, np.uint8), it[2], it[3]))
        res.append({"status": "ok", "error": None, "elapsed": 1e-6, "buffers": bufs})
    log[-1]["expected"] = expected
    _proto.send(1, {"results": res, "log": "", "fatal": False})
    if mode == "forget":
        w.store.clear()
