"""Accounts and teams (explorer.accounts): sign-up (and turning it off), sign-in/out, tokens,
throttled login, teams managed by their admins; passwords hashed by Django."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery staple"


def post(c: Client, url: str, body: dict | None = None):
    return c.post(url, body or {}, content_type="application/json")


@pytest.fixture(autouse=True)
def fresh_throttle():
    cache.clear()
    yield
    cache.clear()


def test_sign_up_sign_in_sign_out(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the real one
    c = Client()
    assert c.get("/api/auth/me").json()["user"] is None
    r = post(c, "/api/auth/signup", {"username": "ada", "password": PASSWORD})
    assert r.status_code == 201 and r.json()["user"] == {"username": "ada"}
    stored = get_user_model().objects.get(username="ada").password
    assert stored.startswith("pbkdf2_sha256$") and PASSWORD not in stored
    assert c.get("/api/auth/me").json()["user"] == {"username": "ada"}
    assert post(c, "/api/auth/logout").json()["user"] is None
    assert c.get("/api/auth/me").json()["user"] is None
    r = post(c, "/api/auth/login", {"username": "ada", "password": "wrong"})
    assert r.status_code == 400 and r.json()["error"] == "wrong username or password"
    assert post(c, "/api/auth/login", {"username": "ada", "password": PASSWORD}).json()["user"] == {"username": "ada"}
    assert post(Client(), "/api/auth/signup", {"username": "ada", "password": PASSWORD}).json()["error"] == "username: 'ada' is taken"
    r = post(Client(), "/api/auth/signup", {"username": "bob", "password": "123"})
    assert r.status_code == 400 and r.json()["error"].startswith("password: ")


def test_sign_up_can_be_turned_off(settings):
    settings.PRISM_SIGNUP_ENABLED = False
    r = post(Client(), "/api/auth/signup", {"username": "eve", "password": PASSWORD})
    assert r.status_code == 403 and "turned off" in r.json()["error"]
    assert not get_user_model().objects.filter(username="eve").exists()
    assert Client().get("/api/auth/me").json()["signup_enabled"] is False


def test_tokens_authenticate_scripts():
    get_user_model().objects.create_user("ada", password=PASSWORD)
    r = post(Client(), "/api/auth/token", {"username": "ada", "password": PASSWORD})
    token = r.json()["token"]
    assert post(Client(), "/api/auth/token", {"username": "ada", "password": PASSWORD}).json()["token"] == token
    me = Client(HTTP_AUTHORIZATION=f"Token {token}").get("/api/auth/me").json()
    assert me["user"] == {"username": "ada"}
    assert Client(HTTP_AUTHORIZATION="Token nope").get("/api/auth/me").status_code == 401
    assert post(Client(), "/api/auth/token", {"username": "ada", "password": "x"}).status_code == 400


def test_login_is_throttled(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"login": "3/min"}}
    from rest_framework.throttling import ScopedRateThrottle

    ScopedRateThrottle.THROTTLE_RATES = {"login": "3/min"}
    try:
        c = Client()
        codes = [post(c, "/api/auth/login", {"username": "x", "password": "y"}).status_code for _ in range(5)]
        assert codes == [400, 400, 400, 429, 429]
        assert post(c, "/api/auth/token", {"username": "x", "password": "y"}).status_code == 429
    finally:
        from rest_framework.settings import api_settings

        ScopedRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES


def test_teams_are_managed_by_their_admins():
    users = {n: get_user_model().objects.create_user(n, password=PASSWORD) for n in ("ada", "bob", "eve")}
    clients = {}
    for n, u in users.items():
        clients[n] = Client()
        clients[n].force_login(u)
    r = post(clients["ada"], "/api/teams", {"name": "Compiler team", "slug": "compilers"})
    assert r.status_code == 201 and r.json()["members"] == [{"username": "ada", "role": "admin"}]
    assert post(clients["ada"], "/api/teams", {"name": "again", "slug": "compilers"}).status_code == 400
    assert post(Client(), "/api/teams", {"name": "anon"}).status_code == 401
    assert clients["eve"].get("/api/teams/compilers").status_code == 404  # not a member
    assert post(clients["eve"], "/api/teams/compilers/members", {"username": "eve"}).status_code == 404
    r = post(clients["ada"], "/api/teams/compilers/members", {"username": "bob"})
    assert {"username": "bob", "role": "member"} in r.json()["members"]
    assert post(clients["bob"], "/api/teams/compilers/members", {"username": "eve"}).status_code == 403
    assert post(clients["ada"], "/api/teams/compilers/members", {"username": "nobody"}).status_code == 400
    assert [t["slug"] for t in clients["bob"].get("/api/teams").json()] == ["compilers"]
    assert clients["bob"].delete("/api/teams/compilers/members/ada").status_code == 403
    assert clients["ada"].delete("/api/teams/compilers/members/ada").status_code == 400  # the last admin
    assert clients["bob"].delete("/api/teams/compilers/members/bob").status_code == 200  # leaves
    assert clients["bob"].get("/api/teams/compilers").status_code == 404


def test_admin_manages_teams(admin_client):
    assert admin_client.get("/admin/accounts/team/").status_code == 200
    assert admin_client.get("/admin/accounts/team/add/").status_code == 200
    assert admin_client.get("/admin/review/comment/").status_code == 200
