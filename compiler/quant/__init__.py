"""Precision: reading and folding QDQ graphs (``qdq``, ``fold``), post-training quantization
(``calibrate``, ``insert``), the integer weight packing the kernels use, and the accuracy report
(``accuracy``). The passes that use them are ``compiler.passes.fold_qdq`` and
``compiler.passes.quantize``."""
