"""Small FP32 models built with onnx.helper and their INT8 forms written by ONNX Runtime's quantizer
(``onnxruntime.quantization.quantize_static``): the oracle for the precision tests."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnx.version_converter
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def _init(rng: np.random.Generator, name: str, *shape: int, scale: float = 0.2) -> onnx.TensorProto:
    return nh.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def small_cnn(seed: int = 0, channels: int = 8, size: int = 16) -> onnx.ModelProto:
    """Conv-Relu, Conv + residual Add, Relu, MaxPool, GlobalAveragePool, Flatten, Gemm (10 classes)."""
    rng = np.random.default_rng(seed)
    c2 = 2 * channels
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             h.make_node("Add", ["c2", "r1"], ["a"], name="add"),
             h.make_node("Relu", ["a"], ["r2"], name="relu2"),
             h.make_node("MaxPool", ["r2"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
             h.make_node("GlobalAveragePool", ["mp"], ["g"], name="gap"),
             h.make_node("Flatten", ["g"], ["f"], name="flat"),
             h.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1, name="fc")]
    g = h.make_graph(nodes, "small_cnn", [h.make_tensor_value_info("x", T.FLOAT, [1, channels, size, size])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 10])],
                     [_init(rng, "w1", c2, channels, 3, 3), _init(rng, "b1", c2), _init(rng, "w2", c2, c2, 3, 3),
                      _init(rng, "b2", c2), _init(rng, "wf", 10, c2), _init(rng, "bf", 10)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def calibration(model: onnx.ModelProto, samples: int = 8, seed: int = 1) -> list[dict[str, np.ndarray]]:
    """Seeded standard-normal samples for every graph input (batch 1 each)."""
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    ins = [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]) for i in model.graph.input
           if i.name not in inits]
    return [{n: rng.standard_normal(s).astype(np.float32) for n, s in ins} for _ in range(samples)]


def ort_quantized(model: onnx.ModelProto, *, fmt: str = "qdq", per_channel: bool = True, activation: str = "s8",
                  reduce_range: bool = True, samples: int = 8, prepare: bool = False) -> onnx.ModelProto:
    """``model`` quantized by ``quantize_static`` (QDQ or QOperator form). ``reduce_range`` keeps weights
    to 7 bits, so that ONNX Runtime's AVX2 kernels (vpmaddubsw, 16-bit saturating pair sums) are exact on
    hosts without VNNI and the comparison is with exact integer arithmetic."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    data = calibration(model, samples)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(data)

        def get_next(self):  # type: ignore[no-untyped-def]
            return next(self.it, None)

    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "f32.onnx", Path(d) / "q.onnx"
        onnx.save(model, src)
        if prepare:  # ONNX Runtime's recommended pre-processing: opset 17, shapes, BatchNormalization folded
            from onnxruntime.quantization.shape_inference import quant_pre_process

            up = onnx.version_converter.convert_version(model, 17)
            onnx.save(up, src)
            quant_pre_process(str(src), str(src), skip_symbolic_shape=True)
        quantize_static(str(src), str(dst), Reader(),
                        quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
                        per_channel=per_channel, reduce_range=reduce_range,
                        activation_type=QuantType.QInt8 if activation == "s8" else QuantType.QUInt8,
                        weight_type=QuantType.QInt8)
        return onnx.load(dst)
