"""Loop IR -> LLVM IR (llvmlite.ir) -> optimized LLVM IR, assembly and object code per target.

``llvm_codegen`` (explicit vectorization/unrolling, GEP addressing), ``intrinsics`` (math
functions), ``compile`` (the pass-builder pipeline and the per-kernel cache).
"""
