"""The tuner's error: a bad budget, a malformed measurement request or database record."""

from __future__ import annotations


class TuneError(ValueError):
    """A user- or caller-made error in tuning (one line naming what is wrong: the option, the line)."""


__all__ = ["TuneError"]
