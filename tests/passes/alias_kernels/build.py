"""Regenerate accumulate.ptx from accumulate.cu (nvcc 13.0, sm_90, -O3)."""
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
subprocess.run(["nvcc", "-arch=sm_90", "-O3", "-ptx", str(HERE / "accumulate.cu"),
                "-o", str(HERE / "accumulate.ptx")], check=True)
