"""nvcc_plus: the drop-in nvcc driver."""
