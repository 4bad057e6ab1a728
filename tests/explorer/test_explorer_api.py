"""HTTP API and pages, in process (Django's test client, the test database)."""

from __future__ import annotations

import json

import httpx
import pytest
from explorer_async import run_async

from compiler.passes.pipeline import ONNX_PASSES
from explorer.asgi import application


@pytest.mark.django_db
def test_upload_over_the_limit_is_413(client, settings):
    settings.PRISM_MAX_UPLOAD_BYTES = 1000
    from django.core.files.uploadedfile import SimpleUploadedFile

    r = client.post("/api/models", {"model": SimpleUploadedFile("big.onnx", b"\0" * 5000)})
    assert r.status_code == 413
    assert "limit is 1000 bytes" in r.json()["error"]


def test_asgi_rejects_an_oversized_body_before_reading_it(settings):
    settings.PRISM_MAX_UPLOAD_BYTES = 1000

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.post("/api/models", content=b"\0" * 200_000)

    r = run_async(post())
    assert r.status_code == 413 and "too large (200000 bytes)" in r.json()["error"]


def _post_chunked(path: str, body: bytes, content_type: str) -> httpx.Response:
    """POST with a chunked body (no Content-Length), as `curl -F model=@/dev/null` sends it."""

    async def chunks():
        for i in range(0, len(body), 1000):
            yield body[i:i + 1000]

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.post(path, content=chunks(), headers={"content-type": content_type})

    return run_async(post())


def _multipart(data: bytes) -> bytes:
    return (b'--XyZ\r\nContent-Disposition: form-data; name="model"; filename="null"\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n--XyZ--\r\n")


@pytest.mark.django_db(transaction=True)
def test_chunked_uploads_are_read(settings):
    r = _post_chunked("/api/models", _multipart(b""), "multipart/form-data; boundary=XyZ")
    assert r.status_code == 400 and r.json()["error"] == "model is empty (0 bytes)"
    r = _post_chunked("/api/models", _multipart(b"\x08\x07"), "multipart/form-data; boundary=XyZ")
    assert r.status_code == 400 and r.json()["error"].startswith("not an ONNX model")
    settings.PRISM_MAX_UPLOAD_BYTES = 1000
    r = _post_chunked("/api/models", _multipart(b"\0" * 200_000), "multipart/form-data; boundary=XyZ")
    assert r.status_code == 413 and "limit is 1000 bytes" in r.json()["error"]


@pytest.mark.django_db
def test_empty_upload_says_so(client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    r = client.post("/api/models", {"model": SimpleUploadedFile("empty.onnx", b"")})
    assert r.status_code == 400 and r.json()["error"] == "model is empty (0 bytes)"


@pytest.mark.django_db
def test_unparsable_json_body_names_the_parse_error(client):
    r = client.post("/api/compilations", data=b"{nope", content_type="application/json")
    assert r.status_code == 400 and r.json()["error"].startswith("JSON parse error - ")


@pytest.mark.django_db
def test_upload_needs_the_model_field(client):
    r = client.post("/api/models", {"file": "x"})
    assert r.status_code == 400 and "'model'" in r.json()["error"]


@pytest.mark.django_db
def test_compilation_request_errors_name_the_problem(client):
    r = client.post("/api/compilations", {"model": "ab" * 32}, content_type="application/json")
    assert r.status_code == 400 and "unknown model" in r.json()["error"]
    r = client.post("/api/compilations", {"model": "nope"}, content_type="application/json")
    assert r.status_code == 400 and r.json()["error"].startswith("model:")


@pytest.mark.django_db
def test_unknown_ids_are_404(client):
    assert client.get("/api/compilations/zzzzzzzz").status_code == 404
    assert client.get("/api/compilations/zzzzzzzz/events").status_code == 404
    assert client.get("/api/models/" + "cd" * 32).status_code == 404


@pytest.mark.django_db
def test_events_page(client, make_compilation):
    from explorer.compilations.services.events import record_event

    comp = make_compilation(status="running", attempts=1)
    for seq, etype in enumerate(["compile.started", "pass.started", "compile.finished"]):
        record_event(comp.id, {"seq": seq, "type": etype, "ts": 1.0}, attempt=1)
    body = client.get(f"/api/compilations/{comp.id}/events?after=0").json()
    assert [e["seq"] for e in body["events"]] == [1, 2] and body["complete"] and body["status"] == "succeeded"
    body = client.get(f"/api/compilations/{comp.id}/events?after=0&limit=1").json()
    assert [e["seq"] for e in body["events"]] == [1] and not body["complete"] and body["next_after"] == 1
    assert client.get(f"/api/compilations/{comp.id}/events?after=x").status_code == 400
    detail = client.get(f"/api/compilations/{comp.id}").json()
    assert detail["event_count"] == 3 and detail["url"] == f"/c/{comp.id}"


def test_openapi_schema_has_no_warnings(tmp_path):
    from django.core.management import call_command

    call_command("spectacular", "--fail-on-warn", "--validate", "--file", str(tmp_path / "schema.yml"))
    assert "CompilationOut" in (tmp_path / "schema.yml").read_text()


@pytest.mark.django_db
def test_openapi_schema(client):
    r = client.get("/api/schema", HTTP_ACCEPT="application/json")
    assert r.status_code == 200
    paths = json.loads(r.content)["paths"]
    for p in ("/api/models", "/api/compilations", "/api/compilations/{compilation_id}/events",
              "/api/targets", "/api/passes", "/api/pipelines", "/api/samples", "/api/auth/token",
              "/api/auth/login", "/api/teams", "/api/compilations/{compilation_id}/comments",
              "/api/compilations/{compilation_id}/comments/{comment_id}", "/api/compilations/{compilation_id}/reviews"):
        assert p in paths


@pytest.mark.parametrize("url", ["/", "/c/k3x9q2ab", "/c/k3x9q2ab/summary", "/c/k3x9q2ab/kernels",
                                 "/c/k3x9q2ab/remarks", "/c/k3x9q2ab/remarks?pass=fuse-ops&kind=missed",
                                 "/c/k3x9q2ab?view=kernels", "/c/k3x9q2ab/pass/3", "/c/k3x9q2ab/kernel/k_conv0",
                                 "/c/k3x9q2ab/kernel/a%2Fb", "/c/k3x9q2ab/graph", "/compare/k3x9q2ab...a2b3c4d5"])
def test_pages_serve_the_built_app_or_say_how_to_build_it(client, settings, tmp_path, url, make_compilation):
    make_compilation(id="k3x9q2ab")
    make_compilation(id="a2b3c4d5")
    settings.FRONTEND_DIST = tmp_path / "missing"
    r = client.get(url)
    assert r.status_code == 200 and b"npm run build" in r.content
    (tmp_path / "index.html").write_text("<!doctype html><div id=app></div>")
    settings.FRONTEND_DIST = tmp_path
    r = client.get(url)
    assert r.status_code == 200 and r.content == b"<!doctype html><div id=app></div>"


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/c/k3x9q2ab/nope", "/c/k3x9q2ab/kernels/x", "/c/k3x9q2ab/pass/x",
                                 "/c/zzzzzzzz", "/c/zzzzzzzz/pass/1", "/compare/k3x9q2ab...zzzzzzzz"])
def test_unknown_pages_are_404(client, settings, tmp_path, url, make_compilation):
    make_compilation(id="k3x9q2ab")
    (tmp_path / "index.html").write_text("<!doctype html><div id=app></div>")
    settings.FRONTEND_DIST = tmp_path
    assert client.get(url).status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/no/such/page", "/c", "/nope.html", "/c/k3x9q2ab/kernels/x"])
def test_an_unknown_path_is_the_apps_own_404_page(client, settings, tmp_path, url, make_compilation):
    make_compilation(id="k3x9q2ab")
    (tmp_path / "index.html").write_text("<!doctype html><div id=app></div>")
    settings.FRONTEND_DIST = tmp_path
    r = client.get(url)
    assert r.status_code == 404 and r.content == b"<!doctype html><div id=app></div>"  # the app, not Django's page
    assert client.get("/api/nope").json()["error"].startswith("no API endpoint")  # the API keeps its JSON 404
    assert client.get("/admin/").status_code == 302  # still Django's admin (to its sign-in page)


@pytest.mark.django_db
def test_a_sample_becomes_a_model_without_an_upload(client):
    listed = {s["name"]: s for s in client.get("/api/samples").json()}
    assert listed["light_squeezenet"]["register_url"] == "/api/samples/light_squeezenet/model"
    r = client.post("/api/samples/light_squeezenet/model")
    assert r.status_code == 201, r.content
    model = r.json()
    assert model["source"] == "sample:light_squeezenet" and model["opset"] > 0
    assert client.post("/api/samples/light_squeezenet/model").json()["id"] == model["id"]
    assert client.post("/api/samples/no-such-sample/model").status_code == 404


@pytest.mark.django_db
def test_catalog_comes_from_the_compiler(client):
    assert "host" in {t["name"] for t in client.get("/api/targets").json()}
    assert "fold-constants" in {p["name"] for p in client.get("/api/passes").json()}
    assert "O2" in {p["name"] for p in client.get("/api/pipelines").json()}


def test_pipeline_validation_expands_presets_and_names_what_is_wrong(client):
    r = client.post("/api/pipelines/validate", {"pipeline": "O1"}, content_type="application/json")
    assert r.status_code == 200
    assert r.json() == {"pipeline": ONNX_PASSES + ",fold-constants,simplify,eliminate-dead-code"}
    text = ONNX_PASSES + ",fold-constants,fuse-ops{max-group-size=8}"
    r = client.post("/api/pipelines/validate", {"pipeline": text}, content_type="application/json")
    assert r.json() == {"pipeline": text}
    r = client.post("/api/pipelines/validate", {"pipeline": "fold-constant"}, content_type="application/json")
    assert r.status_code == 400
    assert "unknown pass 'fold-constant'" in r.json()["error"] and "fold-constants" in r.json()["error"]
    r = client.post("/api/pipelines/validate", {"pipeline": "fuse-ops{bogus=1}"},
                    content_type="application/json")
    assert r.status_code == 400 and "unknown option 'bogus'" in r.json()["error"]
    assert client.post("/api/pipelines/validate", {}, content_type="application/json").status_code == 400


@pytest.mark.django_db
def test_upload_stores_the_bytes_once_under_a_generated_name(client, settings):
    from pathlib import Path

    import onnx
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = (Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx").read_bytes()
    r = client.post("/api/models", {"model": SimpleUploadedFile("../../evil name.onnx", data)})
    assert r.status_code == 201, r.content
    model = r.json()
    assert model["name"] == "evil name.onnx" and model["size"] == len(data)
    stored = Path(settings.MEDIA_ROOT) / "models" / model["sha256"][:2] / f"{model['sha256']}.onnx"
    assert stored.read_bytes() == data
    again = client.post("/api/models", {"model": SimpleUploadedFile("copy.onnx", data)})
    assert again.status_code == 200 and again.json()["id"] == model["id"]
    bad = client.post("/api/models", {"model": SimpleUploadedFile("x.onnx", data[: len(data) // 2])})
    assert bad.status_code == 400 and bad.json()["error"].startswith("not a valid ONNX model: ")
    assert bad.json()["error"].count("not a valid ONNX model") == 1  # the compiler's message, not re-prefixed
    assert not list((Path(settings.MEDIA_ROOT) / "tmp").iterdir())  # no temporary file left


@pytest.mark.django_db
def test_admin_lists_models_compilations_and_events(admin_client, make_compilation):
    from explorer.compilations.services.events import record_event

    comp = make_compilation(status="running", attempts=1)
    record_event(comp.id, {"seq": 0, "type": "compile.started", "ts": 1.0}, attempt=1)
    for page in ("uploadedmodel/", "compilation/", "compilationevent/", f"compilation/{comp.id}/change/"):
        r = admin_client.get(f"/admin/compilations/{page}")
        assert r.status_code == 200, page
    assert admin_client.get("/static/admin/css/base.css").status_code == 200
