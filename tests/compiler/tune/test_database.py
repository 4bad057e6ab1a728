"""The JSON-lines tuning database: round trip, the best record per workload and target, invalid lines
and records for another target skipped with warnings that name the line."""

from __future__ import annotations

import dataclasses
import json

import pytest

from compiler.targets import get_target
from compiler.tune.database import JsonlDatabase, check_record, make_record, open_database
from compiler.tune.errors import TuneError

HOST = get_target("host")


def _rec(workload: str = "w1", us: float = 80.0, target=HOST, trace=None):  # type: ignore[no-untyped-def]
    return make_record(workload, {"ops": []}, target, trace or {"tile": "4x2"}, us, 100.0, trials=8, threads=2)


def test_round_trip_keeps_the_best_record_per_workload(tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "t.jsonl"
    db = JsonlDatabase(path)
    db.add(_rec("w1", 90.0, trace={"tile": "4x2"}))
    db.add(_rec("w1", 70.0, trace={"tile": "6x2"}))
    db.add(_rec("w2", 50.0))
    again = JsonlDatabase(path)  # a fresh reader of the same file
    best = again.best("w1", HOST)
    assert best is not None and best["trace"] == {"tile": "6x2"} and best["median_us"] == 70.0
    assert again.best("w3", HOST) is None
    assert len(list(again.records())) == 3 and again.warnings == []
    assert all(json.loads(line)["version"] == 1 for line in path.read_text().splitlines())


def test_invalid_lines_are_skipped_with_a_warning_naming_the_line(tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "t.jsonl"
    good = json.dumps(_rec("w1", 60.0))
    bad_time = json.dumps({**_rec("w1", 10.0), "median_us": -1})
    path.write_text("\n".join([good, "{not json", "[1, 2]", json.dumps({"workload": "w1"}), bad_time, ""]) + "\n")
    db = JsonlDatabase(path)
    assert db.best("w1", HOST)["median_us"] == 60.0  # type: ignore[index]
    assert [w.split(": ")[0] for w in db.warnings] == [f"{path}:{n}" for n in (2, 3, 4, 5)]
    assert "not valid JSON" in db.warnings[0] and "not a JSON object" in db.warnings[1]
    assert "missing field 'triple'" in db.warnings[2] and "median_us" in db.warnings[3]
    with pytest.raises(TuneError, match=r"t.jsonl:2: not valid JSON"):
        list(JsonlDatabase(path, strict=True).records())


def test_a_record_for_another_target_is_skipped_with_a_warning(tmp_path):  # type: ignore[no-untyped-def]
    other = dataclasses.replace(HOST, cpu="cortex-a72", triple="aarch64-unknown-linux-gnu", features="+neon")
    path = tmp_path / "t.jsonl"
    db = JsonlDatabase(path)
    db.add(_rec("w1", 10.0, target=other))
    db.add(_rec("w1", 90.0))
    fresh = JsonlDatabase(path)
    assert fresh.best("w1", HOST)["median_us"] == 90.0  # type: ignore[index]
    assert len(fresh.warnings) == 1 and ":1: record for aarch64-unknown-linux-gnu cpu cortex-a72" in fresh.warnings[0]
    assert fresh.best("w1", other)["median_us"] == 10.0  # type: ignore[index]


def test_bad_records_and_databases_are_refused():  # type: ignore[no-untyped-def]
    with pytest.raises(TuneError, match="median_us"):
        make_record("w", {}, HOST, {"tile": "4x2"}, 0.0, 100.0, trials=1, threads=1)
    assert check_record({**_rec(), "trace": {"tile": 1.5}}) == "field 'trace' has a value that is neither an int nor a string"
    with pytest.raises(TuneError, match="neither a path nor a TuningDatabase"):
        open_database(42)  # type: ignore[arg-type]


def test_records_rank_by_their_ratio_to_the_default_measured_with_them(tmp_path):  # type: ignore[no-untyped-def]
    """A record measured on a quieter moment has a lower raw median but a worse ratio to the default timed
    in alternation with it: the ratio ranks (the search ranks candidates by it too)."""
    db = JsonlDatabase(tmp_path / "t.jsonl")
    db.add(make_record("w1", {"ops": []}, HOST, {"tile": "4x2"}, 60.0, 75.0, trials=8, threads=1))  # 0.8
    db.add(make_record("w1", {"ops": []}, HOST, {"tile": "6x2"}, 90.0, 150.0, trials=8, threads=1))  # 0.6
    best = JsonlDatabase(tmp_path / "t.jsonl").best("w1", HOST)
    assert best is not None and best["trace"] == {"tile": "6x2"}


def test_a_found_by_that_is_not_an_object_of_strings_is_refused():  # type: ignore[no-untyped-def]
    assert check_record({**_rec(), "found_by": "me"}) == "field 'found_by' is not an object of strings"
    assert check_record({**_rec(), "found_by": {"model": "m", "host": "h"}}) is None
