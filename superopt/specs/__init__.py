"""How to launch a kernel so it can be judged: the spec format, `// nvcc-plus:` comments,
static facts from the IR, the bounds tracer, and inference."""
