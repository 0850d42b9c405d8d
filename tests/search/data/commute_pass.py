"""A pass that is right by construction, for `superopt try` tests: swap the two factors of
integer mad.lo / mul.lo / mul.wide and the two terms of integer add."""
from ptx_ir import Reg
from superopt.passes import Change, register


@register(name="test-commute-int", summary="a*b+c -> b*a+c, a+b -> b+a (integers)",
          assumes="none: integer multiplication and addition commute")
def commute_int(fn):
    changes = []
    for inst in list(fn.instructions):
        if inst.opcode not in ("mad", "mul", "add") or inst.guard is not None or not inst.type \
                or inst.type[1] not in "usb":
            continue
        ops = inst.operands
        if len(ops) < 3 or not (isinstance(ops[1], Reg) and isinstance(ops[2], Reg)) or ops[1] == ops[2]:
            continue
        fn.replace(inst, inst.with_(operands=(ops[0], ops[2], ops[1], *ops[3:])))
        changes.append(Change(f"commuted {inst.opcode}", inst))
    return changes
