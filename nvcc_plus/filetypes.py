"""Input file kinds nvcc knows, by extension (kept import-free: used on the start-up path)."""
CUDA_SOURCE_EXTS = {".cu"}
HOST_SOURCE_EXTS = {".c", ".cc", ".cpp", ".cxx", ".c++", ".cp", ".C"}
# Everything nvcc takes as an input file (tells a launcher's compiler path from an input).
INPUT_EXTS = CUDA_SOURCE_EXTS | HOST_SOURCE_EXTS | {
    ".o", ".obj", ".a", ".lib", ".so", ".ptx", ".cubin", ".fatbin", ".gpu", ".i", ".ii",
    ".ltoir", ".res", ".dll"}
