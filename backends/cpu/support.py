"""Compiler-runtime functions the CPU code may call that the system's libgcc lacks.

LLVM legalizes bf16 vector selects and phis on CPUs without native bf16 by widening to f32 and rounding
back with a call to `__truncsfbf2`, which libgcc provides only from GCC 13 on. Defining it in every kernel
object (hidden, so each shared object keeps its own) makes images independent of the host's libgcc.
"""

# Round to nearest even, quieting NaNs: bf16 is the high half of an f32.
SUPPORT_IR = r"""
define hidden bfloat @__truncsfbf2(float %x) {
entry:
  %bits = bitcast float %x to i32
  %isnan = fcmp uno float %x, 0.0
  %lsb = lshr i32 %bits, 16
  %odd = and i32 %lsb, 1
  %bias = add i32 %odd, 32767
  %rounded = add i32 %bits, %bias
  %quiet = or i32 %bits, 4194304
  %pick = select i1 %isnan, i32 %quiet, i32 %rounded
  %hi = lshr i32 %pick, 16
  %h = trunc i32 %hi to i16
  %r = bitcast i16 %h to bfloat
  ret bfloat %r
}
"""
