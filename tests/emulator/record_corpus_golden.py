"""GPU truth for corpus kernels: record GPU outputs of tests/corpus kernels on seeded inputs.

Two steps:

    python tests/emulator/record_corpus_golden.py prepare [--jobs N] [--max-cases N]
        CPU only. For every plain -O3 ``*.sm_90.ptx`` corpus file (manifest variant "sm_90")
        and every kernel in it: infer a launch spec (superopt.specs.inference.infer_specs),
        generate one seeded input set and run it on the emulator (twice, to catch kernels
        whose outputs depend on uninitialised shared/local memory), with a per-kernel time
        cap. Kernels with a spec that the emulator runs with status ok, deterministically,
        within the byte and time caps become cases; golden/corpus_cases.json gets the case
        list (file, kernel, spec dict, seed) and the reasons every other kernel was skipped.

    python tests/emulator/record_corpus_golden.py record OUTDIR
        GPU. Runs every case of golden/corpus_cases.json once with the GPU backend and
        writes OUTDIR/corpus_outputs.npz (one compressed archive: ``<case>__init__<buf>``
        with the initial contents and ``<case>__final__<buf>`` with the GPU's final
        contents of every buffer) plus OUTDIR/corpus_cases.json (the case list with the
        GPU status of every case and the environment).

test_corpus_golden.py replays every case on the emulator and compares bit for bit.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(ROOT, "tests", "corpus")
GOLDEN = os.path.join(HERE, "golden")
CASES_JSON = os.path.join(GOLDEN, "corpus_cases.json")
OUTPUTS_NPZ = os.path.join(GOLDEN, "corpus_outputs.npz")

SEED = 20261129
KERNEL_CAP_S = 10.0            # infer + two emulator runs, per kernel
MAX_CASE_BYTES = 1_200_000     # all buffers of one case together (memory; inputs are not stored)
MAX_TOTAL_BYTES = 12_000_000   # out/inout buffers of all cases (raw; the .npz compresses ~4x)
MAX_CASE_EMU_S = 1.5           # one emulator run of a kept case (the CPU test replays it)
MAX_TOTAL_EMU_S = 60.0         # sum over kept cases (the CPU test replays them)
MAX_CASES = 200


def corpus_files() -> list[str]:
    with open(os.path.join(CORPUS, "manifest.json")) as f:
        m = json.load(f)
    return sorted(e["file"] for e in m["entries"] if e.get("variant") == "sm_90" and e["file"].endswith(".sm_90.ptx"))


def case_id(file: str, kernel: str) -> str:
    stem = os.path.basename(file).split(".")[0]
    return f"{stem}:{kernel}"


def input_set(case: dict):
    from superopt.judge.inputs import make_input_set
    from superopt.specs.launch_spec import LaunchSpec
    spec = LaunchSpec.from_dict(case["spec"])
    return spec, make_input_set(spec, seed=case["seed"], index=0)


def read_ptx(file: str) -> str:
    with open(os.path.join(CORPUS, file)) as f:
        return f.read()


# --------------------------------------------------------------------------- prepare (CPU)

class _Cap(Exception):
    pass


def _alarm(*_):
    raise _Cap(f"over the {KERNEL_CAP_S:.0f} s per-kernel cap")


_MODS: dict = {}


def _check_kernel(job):
    """(file, kernel) -> dict with either 'case' or 'skip' (reason)."""
    file, kernel = job
    import ptx_ir
    from superopt.judge.backends import get_backend
    from superopt.specs.inference import infer_specs
    t0 = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, KERNEL_CAP_S)
    try:
        if file not in _MODS:
            _MODS.clear()
            text = read_ptx(file)
            _MODS[file] = (text, ptx_ir.parse(text))
        text, mod = _MODS[file]
        res = infer_specs(mod, kernel)
        if not res.specs:
            return {"file": file, "kernel": kernel, "skip": f"no spec: {res.reason}"}
        spec = res.specs[0]
        case = {"id": case_id(file, kernel), "file": file, "kernel": kernel, "spec": spec.to_dict(), "seed": SEED}
        spec, s = input_set(case)
        nbytes = sum(int(np.asarray(a).nbytes) for a in s.data.values())
        if nbytes > MAX_CASE_BYTES:
            return {"file": file, "kernel": kernel, "skip": f"buffers too large ({nbytes} bytes)"}
        emu = get_backend("emulator")
        t1 = time.perf_counter()
        r1 = emu.run_many(text, spec, [s], timeout=KERNEL_CAP_S)[0]
        t_run = time.perf_counter() - t1
        if r1.status != "ok":
            return {"file": file, "kernel": kernel, "skip": f"emulator {r1.status}: {r1.error}"[:400]}
        if not all(r1.guards_intact.values()):
            return {"file": file, "kernel": kernel, "skip": f"emulator guard damage: {r1.guard_damage}"}
        spec, s2 = input_set(case)
        r2 = emu.run_many(text, spec, [s2], timeout=KERNEL_CAP_S)[0]
        if r2.status != "ok" or any(
                not np.array_equal(np.asarray(r1.outputs[k]).view(np.uint8), np.asarray(r2.outputs[k]).view(np.uint8))
                for k in r1.outputs):
            return {"file": file, "kernel": kernel, "skip": "emulator outputs differ between two runs "
                    "(reads uninitialised shared/local memory or races)"}
        case["bytes"] = nbytes
        case["out_bytes"] = sum(int(np.asarray(s.data[b.name]).nbytes) for b in spec.buffers if b.direction != "in")
        case["init_sha256"] = {k: hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).tobytes()).hexdigest()
                               for k, a in s.data.items()}
        case["emu_seconds"] = round(t_run, 3)
        return {"file": file, "kernel": kernel, "case": case, "seconds": time.perf_counter() - t0}
    except _Cap as e:
        return {"file": file, "kernel": kernel, "skip": str(e)}
    except Exception as e:  # noqa: BLE001
        return {"file": file, "kernel": kernel, "skip": f"error: {type(e).__name__}: {e}"[:400]}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def prepare(jobs: int, max_cases: int) -> int:
    import multiprocessing as mp
    import ptx_ir
    work = []
    for file in corpus_files():
        mod = ptx_ir.parse(read_ptx(file))
        work += [(file, k.name) for k in mod.kernels]
    prev = os.environ.get("CORPUS_PREV_CASES")
    if prev:        # reuse a previous run's skips that no cap change can affect
        with open(prev) as f:
            old = json.load(f)["skipped"]
        keep = ("no spec", "emulator", "over the", "error")
        known = {(o["file"], o["kernel"]): o["reason"] for o in old if o["reason"].startswith(keep)}
        pre = [{"file": f, "kernel": k, "skip": known[(f, k)]} for f, k in work if (f, k) in known]
        work = [w for w in work if w not in known]
    else:
        pre = []
    print(f"{len(work)} kernels in {len(corpus_files())} files", flush=True)
    t0 = time.time()
    with mp.get_context("fork").Pool(jobs, maxtasksperchild=40) as pool:
        results = list(pre)
        for r in pool.imap(_check_kernel, work, chunksize=1):
            results.append(r)
            tag = "ok" if "case" in r else "skip: " + r["skip"][:100]
            print(f"[{time.time() - t0:6.1f}s] {r['file']} {r['kernel'][:60]}: {tag}", flush=True)
    cases, skipped, total, tbytes = [], [], 0.0, 0
    for r in results:
        if "case" not in r:
            skipped.append({"file": r["file"], "kernel": r["kernel"], "reason": r["skip"]})
            continue
        c = r["case"]
        if c["emu_seconds"] > MAX_CASE_EMU_S:
            skipped.append({"file": c["file"], "kernel": c["kernel"],
                            "reason": f"emulator too slow for the CPU test ({c['emu_seconds']} s)"})
        elif (len(cases) >= max_cases or total + c["emu_seconds"] > MAX_TOTAL_EMU_S
              or tbytes + c["out_bytes"] > MAX_TOTAL_BYTES):
            skipped.append({"file": c["file"], "kernel": c["kernel"], "reason": "case cap reached"})
        else:
            cases.append(c)
            total += c["emu_seconds"]
            tbytes += c["out_bytes"]
    doc = {"seed": SEED, "files": corpus_files(), "cases": cases, "skipped": skipped,
           "caps": {"kernel_s": KERNEL_CAP_S, "case_bytes": MAX_CASE_BYTES, "case_emu_s": MAX_CASE_EMU_S,
                    "total_emu_s": MAX_TOTAL_EMU_S, "total_bytes": MAX_TOTAL_BYTES, "cases": max_cases}}
    os.makedirs(GOLDEN, exist_ok=True)
    with open(CASES_JSON, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"{len(cases)} cases ({total:.1f} s emulated), {len(skipped)} skipped -> {CASES_JSON}")
    return 0


# --------------------------------------------------------------------------- record (GPU)

def record(outdir: str) -> int:
    from superopt.judge.backends import get_backend
    os.makedirs(outdir, exist_ok=True)
    with open(CASES_JSON) as f:
        doc = json.load(f)
    gpu = get_backend("gpu")
    arrays, status = {}, {}
    texts: dict = {}
    for c in doc["cases"]:
        t0 = time.time()
        if c["file"] not in texts:
            texts[c["file"]] = read_ptx(c["file"])
        spec, s = input_set(c)
        try:
            r = gpu.run_many(texts[c["file"]], spec, [s], timeout=20)[0]
        except Exception as e:  # noqa: BLE001
            status[c["id"]] = {"status": "error", "error": f"{type(e).__name__}: {e}"}
            print(f"{c['id']}: error {e}", flush=True)
            continue
        status[c["id"]] = {"status": r.status, "error": r.error, "guards": r.guards_intact,
                           "seconds": round(time.time() - t0, 3)}
        if r.status == "ok":
            for name, a in s.data.items():
                fin = np.asarray(r.outputs[name])
                if not np.array_equal(np.ascontiguousarray(fin).view(np.uint8), np.ascontiguousarray(a).view(np.uint8)):
                    arrays[f"{c['id']}__final__{name}"] = fin      # absent: final == init
        print(f"{c['id']}: {r.status} {r.error or ''}", flush=True)
    np.savez_compressed(os.path.join(outdir, "corpus_outputs.npz"), **arrays)
    env = {}
    try:
        env = {k: v for k, v in gpu.describe().items() if isinstance(v, (str, int, float, bool))}
    except Exception as e:  # noqa: BLE001
        env = {"error": repr(e)}
    doc["gpu"] = {"environment": env, "status": status}
    with open(os.path.join(outdir, "corpus_cases.json"), "w") as f:
        json.dump(doc, f, indent=1)
    ok = sum(1 for v in status.values() if v["status"] == "ok")
    print(f"recorded {ok}/{len(doc['cases'])} cases; env {env}")
    return 0


def main(argv: list[str]) -> int:
    sys.path.insert(0, ROOT)
    if argv and argv[0] == "prepare":
        jobs = int(argv[argv.index("--jobs") + 1]) if "--jobs" in argv else (os.cpu_count() or 2)
        mc = int(argv[argv.index("--max-cases") + 1]) if "--max-cases" in argv else MAX_CASES
        return prepare(jobs, mc)
    if len(argv) == 2 and argv[0] == "record":
        return record(argv[1])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
