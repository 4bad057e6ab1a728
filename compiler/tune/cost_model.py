"""The learned cost model: gradient-boosted trees (XGBoost) predicting a candidate's speed.

Target: ``log2(median_us / default_us)`` of the candidate's kernel (below 0: faster than its default
schedule), so that measurements of every task train one model (TVM's XGBoost cost model, Chen et al.,
"Learning to Optimize Tensor Programs", NeurIPS 2018; Ansor; MetaSchedule's ``XGBModel``). Features:
``compiler.tune.features``. Retrained from scratch on every measured sample after each batch (a few
hundred rows: milliseconds). Until :data:`MIN_SAMPLES` valid measurements exist it predicts nothing
and the search samples at random.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

MIN_SAMPLES = 8


class CostModel:
    """``update(features, median_us, default_us)`` adds a measurement; ``fit()`` retrains;
    ``predict(rows)`` returns the predicted log2 speed ratio per row (None before the first fit)."""

    def __init__(self, seed: int = 0, threads: int = 1) -> None:
        self.seed = seed
        self.threads = threads
        self.x: list[np.ndarray] = []
        self.y: list[float] = []
        self._model: Any = None

    def update(self, feats: np.ndarray, median_us: float, default_us: float) -> None:
        if median_us > 0 and default_us > 0 and math.isfinite(median_us):
            self.x.append(np.asarray(feats, np.float64))
            self.y.append(math.log2(median_us / default_us))

    @property
    def samples(self) -> int:
        return len(self.y)

    def fit(self) -> bool:
        """Retrain on every sample; False (no model) below :data:`MIN_SAMPLES`."""
        if len(self.y) < MIN_SAMPLES:
            return False
        import xgboost as xgb  # deferred: only a tuning search loads XGBoost (a compilation never does)

        params = {"max_depth": 5, "eta": 0.15, "subsample": 0.9, "seed": self.seed, "nthread": self.threads,
                  "verbosity": 0, "objective": "reg:squarederror"}
        data = xgb.DMatrix(np.stack(self.x), label=np.asarray(self.y))
        self._model = xgb.train(params, data, num_boost_round=80)
        return True

    def predict(self, rows: list[np.ndarray]) -> np.ndarray | None:
        if self._model is None or not rows:
            return None
        import xgboost as xgb  # deferred: as in fit

        return np.asarray(self._model.predict(xgb.DMatrix(np.stack(rows))), np.float64)


__all__ = ["MIN_SAMPLES", "CostModel"]
