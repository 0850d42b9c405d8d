"""A stand-in for superopt.judge.backends._gpu_worker that misbehaves on purpose (CPU tests of
the parent's process handling): python judge_fake_worker.py MODE"""
import os
import sys
import time

from fake_worker_loop import requests  # beside this script
from superopt.judge.backends import _proto

mode = sys.argv[1]
if mode == "die":
    sys.exit(1)
if mode == "nogpu":
    _proto.send(1, {"ok": False, "error": "CudaError: cuInit: CUDA_ERROR_NO_DEVICE"})
    sys.exit(0)
if mode == "slow_start":
    time.sleep(60)
for req in requests({"name": "Fake GPU", "pid": os.getpid()}):
    if mode == "hang":
        time.sleep(600)
    if mode == "crash":
        sys.stderr.write("segfault-ish\n")
        os._exit(5)
    if mode == "fatal":
        _proto.send(1, {"results": [{"status": "crash", "error": "kernel: CUDA_ERROR_ILLEGAL_ADDRESS",
                                     "elapsed": None, "buffers": None} for _ in req["sets"]], "log": "", "fatal": True})
        continue
    # echo: the "kernel" changes nothing
    res = [{"status": "ok", "error": None, "elapsed": 1e-6,
            "buffers": [(None, it[2], it[3]) for it in s["params"] if it[0] == "b"]} for s in req["sets"]]
    _proto.send(1, {"results": res, "log": "", "fatal": False})
