"""Is a candidate right, and is it faster? ptxas, inputs, the differential check, timing,
compute-sanitizer, the GPU lock, and the backends (GPU, CPU emulator) that run kernels."""
