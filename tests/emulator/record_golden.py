"""Record GPU outputs of the golden cases (run on a machine with an NVIDIA GPU).

    python tests/emulator/record_golden.py OUTDIR [case ... | --missing]

For every case of golden_cases.py: load golden/<ptx>.ptx with the driver's JIT (cuda-python,
through the judge's worker class superopt.judge.backends._gpu_worker.Worker), fill every buffer (inputs from the case's
seeded generator, outputs poisoned with 0xCD) inside guard zones, launch, read everything
back and write OUTDIR/<case>.npz with ``init__<buf>`` and ``final__<buf>`` arrays plus
OUTDIR/meta.json (GPU, driver, CUDA versions, per-case status). Each case runs in a child
process with a timeout, so one faulting or hanging kernel cannot spoil the others.

The CPU tests (test_golden.py) replay the same PTX and inputs on the emulator.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import golden_cases as G  # noqa: E402

GUARD = 256
GUARD_BYTE = 0xAB


_WORKER = None


def _worker():
    """The judge's CUDA driver wrapper (superopt.judge.backends._gpu_worker.Worker)."""
    global _WORKER
    if _WORKER is None:
        sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
        from superopt.judge.backends._gpu_worker import Worker
        _WORKER = Worker(0)
    return _WORKER


def run_case_gpu(c: G.Case) -> dict:
    w = _worker()
    cu = w.cu
    bufs = G.initial_buffers(c, np.random.default_rng(c.seed))
    with open(os.path.join(HERE, "golden", f"{c.ptx}.ptx")) as f:
        mod, _log = w.load(f.read())
    fn = w.function(mod, c.kernel)
    dev, args = {}, []
    try:
        for p in c.params:
            if isinstance(p, G.Buf):
                raw = np.ascontiguousarray(bufs[p.name]).view(np.uint8).reshape(-1)
                host = np.concatenate([np.full(GUARD, GUARD_BYTE, np.uint8), raw,
                                       np.full(GUARD, GUARD_BYTE, np.uint8)])
                d = w._chk(cu.cuMemAlloc(host.size), "cuMemAlloc")
                w._chk(cu.cuMemcpyHtoD(d, host.ctypes.data, host.size), "cuMemcpyHtoD")
                dev[p.name] = (d, host.size)
                args.append(np.array([int(d) + GUARD], np.uint64))
            else:
                args.append(np.frombuffer(G.scalar_bytes(p), np.uint8).copy())
        grid = tuple(list(c.grid) + [1] * (3 - len(c.grid)))
        block = tuple(list(c.block) + [1] * (3 - len(c.block)))
        for _ in range(c.launches):
            w._launch(fn, grid, block, c.shared_bytes, args)
        w._chk(cu.cuCtxSynchronize(), "cuCtxSynchronize")
        out, guards = {}, {}
        for b in c.buffers():
            d, n = dev[b.name]
            host = np.empty(n, np.uint8)
            w._chk(cu.cuMemcpyDtoH(host.ctypes.data, d, n), "cuMemcpyDtoH")
            raw = host[GUARD:-GUARD]
            guards[b.name] = bool((host[:GUARD] == GUARD_BYTE).all() and (host[-GUARD:] == GUARD_BYTE).all())
            out["init__" + b.name] = bufs[b.name]
            final = raw.view(bufs[b.name].dtype)
            if b.role != "in":
                out["final__" + b.name] = final
            elif not np.array_equal(final.view(np.uint8), np.ascontiguousarray(bufs[b.name]).view(np.uint8).reshape(-1)):
                out["final__" + b.name] = final          # an input that changed: keep it
    finally:
        for d, _ in dev.values():
            cu.cuMemFree(d)
        cu.cuModuleUnload(mod)
    return {"arrays": out, "guards": guards}


def worker(outdir: str, names: list[str]) -> None:
    for name in names:
        c = G.case(name)
        t0 = time.time()
        r = run_case_gpu(c)
        np.savez_compressed(os.path.join(outdir, f"{name}.npz"), **r["arrays"])
        with open(os.path.join(outdir, f"{name}.status.json"), "w") as f:
            json.dump({"status": "ok", "guards": r["guards"], "seconds": time.time() - t0}, f)
        print(f"recorded {name} in {time.time() - t0:.2f}s guards={r['guards']}", flush=True)


def environment() -> dict:
    info = {}
    try:
        info.update({k: v for k, v in _worker().info.items() if k in ("name", "cc", "driver_version", "sm_count")})
        info["gpu"] = info.pop("name")
    except Exception as e:  # noqa: BLE001
        info["error"] = repr(e)
    try:
        info["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                             "--format=csv,noheader"], capture_output=True,
                                            text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    info["numpy"] = np.__version__
    return info


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "--worker":
        worker(argv[1], argv[2:])
        return 0
    outdir = argv[0]
    os.makedirs(outdir, exist_ok=True)
    names = argv[1:] or [c.name for c in G.CASES]
    if names == ["--missing"]:          # the cases without a committed fixture yet
        have = os.path.join(HERE, "golden", "fixtures")
        names = [c.name for c in G.CASES if not os.path.exists(os.path.join(have, f"{c.name}.npz"))]
    status = {}
    todo = list(names)
    while todo:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", outdir] + todo)
        try:
            proc.wait(timeout=40 + 4 * len(todo))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        done = [n for n in todo if os.path.exists(os.path.join(outdir, f"{n}.status.json"))]
        for n in done:
            with open(os.path.join(outdir, f"{n}.status.json")) as f:
                status[n] = json.load(f)
        rest = [n for n in todo if n not in done]
        if rest:
            status[rest[0]] = {"status": "failed", "returncode": proc.returncode}
            print(f"case {rest[0]} failed (rc={proc.returncode})", flush=True)
            rest = rest[1:]
        todo = rest
    meta = {"environment": environment(), "cases": status, "guard": GUARD, "guard_byte": GUARD_BYTE}
    with open(os.path.join(outdir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    print(json.dumps(meta["environment"]))
    return 0 if all(s.get("status") == "ok" for s in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
