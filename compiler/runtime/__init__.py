"""Running compiled kernels: ``jit`` (MCJIT loading), ``runner`` (parent side: child process, crash
attribution), ``child`` (the measurement process: arena, kernel calls, ONNX Runtime, timing)."""
