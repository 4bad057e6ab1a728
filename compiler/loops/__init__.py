"""Loop IR (TensorIR-like) and the lowering of fused groups to it.

``ir`` (buffers, loops, loads/stores, expressions), ``printer`` (the one text form), ``compute``
(compute definitions with reductions -> loop nests), ``tensor`` (tensors as index functions),
``ops_*`` (per-op lowerings, ONNX semantics), ``lower`` (one fused group -> one kernel).
"""
