"""Auto-tuning of kernel schedules (issue 16): search spaces from the schedules' knobs
(``compiler.schedule.knobs``), evolutionary search with an XGBoost cost model, measurement of candidates
in isolated children, and tuning databases that every later compilation uses.

Seams for the explorer (``/work/coord/notes/tune-api.md`` describes them): a :class:`Measurer`
(``measure(requests, stop) -> results``; requests and results are JSON-able dicts,
``compiler.tune.measure``) and a :class:`TuningDatabase` (``best``, ``add``, ``records``;
``compiler.tune.database``). Entry points: :func:`tune_model`, ``python -m compiler tune``,
``compiler.compile(..., tuning_db=...)``.
"""

from __future__ import annotations

from .database import JsonlDatabase, TuningDatabase, make_record, open_database
from .errors import TuneError
from .measure import LocalMeasurer, Measurer, StopFlag, make_request, run_request
from .search import TuneResult, check_budget, tune_model

__all__ = ["JsonlDatabase", "LocalMeasurer", "Measurer", "StopFlag", "TuneError", "TuneResult", "TuningDatabase",
           "check_budget", "make_record", "make_request", "open_database", "run_request", "tune_model"]
