"""Emulator throughput: thread-instructions per second on corpus-like kernels.

    python -m bench.emulator.run [--quick] [--out bench/results] [KERNEL ...]

Kernels: bench/kernels/kernels.cu (the 17 benchmark kernels users write, with their
launch specs in bench/kernels/specs.toml), compiled to PTX for sm_90 with nvcc, at sizes
scaled down for a CPU (each launch is some 10^6 to 10^8 thread-instructions). Each kernel
is launched once to warm up (PTX compiled to closures) and then timed. A
thread-instruction is one PTX instruction executed by one thread. Writes
bench/results/emulator-<date>.json: date, machine, commit (or 'uncommitted'), per-kernel
figures and the median.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "bench", "kernels", "kernels.cu")
SPECS = os.path.join(ROOT, "bench", "kernels", "specs.toml")

# Problem sizes for a 2-core CPU (the GPU benchmark uses ~4M elements).
SIZES = {
    "scale4": {"n": 1 << 20}, "axpby4": {"n": 1 << 20}, "saxpy": {"n": 1 << 20},
    "gemv_rows": {"rows": 1023, "cols": 256}, "bicg_cols": {"rows": 256, "cols": 1023},
    "gemm_naive": {"M": 127, "N": 129, "K": 64}, "gemm_tiled": {"M": 127, "N": 129, "K": 64},
    "reduce_tree": {"n": 1 << 20}, "reduce_int_tail": {"n": 1 << 20}, "histogram256": {"n": 1 << 18},
    "transpose_naive": {"rows": 511, "cols": 513}, "stencil2d": {"w": 513, "h": 511},
    "stencil3d": {"nx": 65, "ny": 63, "nz": 31}, "softmax_rows": {"rows": 2047, "cols": 64},
    "layernorm_rows": {"rows": 2047, "cols": 64}, "scan_block": {"n": 1 << 18},
    "conv1d": {"n": 1 << 18, "taps": 9},
}
QUICK_SCALE = 8


def compile_ptx(tmp: str) -> str:
    out = os.path.join(tmp, "kernels.ptx")
    subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-ptx", SRC, "-o", out], check=True)
    with open(out) as f:
        return f.read()


def _commit() -> str:
    try:
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "superopt/judge/emulator", "ptx_ir/semantics",
                                "bench/emulator"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return "uncommitted" if dirty or not head else head
    except OSError:
        return "uncommitted"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def run_kernel(ptx: str, spec, overrides: dict, seed: int = 1234) -> dict:
    from superopt.judge.emulator import LoadedModule
    from superopt.judge.inputs import make_input_set
    from superopt.specs.launch_spec import Scalar
    from superopt.judge.backends.emulator import _pack_scalar
    s = make_input_set(spec, seed, 0, scalars=overrides)
    rs = s.spec
    dev = LoadedModule(ptx)
    params = []
    for p in rs.params:
        if isinstance(p, Scalar):
            params.append(_pack_scalar(p))
        else:
            data = np.ascontiguousarray(s.data[p.name]).view(np.uint8).reshape(-1)
            a = dev.alloc(data.size + 512)
            dev.heap.write(a + 256, data)
            params.append(a + 256)
    t0 = time.perf_counter()
    dev.program(spec.kernel)
    compile_s = time.perf_counter() - t0
    st = dev.launch(spec.kernel, rs.grid, rs.block, params, shared_bytes=rs.shared_bytes, timeout=600)
    return {"grid": list(rs.grid), "block": list(rs.block), "threads": int(np.prod(rs.grid) * np.prod(rs.block)),
            "sizes": overrides, "thread_instructions": int(st["thread_instructions"]),
            "issues": int(st["issues"]), "seconds": round(st["seconds"], 4),
            "cpu_seconds": round(st["cpu_seconds"], 4), "compile_seconds": round(compile_s, 4),
            "mtips": round(st["thread_instructions"] / st["seconds"] / 1e6, 2),
            "mtips_cpu": round(st["thread_instructions"] / max(st["cpu_seconds"], 1e-9) / 1e6, 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="*")
    ap.add_argument("--quick", action="store_true", help=f"sizes / {QUICK_SCALE} (smoke test)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    from superopt.specs.launch_spec import load_specs
    specs = load_specs(SPECS)
    names = args.kernels or list(SIZES)
    with tempfile.TemporaryDirectory() as tmp:
        ptx = compile_ptx(tmp)
    results = {}
    for name in names:
        ov = dict(SIZES.get(name, {}))
        if args.quick:
            ov = {k: max(8, v // QUICK_SCALE) if k not in ("taps", "cols") else v for k, v in ov.items()}
        try:
            r = run_kernel(ptx, specs[name], ov)
            r["status"] = "ok"
        except Exception as e:  # noqa: BLE001
            r = {"status": f"{type(e).__name__}: {e}"[:300]}
        results[name] = r
        print(f"{name:18s} {r.get('mtips', '-'):>9} M thread-instr/s  "
              f"{r.get('thread_instructions', 0):>11} thread-instr  {r.get('seconds', 0):7.3f} s  {r['status'][:60]}",
              flush=True)
    ok = [r["mtips"] for r in results.values() if r["status"] == "ok"]
    med = statistics.median(ok) if ok else None
    ok_cpu = [r["mtips_cpu"] for r in results.values() if r["status"] == "ok"]
    med_cpu = statistics.median(ok_cpu) if ok_cpu else None
    total_ti = sum(r["thread_instructions"] for r in results.values() if r["status"] == "ok")
    total_s = sum(r["seconds"] for r in results.values() if r["status"] == "ok")
    doc = {
        "benchmark": "emulator thread-instructions per second",
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "machine": {"cpu": _cpu(), "cores": os.cpu_count(), "python": platform.python_version(),
                    "numpy": np.__version__, "platform": platform.platform()},
        "commit": _commit(), "quick": args.quick, "goal_mtips": 50,
        "load_average": list(os.getloadavg()),
        "note": "mtips: thread-instructions per wall second; mtips_cpu: per CPU second of this "
                "process (less sensitive to other jobs on a shared machine). Kernels the emulator "
                "refuses (approximate transcendentals) are listed with their verdict, not timed.",
        "kernels": results, "median_mtips": med, "median_mtips_cpu": med_cpu,
        "aggregate_mtips": round(total_ti / total_s / 1e6, 2) if total_s else None,
    }
    print(f"median {med} M thread-instr/s (per CPU second: {med_cpu}); aggregate {doc['aggregate_mtips']} M/s "
          f"over {len(ok)} kernels; load average {os.getloadavg()[0]:.1f}")
    if not args.no_write:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, f"emulator-{_dt.date.today().isoformat()}.json")
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
