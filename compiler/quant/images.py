"""Real calibration images from a registry package: scikit-image's bundled sample photographs
(``skimage.data``: astronaut, coffee, chelsea the cat, rocket, ...), never downloaded at run time.

:func:`calibration_images` returns ``[S, 1, 3, H, W]`` float32 samples for an NCHW image model: each
photograph resized (``skimage.transform.resize``, anti-aliased), and, for more samples than photographs,
its horizontal flip and centre crops, then normalized as the model expects: ``imagenet`` (``x / 255``,
minus the ImageNet mean, divided by its std: ResNet, PP-OCR), ``unit`` (``x / 255``: YOLOv8).
"""

from __future__ import annotations

import numpy as np

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "hubble_deep_field", "retina", "cat")
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def _photos() -> list[np.ndarray]:
    try:
        # deferred: scikit-image is heavy and needed only for calibration photos
        from skimage import data
    except ImportError as e:  # scikit-image is in requirements.txt
        raise RuntimeError("calibration images need scikit-image (pip install scikit-image==0.26.0)") from e
    return [np.asarray(getattr(data, n)(), np.float32) for n in PHOTOS]


def _variants(img: np.ndarray, k: int) -> np.ndarray:
    """Variant ``k`` of a photo: itself, its mirror, then centre crops of 80% and 64% (and mirrors)."""
    if k % 2:
        img = img[:, ::-1]
    frac = (1.0, 0.8, 0.64)[(k // 2) % 3]
    h, w = img.shape[:2]
    ch, cw = int(h * frac), int(w * frac)
    y0, x0 = (h - ch) // 2, (w - cw) // 2
    return img[y0:y0 + ch, x0:x0 + cw]


def calibration_images(height: int, width: int, samples: int = 8, normalize: str = "imagenet") -> np.ndarray:
    """``samples`` RGB images as ``[samples, 1, 3, height, width]`` float32 (see the module docstring)."""
    from skimage.transform import resize  # deferred: scikit-image is heavy, as above

    photos = _photos()
    out = np.empty((samples, 1, 3, height, width), np.float32)
    for i in range(samples):
        img = _variants(photos[i % len(photos)], i // len(photos))
        r = resize(img, (height, width), anti_aliasing=True, preserve_range=True).astype(np.float32) / 255.0
        if normalize == "imagenet":
            r = (r - MEAN) / STD
        elif normalize != "unit":
            raise ValueError(f"unknown normalization {normalize!r} (imagenet, unit)")
        out[i, 0] = r.transpose(2, 0, 1)
    return out
