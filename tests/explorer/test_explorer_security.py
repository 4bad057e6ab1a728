"""Cross-site protection, CSP, rate limits, the required secret key, deletion and retention
(issue 17 item 5), in process against the real Redis (DB 14) and the test database."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token
from review_fixtures import compilation, model

from explorer.compilations.models import Compilation, CompilationEvent, UploadedModel
from explorer.compilations.services import artifacts
from explorer.compilations.services.retention import prune
from explorer.review.models import Comment

REPO = Path(__file__).resolve().parents[2]
EVIL = "http://evil.example"
WRITES = [("post", "/api/models"), ("post", "/api/compilations"), ("post", "/api/auth/login"),
          ("post", "/api/auth/signup"), ("post", "/api/pipelines/validate")]


@pytest.fixture(autouse=True)
def fresh_counters(settings):
    """Rate counters outlive a test (Redis); this process's (its own PRISM_STACK prefix) start at 0."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(f"{settings.PRISM_STACK}:rate:*"):
        client.delete(key)


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user("ada", password="ada-pw-12345")


@pytest.mark.parametrize("method,path", WRITES)
def test_a_cross_site_browser_write_is_refused(db, method, path):
    c = Client()
    r = getattr(c, method)(path, {}, HTTP_ORIGIN=EVIL)
    assert r.status_code == 403, r.content
    assert r.json()["error"] == (f"cross-site request refused: Origin {EVIL} is not this server; send it "
                                 "from this server's own pages, or with an API token")
    r = getattr(c, method)(path, {}, HTTP_SEC_FETCH_SITE="cross-site", HTTP_ORIGIN="http://testserver")
    assert r.status_code == 403 and "Sec-Fetch-Site is 'cross-site'" in r.json()["error"]


@pytest.mark.parametrize("headers", [{}, {"HTTP_ORIGIN": "http://testserver"},
                                     {"HTTP_SEC_FETCH_SITE": "same-origin", "HTTP_ORIGIN": "http://testserver"},
                                     {"HTTP_SEC_FETCH_SITE": "none"}])
def test_same_origin_and_non_browser_writes_reach_the_view(db, headers):
    r = Client().post("/api/pipelines/validate", {"pipeline": "O1"}, content_type="application/json", **headers)
    assert r.status_code == 200, r.content


def test_a_token_authenticated_write_is_exempt_even_with_a_foreign_origin(user):
    token = Token.objects.create(user=user)
    r = Client().post("/api/pipelines/validate", {"pipeline": "O1"}, content_type="application/json",
                      HTTP_ORIGIN=EVIL, HTTP_AUTHORIZATION=f"Token {token.key}")
    assert r.status_code == 200, r.content


def test_trusted_origins_may_write(db, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://prism.example.com"]
    r = Client().post("/api/pipelines/validate", {"pipeline": "O1"}, content_type="application/json",
                      HTTP_ORIGIN="https://prism.example.com")
    assert r.status_code == 200


def test_pages_carry_a_content_security_policy_and_json_does_not_need_one(db, settings):
    settings.FRONTEND_DIST = Path("/nonexistent")
    page = Client().get("/")
    csp = page["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
    assert "connect-src 'self' ws://testserver wss://testserver;" in csp
    assert "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]  # no inline scripts
    assert "Content-Security-Policy" not in Client().get("/api/targets")


def test_uploads_over_the_rate_get_429_with_retry_after(db, settings):
    settings.PRISM_UPLOAD_RATE = "3/min"
    c = Client(REMOTE_ADDR="10.9.8.7")
    codes = [c.post("/api/models", {}).status_code for _ in range(4)]
    assert codes == [400, 400, 400, 429], codes  # (no file: 400) counted all the same
    r = c.post("/api/models", {})
    assert r.status_code == 429 and 1 <= int(r["Retry-After"]) <= 60
    assert r.json()["error"].startswith("too many upload requests: the limit is 3/min per client "
                                        "(PRISM_UPLOAD_RATE); retry in ")
    assert Client(REMOTE_ADDR="10.9.8.8").post("/api/models", {}).status_code == 400  # another client


def test_compilations_over_the_rate_get_429_and_users_are_counted_apart(user, settings):
    settings.PRISM_COMPILE_RATE = "2/min"
    anon = Client(REMOTE_ADDR="10.9.8.9")
    body = {"model": "00" * 32}
    codes = [anon.post("/api/compilations", body, content_type="application/json").status_code for _ in range(3)]
    assert codes == [400, 400, 429]
    signed = Client(REMOTE_ADDR="10.9.8.9")
    signed.force_login(user)
    assert signed.post("/api/compilations", body, content_type="application/json").status_code == 400
    spoofed = Client(REMOTE_ADDR="10.9.8.9", HTTP_X_FORWARDED_FOR="1.2.3.4")  # not trusted (PRISM_NUM_PROXIES=0)
    assert spoofed.post("/api/compilations", body, content_type="application/json").status_code == 429


def _settings_in_a_fresh_process(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                               "print(settings.SECRET_KEY)"],
        env={**base, "PRISM_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "explorer.settings",
             "PYTHONPATH": str(REPO), **env}, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_secret_key_is_required_or_read_from_var(tmp_path):
    missing = _settings_in_a_fresh_process(tmp_path)
    assert missing.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is not set" in missing.stderr
    (tmp_path / "secret_key").write_text("k" * 50 + "\n")
    assert _settings_in_a_fresh_process(tmp_path).stdout.strip() == "k" * 50
    given = _settings_in_a_fresh_process(tmp_path, DJANGO_SECRET_KEY="from-the-environment")
    assert given.stdout.strip() == "from-the-environment"


def _stored_model(sha: str, owner=None) -> UploadedModel:
    m = model(sha=sha, owner=owner)
    path = Path(m.file.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"onnx bytes")
    return m


def _running(comp: Compilation) -> Compilation:
    Compilation.objects.filter(pk=comp.pk).update(status="running")
    return comp


def test_the_owner_deletes_a_compilation_with_everything_it_holds(user):
    other = get_user_model().objects.create_user("bob", password="bob-pw-12345")
    m = _stored_model("a1" * 32, owner=user)
    comp = compilation(owner=user, visibility="public", the_model=m)
    Comment.objects.create(compilation=comp, author=other, kind="pass", anchor={"kind": "pass", "pass": 0},
                           context={"pass_name": "fold-constants"}, body="hm")
    owner, bob = Client(), Client()
    owner.force_login(user)
    bob.force_login(other)
    assert bob.delete(f"/api/compilations/{comp.id}").status_code == 403
    assert Client().delete(f"/api/compilations/{comp.id}").status_code == 403  # anonymous, but it is public
    running = _running(compilation(owner=user, the_model=m, cache_key="k2"))
    r = owner.delete(f"/api/compilations/{running.id}")
    assert r.status_code == 409 and "is running" in r.json()["error"]
    artifacts.folder(comp.id).mkdir(parents=True, exist_ok=True)
    (artifacts.folder(comp.id) / "model.onnx").write_bytes(b"x")
    assert owner.delete(f"/api/compilations/{comp.id}").status_code == 204
    assert not artifacts.folder(comp.id).exists()
    assert not Compilation.objects.filter(pk=comp.id).exists()
    assert not CompilationEvent.objects.filter(compilation_id=comp.id).exists()
    assert not Comment.objects.filter(compilation_id=comp.id).exists()
    assert owner.get(f"/api/compilations/{comp.id}").status_code == 404
    assert UploadedModel.objects.filter(pk=m.pk).exists()  # still used by the running one and the upload


def test_deleting_the_last_upload_of_unused_bytes_removes_the_file(user):
    m = _stored_model("a2" * 32, owner=user)
    path = Path(m.file.path)
    owner = Client()
    owner.force_login(user)
    assert Client().delete(f"/api/models/{m.sha256}").status_code in (403, 404)
    assert owner.delete(f"/api/models/{m.sha256}").status_code == 204
    assert not UploadedModel.objects.filter(pk=m.pk).exists() and not path.exists()


def test_retention_deletes_old_finished_compilations_and_unused_models(db, settings):
    old_model = _stored_model("b1" * 32)
    kept_model = _stored_model("b2" * 32)
    old = compilation(the_model=old_model)
    old_running = _running(compilation(the_model=kept_model, cache_key="r"))
    recent = compilation(the_model=kept_model, cache_key="n")
    long_ago = timezone.now() - timedelta(days=40)
    Compilation.objects.filter(pk__in=[old.id, old_running.id]).update(created_at=long_ago)
    UploadedModel.objects.filter(pk__in=[old_model.pk, kept_model.pk]).update(created_at=long_ago)
    old_model.uploads.update(created_at=long_ago)
    made = {c: artifacts.folder(c) for c in (old.id, recent.id, "gone0orphan")}  # the last: no compilation
    for d in made.values():
        d.mkdir(parents=True, exist_ok=True)
        (d / "model.onnx").write_bytes(b"x")
    counts = prune(30)
    assert counts["compilations"] == 1 and counts["models"] == 1 and counts["artifacts"] == 1, counts
    assert set(Compilation.objects.values_list("id", flat=True)) == {old_running.id, recent.id}
    assert not made[old.id].exists() and not made["gone0orphan"].exists() and made[recent.id].is_dir()
    assert not Path(old_model.file.path).exists() and Path(kept_model.file.path).exists()
    settings.PRISM_RETENTION_DAYS = 0
    call_command("prune")  # off: deletes nothing
    assert Compilation.objects.count() == 2
