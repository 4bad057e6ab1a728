"""Sample models: the real input of the model set (DESIGN.md "Real input").

- the nine ``light_*`` models shipped in the ``onnx`` wheel (``onnx/backend/test/data/light/``), served
  with seeded random weights (:func:`randomized`, seed :data:`LIGHT_SEED`): the wheel's own weights are
  all 0.02, so every input gives the same output and a comparison with ONNX Runtime would check
  nothing. ``fetch`` writes the randomized model once into the cache (deterministic bytes: the same
  file, the same sha256, every time); the conformance ``light`` suite still runs the wheel's files
  against the wheel's expected outputs;
- ``yolov8n``: ``nudenet/320n.onnx`` from the ``nudenet`` wheel (input ``images=1,3,320,320``);
- ``ppocr_v4_det``: ``rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx`` from the
  ``rapidocr-onnxruntime`` wheel (``x=1,3,320,320``);
- ``silero_vad``: ``silero_vad/data/silero_vad_16k_op15.onnx`` from the ``silero-vad`` wheel
  (``input=1,512``, ``state=2,1,128``, ``sr`` scalar).

Wheel models are fetched with ``pip download --no-deps`` (pinned versions) and the ``.onnx`` file is
unpacked into ``$PRISM_MODEL_CACHE`` (default ``~/.cache/prism/models``) and reused; they are never
committed. ``python -m compiler.samples fetch --all`` fetches everything (the command line is
``compiler/samples/__main__.py``, apart from this module so that ``import compiler``, which imports
this one, does not import it before ``runpy`` runs it).
``randomized(model, seed)`` gives the ``light_*`` graphs with other seeds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import CompileError

LIGHT = ("light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2", "light_resnet50",
         "light_shufflenet", "light_squeezenet", "light_vgg19", "light_zfnet512")


@dataclass(frozen=True)
class Sample:
    """A sample model: where it comes from and the input shapes to compile it with."""

    name: str
    description: str
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    package: str | None = None  # pip requirement of the wheel, None for the onnx wheel's light models
    member: str = ""  # path of the .onnx file inside the wheel

    def to_dict(self) -> dict[str, Any]:
        """The listing entry; ``title`` is the short name a gallery card shows, ``weights`` says in a
        few words whether the weights are the trained ones or seeded random ones (the long reason is
        in ``description``, the same for every ``light_*`` sample)."""
        title = f"{_LIGHT_TITLES[self.name]} image classifier" if self.name in _LIGHT_TITLES else self.description
        return {"name": self.name, "title": title, "description": self.description, "input_shapes": self.input_shapes,
                "weights": "seeded random weights" if self.package is None else "trained weights",
                "source": self.package or (f"onnx wheel: onnx/backend/test/data/light/{self.name}.onnx, weights "
                                           f"replaced by seeded random ones (compiler.samples.randomized, seed "
                                           f"{LIGHT_SEED})"),
                "cached": is_available(self.name)}


LIGHT_SEED = 0  # the seed of the light_* samples' random weights (compiler.bench uses the same)
_LIGHT_TITLES = {"light_bvlc_alexnet": "AlexNet (BVLC)", "light_densenet121": "DenseNet-121",
                 "light_inception_v1": "Inception v1 (GoogLeNet)", "light_inception_v2": "Inception v2",
                 "light_resnet50": "ResNet-50", "light_shufflenet": "ShuffleNet", "light_squeezenet": "SqueezeNet",
                 "light_vgg19": "VGG-19", "light_zfnet512": "ZFNet-512"}

SAMPLES: dict[str, Sample] = {
    **{n: Sample(n, f"{_LIGHT_TITLES[n]} image classifier, 1x3x224x224 (the onnx package's test model, with "
                    f"random weights: the shipped ones are all 0.02, which gives every image the same output)",
                 {}) for n in LIGHT},
    "yolov8n": Sample("yolov8n", "YOLOv8n detector (nudenet 320n)", {"images": [1, 3, 320, 320]},
                      "nudenet==3.4.2", "nudenet/320n.onnx"),
    "ppocr_v4_det": Sample("ppocr_v4_det", "PP-OCRv4 text detector (rapidocr)", {"x": [1, 3, 320, 320]},
                           "rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"),
    "silero_vad": Sample("silero_vad", "Silero VAD 16 kHz, opset 15 (If, dynamic shapes)",
                         {"input": [1, 512], "state": [2, 1, 128], "sr": []},
                         "silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx"),
}


def cache_dir() -> Path:
    """``$PRISM_MODEL_CACHE`` or ``~/.cache/prism/models``."""
    return Path(os.environ.get("PRISM_MODEL_CACHE") or Path.home() / ".cache" / "prism" / "models")


def _light_path(name: str) -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"{name}.onnx"


def _cached_path(name: str) -> Path:
    if SAMPLES[name].package is None:
        return cache_dir() / f"{name}.seed{LIGHT_SEED}.onnx"
    return cache_dir() / f"{name}.onnx"


def is_available(name: str) -> bool:
    s = SAMPLES[name]
    return _light_path(name).is_file() if s.package is None else _cached_path(name).is_file()


def list_samples() -> list[dict[str, Any]]:
    """Every sample: ``[{"name", "title", "description", "input_shapes", "weights", "source", "cached"}]``."""
    return [s.to_dict() for s in SAMPLES.values()]


def get(name: str) -> Sample:
    if name not in SAMPLES:
        raise CompileError("request", f"unknown sample {name!r} (valid: {', '.join(SAMPLES)})")
    return SAMPLES[name]


def fetch(name: str) -> Path:
    """The local path of sample ``name``: for a wheel sample, downloading and caching its wheel on first
    use; for a ``light_*`` sample, the wheel's model with seeded random weights (``randomized(name,
    LIGHT_SEED)``), written into the cache on first use.

    Raises CompileError(stage="request") for an unknown name or a failed download.
    """
    s = get(name)
    dest = _cached_path(name)
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    if s.package is None:
        _write_atomic(dest, randomized(_light_path(name), LIGHT_SEED).SerializeToString())
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--quiet", s.package,
               "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            err = (proc.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise CompileError("request", f"cannot fetch sample {name!r} ({s.package}): {err}")
        with zipfile.ZipFile(wheels[0]) as zf:
            try:
                data = zf.read(s.member)
            except KeyError:
                raise CompileError("request", f"wheel {wheels[0].name} has no {s.member}") from None
    _write_atomic(dest, data)
    return dest


def _write_atomic(dest: Path, data: bytes) -> None:
    # a part file of its own (concurrent fetches of one sample, from threads or processes, must
    # not write into each other's), then an atomic rename: a reader sees the whole file or none
    fd, part = tempfile.mkstemp(prefix=f".{dest.stem}.", suffix=".onnx.part", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(part, 0o644)  # mkstemp's 0600 would hide the cached model from other users
        os.replace(part, dest)
    except BaseException:
        Path(part).unlink(missing_ok=True)
        raise


def randomized(model: str | os.PathLike | onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """The same graph with the ``light_*`` models' ``ConstantOfShape`` weights (all 0.02) replaced by
    seeded random initializers of the same shapes.

    Magnitudes follow He initialization (std = sqrt(2 / fan_in)) for Conv/Gemm weights so that
    activations stay finite through deep networks; biases and BatchNormalization bias/mean are
    small (N(0, 0.01)); BatchNormalization scale is uniform in [0.5, 1.5] and variance uniform in
    [0.5, 1.5] (positive). ``model`` is a sample name, a path or a ModelProto; returns a new model.
    """
    if isinstance(model, onnx.ModelProto):
        m = onnx.ModelProto()
        m.CopyFrom(model)
    elif isinstance(model, str) and model in SAMPLES:
        m = onnx.load(str(_light_path(model) if SAMPLES[model].package is None else fetch(model)))
    else:
        m = onnx.load(str(model))
    rng = np.random.default_rng(seed)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    role: dict[str, str] = {}
    for n in g.node:
        for i, name in enumerate(n.input):
            if n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul") and i == 1:
                role[name] = "weight"
            elif n.op_type == "BatchNormalization" and i in (1, 4):
                role[name] = "positive"
            else:
                role.setdefault(name, "small")
    keep, new_inits = [], []
    for n in g.node:
        if n.op_type == "ConstantOfShape" and n.input and n.input[0] in inits:
            shape = [int(d) for d in numpy_helper.to_array(inits[n.input[0]]).reshape(-1)]
            out = n.output[0]
            kind = role.get(out, "small")
            if kind == "weight":
                fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
                arr = rng.normal(0.0, np.sqrt(2.0 / max(fan_in, 1)), size=shape)
            elif kind == "positive":
                arr = rng.uniform(0.5, 1.5, size=shape)
            else:
                arr = rng.normal(0.0, 0.01, size=shape)
            new_inits.append(numpy_helper.from_array(arr.astype(np.float32), out))
            continue
        keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    used = {i for n in keep for i in n.input}
    # drop the now unused shape initializers (and their IR-v3 input entries)
    dead = {t.name for t in g.initializer if t.name not in used and t.name.endswith("__SHAPE")}
    remaining = [t for t in g.initializer if t.name not in dead]
    del g.initializer[:]
    g.initializer.extend(remaining + new_inits)
    inputs = [vi for vi in g.input if vi.name not in dead]
    new_names = {t.name for t in new_inits}
    existing = {vi.name for vi in inputs}
    if m.ir_version < 4:  # IR v3: every initializer is also listed among the inputs
        for t in new_inits:
            if t.name not in existing:
                inputs.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    else:
        inputs = [vi for vi in inputs if vi.name not in new_names]
    del g.input[:]
    g.input.extend(inputs)
    _calibrate_logits(m, {t.name for t in new_inits}, seed)
    return m


_PASS_THROUGH = ("Flatten", "Reshape", "Squeeze", "Identity", "Dropout")
LOGIT_STD = 2.0


def _calibrate_logits(m: onnx.ModelProto, random_inits: set[str], seed: int) -> None:
    """Scale the last linear layer before each ``Softmax`` so its logits have a standard deviation
    of :data:`LOGIT_STD` on a seeded standard-normal input.

    With random weights the logits of a deep classifier grow large and ``Softmax`` saturates to a
    one-hot vector, which any implementation reproduces exactly: verification would then compare
    nothing. Logits are linear in that layer's weight and bias, so one ONNX Runtime run on the
    model gives the factor. Models whose inputs are not static, or with no such layer, are left as
    they are.
    """
    import onnxruntime as ort  # deferred: ORT's shared library, needed only to calibrate randomized logits

    g = m.graph
    producer = {o: n for n in g.node for o in n.output}
    inits = {t.name: t for t in g.initializer}
    targets: list[tuple[str, onnx.NodeProto]] = []
    for n in g.node:
        if n.op_type not in ("Softmax", "LogSoftmax"):
            continue
        src = producer.get(n.input[0])
        while src is not None and src.op_type in _PASS_THROUGH:
            src = producer.get(src.input[0])
        if src is not None and src.op_type in ("Gemm", "Conv", "MatMul") and src.input[1] in random_inits:
            targets.append((n.input[0], src))
    init_names = set(inits)
    feeds: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(seed)
    for vi in g.input:
        if vi.name in init_names:
            continue
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if not dims or any(d <= 0 for d in dims) or vi.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            return
        feeds[vi.name] = rng.standard_normal(dims).astype(np.float32)
    if not targets:
        return
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    del probe.graph.output[:]
    for name, _ in targets:
        probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(probe.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    logits = sess.run(None, feeds)
    for (_, node), value in zip(targets, logits, strict=True):
        std = float(np.std(value))
        if not np.isfinite(std) or std == 0.0:
            continue
        k = LOGIT_STD / std
        for i in (1, 2):
            if i < len(node.input) and node.input[i] in inits:
                t = inits[node.input[i]]
                t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(k), t.name))
