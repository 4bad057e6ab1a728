"""One validation path for a compile request: POST /api/pipelines/validate (what the browser asks
as the user types) and POST /api/compilations accept and refuse the same pipelines with the same
words; the model id and a non-string pipeline say what is expected; every /api/ error is JSON.

In process (Django's test client, the test database). A test's transaction is rolled back, so the
compilations it creates are never queued (`enqueue` runs on commit).
"""

from __future__ import annotations

import json

import pytest

from compiler.passes.pipeline import ONNX_PASSES

PRESETS = "(O0, O1, O2, O3)"


def post(client, url: str, body) -> tuple[int, dict]:
    r = client.post(url, body, content_type="application/json")
    return r.status_code, r.json()


@pytest.fixture
def model_id(client) -> str:
    r = client.post("/api/samples/light_squeezenet/model")
    assert r.status_code in (200, 201), r.content
    return r.json()["id"]


@pytest.mark.django_db
def test_an_empty_pipeline_is_o0_for_both_endpoints(client, model_id):
    o0 = {p["name"]: p["text"] for p in client.get("/api/pipelines").json()}["O0"]
    assert o0 == ONNX_PASSES  # the compiler's preset: no graph passes, the ONNX-level rewrites only
    for text in ("", "   ", "O0"):
        assert post(client, "/api/pipelines/validate", {"pipeline": text}) == (200, {"pipeline": ONNX_PASSES})
    from explorer.compilations.models import Compilation

    keys = set()
    for text in ("", "O0"):
        status, comp = post(client, "/api/compilations", {"model": model_id, "pipeline": text})
        assert status == 201, comp
        assert comp["pipeline"] == ONNX_PASSES and comp["requested_pipeline"] == text
        keys.add(Compilation.objects.get(pk=comp["id"]).cache_key)
    assert len(keys) == 1  # the same compilation, so a finished one would serve both from the cache


NOT_TEXT = [(42, "the number 42"), (1.5, "the number 1.5"), (True, "true"), (None, "null"),
            (["O2"], "a list"), ({"name": "O2"}, "an object")]


@pytest.mark.django_db
@pytest.mark.parametrize(("value", "shown"), NOT_TEXT)
def test_a_pipeline_that_is_not_text_is_a_type_error_for_both_endpoints(client, model_id, value, shown):
    expected = (f"pipeline: must be text: a preset name {PRESETS} or comma-separated passes such as "
                f"'fold-constants,eliminate-dead-code' ('' runs no passes, as O0); got {shown}")
    status, body = post(client, "/api/pipelines/validate", {"pipeline": value})
    assert (status, body["error"]) == (400, expected)
    status, body = post(client, "/api/compilations", {"model": model_id, "pipeline": value})
    assert (status, body["error"]) == (400, expected)


@pytest.mark.django_db
@pytest.mark.parametrize("pipeline", [
    "", "  ", "O2", " O1 ", "fold-constants,fuse-ops{max-group-size=8}", "fold-constant", "O4",
    "fuse-ops{bogus=1}", "fuse-ops{max-group-size=many}", "simplify,,eliminate-dead-code", 42, None,
])
def test_both_endpoints_agree(client, model_id, pipeline):
    v_status, v_body = post(client, "/api/pipelines/validate", {"pipeline": pipeline})
    c_status, c_body = post(client, "/api/compilations", {"model": model_id, "pipeline": pipeline})
    if v_status == 200:
        assert c_status == 201, c_body
        assert c_body["pipeline"] == v_body["pipeline"]
    else:
        assert (v_status, c_status) == (400, 400)
        assert v_body == c_body  # same message and the same detail fields


@pytest.mark.django_db
def test_an_unknown_pass_names_the_valid_ones_with_the_compilers_fields(client, model_id):
    status, body = post(client, "/api/compilations", {"model": model_id, "pipeline": "fold-constant"})
    assert status == 400 and body["stage"] == "request" and body["pass"] == "fold-constant"
    assert body["error"].startswith("unknown pass 'fold-constant'; valid passes: ")
    assert "fold-constants" in body["error"] and "message" not in body


@pytest.mark.django_db
@pytest.mark.parametrize(("pipeline", "pass_name", "words"), [
    ("quantize{dtype=int4}", "quantize", "option 'dtype' = int4 is not one of: int8, bf16, fp16"),
    ("O2,quantize{calibration=kl}", "quantize", "option 'calibration' = kl is not one of: minmax, percentile, entropy"),
    ("fuse-ops{max-group-size=0}", "fuse-ops", "option 'max-group-size' = 0 must be at least 1"),
    ("plan-memory{alignment=48}", "plan-memory", "option 'alignment' = 48 must be a power of two"),
])
def test_a_bad_option_value_is_a_400_at_both_endpoints_not_a_failure_on_the_worker(client, model_id, pipeline,
                                                                                    pass_name, words):
    from explorer.compilations.models import Compilation

    before = Compilation.objects.count()
    for url in ("/api/pipelines/validate", "/api/compilations"):
        status, body = post(client, url, {"model": model_id, "pipeline": pipeline})
        assert status == 400, (url, body)
        assert body["error"] == f"pass {pass_name!r}: {words}" and body["pass"] == pass_name
        assert body["stage"] == "request"
    assert Compilation.objects.count() == before


def test_a_missing_pipeline_says_what_is_expected(client):
    status, body = post(client, "/api/pipelines/validate", {})
    assert status == 400 and body["error"].startswith(f"pipeline: required: text: a preset name {PRESETS}")


MODEL_EXPECTED = "the 64-hex sha256 id returned by POST /api/models or POST /api/samples/<name>/model"


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "message"), [
    ({"model": "deadbeef"}, f"model: must be {MODEL_EXPECTED} (got 'deadbeef')"),
    ({"model": 42}, f"model: must be {MODEL_EXPECTED} (got the number 42)"),
    ({"model": ""}, f"model: must be {MODEL_EXPECTED} (got '')"),
    ({"model": None}, f"model: must be {MODEL_EXPECTED} (got null)"),
    ({"model": "x" * 100}, f"model: must be {MODEL_EXPECTED} (got '{'x' * 70}...')"),
    ({}, f"model: required: {MODEL_EXPECTED}"),
    ({"model": "ab" * 32, "target": 7}, "target: must be text; got the number 7"),
])
def test_model_id_and_target_errors_say_what_is_expected(client, body, message):
    status, out = post(client, "/api/compilations", body)
    assert status == 400 and out["error"] == message
    field = message.split(":")[0]
    assert out["detail"] == {field: [message.split(": ", 1)[1]]}


@pytest.mark.django_db
def test_a_model_id_with_surrounding_space_or_capitals_is_the_model(client, model_id):
    status, comp = post(client, "/api/compilations", {"model": f" {model_id.upper()} ", "pipeline": "O0"})
    assert status == 201 and comp["model"]["id"] == model_id


@pytest.mark.django_db
def test_the_service_checks_the_pipeline_type_too(model_id):
    from explorer.compilations import selectors
    from explorer.compilations.services.submission import InvalidRequest, create_compilation

    with pytest.raises(InvalidRequest, match=r"^pipeline: must be text: .*; got the number 42$"):
        create_compilation(selectors.model_for(None, model_id), target="host", pipeline=42, input_shapes=None)


@pytest.mark.parametrize("method", ["get", "post", "put", "delete", "options"])
def test_an_unknown_api_path_is_a_json_404(client, method):
    r = getattr(client, method)("/api/no-such-thing/1")
    assert r.status_code == 404 and r["Content-Type"] == "application/json"
    assert r.json() == {"error": f"no API endpoint {method.upper()} /api/no-such-thing/1; "
                                 "the endpoints are listed by GET /api/schema"}


def test_the_schema_documents_the_error_shape(client):
    schema = json.loads(client.get("/api/schema", HTTP_ACCEPT="application/json").content)
    error = schema["components"]["schemas"]["ErrorOut"]
    assert error["required"] == ["error"]
    assert {"error", "detail", "stage", "pass", "node"} <= set(error["properties"])
    validate = schema["paths"]["/api/pipelines/validate"]["post"]
    assert validate["responses"]["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorOut")
    assert "/api/" not in schema["paths"] and all(schema["paths"].values())  # the catch-all is no endpoint


@pytest.mark.django_db
@pytest.mark.parametrize(("extra", "field", "words"), [
    ({"input_shapes": {"data_0": [100000000, 3, 224, 224]}}, "input_shapes", "but input_shapes gives 100000000"),
    ({"input_shapes": {"data_0": ["N", 3, 224, 224]}}, "input_shapes", "neither an integer nor a dim with a range"),
    ({"input_shapes": {"data": [1, 3, 224, 224]}}, "input_shapes", "not a model input"),
    ({"dim_ranges": {"N": [1, 4]}}, "dim_ranges", "no input shape names 'N'"),
    ({"input_shapes": {"data_0": ["N", 3, 224, 224]}, "dim_ranges": {"N": [3, 1]}}, "dim_ranges", "minimum is above"),
    ({"pipeline": "O2,bogus-pass"}, "pipeline", "unknown pass 'bogus-pass'"),
    ({"pipeline": "O2,fuse-ops{max-group-size=banana}"}, "pipeline", "banana"),
    ({"target": "no-such-target"}, "target", "unknown target"),
    ({"options": {"threads": 0}}, "threads", "positive integer"),
    ({"options": {"calibration": "ab" * 32}}, "calibration", "upload the .npz first"),
    ({"options": {"bogus": True}}, "options", "unknown option 'bogus'"),
    ({"tune_budget_s": -1}, "tune_budget_s", "tune_budget_s"),
])
def test_a_refused_compilation_names_the_field_it_concerns(client, model_id, extra, field, words):
    """The 400's `field` (a refusal by the services or the compiler) or its `detail`'s one key (the
    request did not validate) says which request field to fix: the start page shows the message there."""
    status, body = post(client, "/api/compilations", {"model": model_id, "pipeline": "O1", **extra})
    assert status == 400 and words in body["error"], body
    assert body.get("field", next(iter(body.get("detail", {})), None)) == field, body
