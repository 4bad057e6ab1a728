"""The compile request's ``threads`` option: checked by the submission service (a positive integer),
kept in the options (so in the cache key), and passed to the compiler, which checks it against the
worker's CPUs (compiler.runtime.pool.check_threads)."""

from __future__ import annotations

import pytest

from compiler.runtime.pool import available_threads
from explorer.compilations.services import submission


def test_threads_option_is_a_positive_integer_in_the_cache_key() -> None:
    opts = submission.normalize_options({"threads": 1})
    assert opts == {"verify": True, "benchmark": True, "threads": 1}
    base = {"sha256": "a", "target": "host", "pipeline": "O2", "input_shapes": {}, "version": "1"}
    assert submission.cache_key(options=opts, **base) != submission.cache_key(
        options=submission.normalize_options({}), **base)
    for bad in (0, -2, 1.5, "2", True):
        with pytest.raises(submission.InvalidRequest, match="option 'threads' must be a positive integer"):
            submission.normalize_options({"threads": bad})


def test_more_threads_than_the_cpus_is_a_one_line_request_error(tmp_path) -> None:
    import compiler
    from tests.compiler.runtime.test_entry import _chain_model

    path = tmp_path / "m.onnx"
    path.write_bytes(_chain_model(1).SerializeToString())
    with pytest.raises(compiler.CompileError) as ei:
        compiler.validate_request(str(path), target="host", pipeline="O2", input_shapes=None,
                                  threads=available_threads() + 1)
    assert ei.value.stage == "request" and "threads must be an integer from 1 to" in ei.value.message
    ok = compiler.validate_request(str(path), target="host", pipeline="O2", input_shapes=None, threads=1)
    assert ok["threads"] == 1
