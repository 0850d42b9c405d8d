#!/bin/sh
# Regenerate nvcc's PTX of the race corpus's kernels (the baselines), then the variants:
#   sh tests/judge/cheats_races/build_ptx.sh
set -e
cd "$(dirname "$0")"
for k in treesum scale pairsq pairswap stencil3 bucketsum; do
    nvcc -ptx -arch=sm_90 -O3 "$k.cu" -o "$k.ptx"
done
python3 make_variants.py
