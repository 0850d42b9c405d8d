"""The PTX instruction names ptx_ir accepts (PTX ISA 9.0), for the parser's check.

An unknown opcode is a parse error rather than an opaque pass-through: ptxas would reject
it too, and a proposer's typo should be caught before it costs a ptxas run.
"""

OPCODES = frozenset("""
abs activemask add addc alloca and applypriority atom bar barrier bfe bfi bfind bmsk bra brev
brkpt brx call clusterlaunchcontrol clz cnot copysign cos cp createpolicy cvt cvta discard div
dp2a dp4a elect ex2 exit fence fma fns getctarank griddepcontrol isspacep istypep ld ldu
ldmatrix lg2 lop3 mad mad24 madc mapa match max mbarrier membar min mma mov movmatrix
multimem mul mul24 nanosleep neg not or pmevent popc prefetch prefetchu prmt rcp red redux rem
ret rsqrt sad selp set setmaxnreg setp shf shfl shl shr sin slct sqrt st stackrestore
stacksave stmatrix st.async sub subc suld suq sured sust szext tanh tcgen05 testp tex tld4 trap
txq vabsdiff vabsdiff2 vabsdiff4 vadd vadd2 vadd4 vavrg2 vavrg4 vmad vmax vmax2 vmax4 vmin vmin2
vmin4 vote vset vset2 vset4 vshl vshr vsub vsub2 vsub4 wgmma wmma xor red.async tensormap
cp.async ldmatrix
""".split())
