#!/bin/sh
# Regenerate nvcc's PTX of the cheat-corpus kernels (the baselines), then the variants.
set -e
cd "$(dirname "$0")"
for k in saxpy blocksum; do
    nvcc -ptx -arch=sm_90 -O3 "$k.cu" -o "$k.ptx"
done
python make_variants.py
