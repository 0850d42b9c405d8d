"""`python -m bench`: the kernel benchmark (baseline nvcc -O3 vs nvcc-plus) on a GPU."""
from bench.kernels.run import main

main()
