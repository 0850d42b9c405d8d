"""Build-time overhead of nvcc-plus: a generated 20-file project built with plain nvcc,
nvcc-plus in `off` mode and nvcc-plus in `roundtrip` mode. Run: python -m bench.build_overhead"""
