"""Running compiled kernels: ``program`` (the linked Program every path runs, and its binding to
memory), ``jit`` (MCJIT loading), ``process`` (the child process, crash attribution), ``child`` (the
child: runs a Program; verifies against ONNX Runtime and times for ``runner``), ``runner``
(``compiler.compile``'s verify/benchmark), ``execute`` (the ONNX backend's compile and execute),
``narrow_io`` (narrow storage types at the boundary)."""
