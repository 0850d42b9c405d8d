"""The prompts of ``superopt generate``: the task, the pinned header, the reference, the
launch, the layout, and what failed before.

A chat of two messages (system, user). The user message carries:

* the description, the signature and, per parameter, its PTX name, element type, direction
  and length (from the launch spec), and the launch shape(s) the check uses;
* the reference as source: the numpy function (with the contract it is called under) or the
  CUDA kernel's source -- the truth the kernel must reproduce bit for bit;
* the header to start with (the grammar pins it anyway) and a short example of the layout
  the grammar admits (ptx_ir's canonical layout: a tab before each statement, a tab
  between opcode and operands);
* earlier attempts with the judge's reasons: ptxas errors with the line they name, the
  first mismatch (input set, scalars, buffer, index, expected and produced values), what the
  parser or the contract check refused, cut-off answers -- and the last failed kernel, so
  a repair round can fix it instead of starting again.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SYSTEM", "Feedback", "build_generation_messages", "LAYOUT_EXAMPLE"]

SYSTEM = (
    "You write CUDA kernels directly in PTX for nvcc-plus. Every kernel you write is checked before it is "
    "used: ptxas must accept it, and on fresh random inputs (NaN, Inf, denormals, -0.0, sizes that are not "
    "multiples of the block) it must produce bit-identical outputs to a reference, write nothing the "
    "reference leaves alone, and never touch memory outside its buffers. A kernel that fails is rejected, "
    "and you are shown why. Write simple, correct PTX first: bounds checks on every thread, loads and stores "
    "through cvta.to.global addresses, every register declared."
)

# A small kernel in the layout the grammar admits (y[i] = 2 * x[i] for i < n): shows the
# shape of a body without being the answer to any task.
LAYOUT_EXAMPLE = """.visible .entry scale2(
	.param .u64 scale2_param_0,
	.param .u64 scale2_param_1,
	.param .u32 scale2_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<3>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<8>;
	ld.param.u64 	%rd1, [scale2_param_0];
	ld.param.u64 	%rd2, [scale2_param_1];
	ld.param.u32 	%r2, [scale2_param_2];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd3, %rd1;
	mul.wide.s32 	%rd4, %r1, 4;
	add.s64 	%rd5, %rd3, %rd4;
	ld.global.f32 	%f1, [%rd5];
	add.f32 	%f2, %f1, %f1;
	cvta.to.global.u64 	%rd6, %rd2;
	add.s64 	%rd7, %rd6, %rd4;
	st.global.f32 	[%rd7], %f2;
$L__BB0_2:
	ret;
}
"""

NUMPY_CONTRACT = (
    "The reference is called as reference(**params): each buffer a 1-D numpy array of its element type, each "
    "scalar a numpy scalar of its type. Output buffers start filled with a poison pattern; elements the "
    "reference leaves alone must not be written by your kernel."
)


@dataclass
class Feedback:
    """One earlier answer and what became of it."""

    what: str              # "round 1, sample 0"
    fate: str              # cut-off | unparsed | changes-contract | invalid-ir | rejected-ptxas | rejected-check | not-judged
    reason: str
    detail: str = ""       # the PTX line ptxas means, the scalars of the failing set, ...

    def line(self, limit: int = 600) -> str:
        text = f"{self.what}: {self.fate}: {self.reason}"
        if self.detail:
            text += f"\n   {self.detail}"
        return text if len(text) <= limit else text[: limit - 3] + "..."


def _param_lines(task) -> list[str]:
    spec = task.specs[0]
    out = []
    for p, sp in zip(task.signature.params, spec.params):
        ptx = task.header_params[p.index]
        if p.pointer:
            out.append(f"- {p.describe()}: param {ptx}, a pointer to {sp.type} elements, {sp.direction}, "
                       f"{sp.length_expr} elements")
        else:
            vals = [sp.value] + list(sp.values or [])
            out.append(f"- {p.describe()}: param {ptx}, a {sp.type} scalar (e.g. {', '.join(map(str, vals[:3]))})")
    return out


def _launch_lines(task) -> list[str]:
    lines = []
    for i, s in enumerate(task.specs):
        grid = ", ".join(map(str, s.grid))
        block = ", ".join(map(str, s.block))
        lines.append(f"- launch {i + 1}: grid ({grid}), block ({block}), {s.shared_bytes} bytes of dynamic shared memory")
    return lines


def build_generation_messages(task, feedback: list[Feedback], *, last_failed: tuple[str, str] | None = None,
                              max_feedback: int = 8) -> list[dict]:
    """The chat for one request. ``last_failed``: (the last kernel that parsed but failed, why)."""
    ref = task.reference
    parts = ["## Task", task.description.strip(), "",
             "## The kernel to write",
             f"Signature: {task.signature.text}",
             f"Target: {task.target} (PTX ISA {task.ptx_version})",
             "Parameters:", *_param_lines(task),
             "Launch shapes it is checked with (sizes vary from these):", *_launch_lines(task), ""]
    if ref.kind == "numpy":
        parts += ["## The reference (numpy): your kernel must compute exactly this", NUMPY_CONTRACT,
                  "```python", ref.source.rstrip("\n"), "```", ""]
    else:
        src = ref.source if len(ref.source) <= 6000 else ref.source[:6000] + "\n// ... (cut)"
        parts += [f"## The reference (CUDA kernel {ref.original_entry}): your kernel must compute exactly this",
                  "```cuda", src.rstrip("\n"), "```", ""]
    parts += ["## Answer format",
              "Answer with the whole function in PTX: exactly this header, then the body, then \"}\".",
              "```ptx", task.header.rstrip("\n"), "```",
              "Layout: one statement per line, a tab before each statement, a tab between the opcode and its "
              "operands, \", \" between operands, labels at the start of their line. Declare registers before use "
              "(.reg .f32 \t%f<4>; declares %f0..%f3). Here is a different kernel in that layout "
              "(y[i] = 2 * x[i] for i < n):",
              "```ptx", LAYOUT_EXAMPLE.rstrip("\n"), "```", ""]
    shown = feedback[-max_feedback:]
    if shown:
        parts += ["## Earlier attempts that failed (fix them; do not repeat them)"]
        parts += [f"{i}. {f.line()}" for i, f in enumerate(shown, 1)] + [""]
    if last_failed:
        text, why = last_failed
        parts += [f"## Your last kernel, which failed ({why[:300]})", "```ptx", text.rstrip("\n"), "```", ""]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(parts).rstrip() + "\n"}]
