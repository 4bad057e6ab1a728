"""Prism's compiler: ONNX -> graph IR -> passes -> loop IR -> LLVM IR -> native code."""
