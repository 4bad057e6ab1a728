"""Load compiled kernel objects into this process (llvmlite MCJIT) and call them.

:class:`JitModule` takes ELF objects (one per distinct kernel, from
``compiler.codegen.compile.compile_kernel``), links them into one MCJIT engine once, and hands out
``ctypes`` function pointers ``void f(void*, ...)``. The process's thread pool
(``compiler.runtime.pool``) is loaded first, so that kernels' parallel launches resolve to it. Buffers are passed as the data pointers of
C-contiguous numpy arrays; the caller keeps the arrays alive.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from typing import Any

import numpy as np

from .pool import load as load_pool


class JitModule:
    """Objects -> callable kernels. ``call(symbol, arrays)`` runs one kernel."""

    def __init__(self, objects: Iterable[bytes]) -> None:
        import llvmlite.binding as llvm  # deferred: the LLVM binding (shared library) only where kernels load

        load_pool()  # the thread pool first: kernels' prism_parallel_for resolves to it (compiler.runtime.pool)
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        self._tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                                features=llvm.get_host_cpu_features().flatten(), opt=3)
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self._tm)
        for obj in objects:
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self._engine.finalize_object()
        self._fns: dict[str, Any] = {}

    def function(self, symbol: str, nargs: int) -> Any:
        """The ctypes function for ``symbol`` taking ``nargs`` pointers. Raises KeyError if absent."""
        if symbol not in self._fns:
            addr = self._engine.get_function_address(symbol)
            if not addr:
                raise KeyError(f"symbol {symbol} not found in the loaded objects")
            self._fns[symbol] = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nargs))(addr)
        return self._fns[symbol]

    def call(self, symbol: str, arrays: list[np.ndarray]) -> None:
        self.function(symbol, len(arrays))(*[a.ctypes.data for a in arrays])
