"""Dim ranges through the HTTP API (issue 13 item 3): a shape with a dim name and its range is one
compilation (kept with it, part of the cache key); a bad range or an unranged name is a 400 naming the
dim in the compiler's words. In process (Django's test client; nothing is queued)."""

from __future__ import annotations

import pytest

from explorer.compilations.models import Compilation
from tests.compiler.runtime.test_dim_range import conv_net
from tests.explorer.api_client import post_compilation, upload_model


@pytest.fixture
def model_id(client) -> str:
    return upload_model(client, "conv.onnx", conv_net())


@pytest.mark.django_db
def test_a_ranged_dim_is_kept_and_keyed(client, model_id):
    r = post_compilation(client, model_id, input_shapes={"x": ["N", 3, 8, 8]}, dim_ranges={"N": [1, 8]})
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["input_shapes"] == {"x": ["N", 3, 8, 8]} and body["dim_ranges"] == {"N": [1, 8]}
    other = post_compilation(client, model_id, input_shapes={"x": ["N", 3, 8, 8]}, dim_ranges={"N": [1, 4]}).json()
    keys = {Compilation.objects.get(pk=c["id"]).cache_key for c in (body, other)}
    assert len(keys) == 2


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "needle"), [
    ({"input_shapes": {"x": ["N", 3, 8, 8]}, "dim_ranges": {"N": [0, 8]}}, "N=0..8: the minimum must be at least 1"),
    ({"input_shapes": {"x": ["N", 3, 8, 8]}, "dim_ranges": {"N": [8, 2]}}, "the minimum is above the maximum"),
    ({"input_shapes": {"x": ["N", 3, 8, 8]}}, "dim 'N' is neither an integer nor a dim with a range"),
    ({"input_shapes": {"x": [1, 3, 8, 8]}, "dim_ranges": {"N": [1, 2]}}, "no input shape names 'N'"),
])
def test_bad_ranges_are_400s_naming_the_dim(client, model_id, body, needle):
    r = post_compilation(client, model_id, **body)
    assert r.status_code == 400
    err = r.json()["error"]
    assert needle in err and "\n" not in err
    assert "--" not in err  # the form's user is not told the command line's options (issue 13)


@pytest.mark.django_db
def test_a_dim_that_is_neither_a_size_nor_a_name_is_refused(client, model_id):
    r = post_compilation(client, model_id, input_shapes={"x": [-1, 3, 8, 8]})
    assert r.status_code == 400 and "non-negative integer or the name of a dim" in r.content.decode()
