"""A stand-in for compute-sanitizer with the GPU worker behind it (CPU tests of superopt.judge.sanitize).

Called as ``fake_sanitizer.py --tool T --log-file L --print-limit N <worker command...>``; it
speaks the worker protocol itself (every "kernel" changes nothing) and, at exit, writes a log
with the summary line compute-sanitizer prints. A PTX containing ``// plant: T`` gets one
error under tool T. ``FAKE_SANITIZER_FAIL=1`` makes it fail the way it does on a device it
cannot attach to (no summary, worker never starts)."""
import os
import sys

from superopt.judge.backends import _proto

args = sys.argv[1:]
tool = args[args.index("--tool") + 1]
log = args[args.index("--log-file") + 1]
if os.environ.get("FAKE_SANITIZER_FAIL"):
    with open(log, "w") as f:
        f.write("========= Error: Device not supported\n")
    _proto.send(1, {"ok": False, "error": "CudaError: cuInit: CUDA_ERROR_UNKNOWN (under the sanitizer)"})
    sys.exit(0)
errors = []
_proto.send(1, {"ok": True, "info": {"name": "Fake GPU", "pid": os.getpid()}})
while True:
    try:
        req = _proto.recv(0)
    except _proto.ProtocolEOF:
        break
    if req.get("op") == "exit":
        break
    if req.get("scrub_shared", True):
        # the real worker would scrub every SM's shared memory first: an instrumented launch
        # of millions of stores under the tool (superopt.judge.sanitize.run_under asks for none)
        errors.append("Error: the run request asks for a shared-memory scrub under the tool")
    if f"// plant: {tool}" in req.get("ptx", ""):
        what = ("Invalid __global__ read of size 16 bytes" if tool == "memcheck"
                else "Error: Race reported between Write access at k+0x40 and Read access at k+0x80")
        errors.append(what)
    res = [{"status": "ok", "error": None, "elapsed": 1e-6,
            "buffers": [(None, it[2], it[3]) for it in s["params"] if it[0] == "b"]} for s in req["sets"]]
    _proto.send(1, {"results": res, "log": "", "fatal": False})
with open(log, "w") as f:
    f.write("========= COMPUTE-SANITIZER\n")
    for e in errors:
        f.write(f"========= {e}\n=========     at k+0x80 in kernel\n")
    if tool == "racecheck":
        f.write(f"========= RACECHECK SUMMARY: {len(errors)} hazards displayed ({len(errors)} errors, 0 warnings)\n")
    else:
        f.write(f"========= ERROR SUMMARY: {len(errors)} error{'s' if len(errors) != 1 else ''}\n")
