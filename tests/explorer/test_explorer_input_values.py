"""Input values through the HTTP API (issue 13 item 1): the upload names the inputs worth binding, a
compile request binds them (part of the cache key, kept with the compilation), and a bad value is a
400 naming the input with the compiler's own words.

In process (Django's test client, the test database; a test's transaction is rolled back, so the
compilations it creates are never queued).
"""

from __future__ import annotations

import pytest

from explorer.compilations.models import Compilation
from tests.compiler.frontend.test_input_values import if_on_mode
from tests.explorer.api_client import post_compilation, upload_model


@pytest.fixture
def model_id(client) -> str:
    return upload_model(client, "if_on_mode.onnx", if_on_mode())


@pytest.mark.django_db
def test_upload_offers_the_if_condition_input(client, model_id):
    inputs = {i["name"]: i for i in client.get(f"/api/models/{model_id}").json()["inputs"]}
    assert inputs["mode"]["value_uses"] == ["the condition of If 'select'"]
    assert "value_uses" not in inputs["x"]


@pytest.mark.django_db
def test_bound_values_are_kept_and_keyed(client, model_id):
    r = post_compilation(client, model_id, input_values={"mode": [1]})
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["input_values"] == {"mode": [1]} and body["input_shapes"] == {"x": [2, 3]}
    keys = {Compilation.objects.get(pk=body["id"]).cache_key}
    for values in ({"mode": [0]}, None):
        extra = {"input_values": values} if values else {}
        r = post_compilation(client, model_id, **extra)
        assert r.status_code == 201, r.content
        keys.add(Compilation.objects.get(pk=r.json()["id"]).cache_key)
    assert len(keys) == 3  # another value, or none, is another compilation
    again = post_compilation(client, model_id, input_values={"mode": [1]}).json()
    assert Compilation.objects.get(pk=again["id"]).cache_key in keys


@pytest.mark.django_db
@pytest.mark.parametrize(("values", "needle"), [
    ({"mode": [1, 2]}, "input value for 'mode': the input has shape [] (1 element), 2 values given"),
    ({"mode": ["on"]}, "input value for 'mode': 'on' is not a value of type int64"),
    ({"speed": [1]}, "input value for 'speed': not a model input; inputs: x, mode"),
])
def test_a_bad_value_is_a_400_naming_the_input(client, model_id, values, needle):
    r = post_compilation(client, model_id, input_values=values)
    assert r.status_code == 400
    err = r.json()["error"]
    assert needle in err and "\n" not in err
