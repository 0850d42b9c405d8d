"""Many GPUs and clusters: how fast nvcc-plus builds a many-kernel project on 1 GPU, 2 GPUs and a Dask cluster."""
