"""Accounts API: sign-up, sign-in/out (a browser session), API tokens, teams.

    POST /api/auth/signup  {username, password, email?}  201 me (signed in); 403 when sign-up is off
    POST /api/auth/login   {username, password}          200 me (a session cookie); 400 wrong; 429 throttled
    POST /api/auth/logout                                200 me (nobody)
    GET  /api/auth/me                                    200 me: {user, teams, signup_enabled, require_sign_in}
    POST /api/auth/token   {username, password}          200 {token}: send `Authorization: Token <token>`
    GET/POST /api/teams, GET /api/teams/<slug>, POST /api/teams/<slug>/members {username, role},
    DELETE /api/teams/<slug>/members/<username>
"""

from __future__ import annotations

from django.contrib import auth
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from explorer.accounts import selectors, services
from explorer.compilations.api.errors import error_response
from explorer.compilations.visibility import signed_in


class Credentials(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False)


class SignUp(Credentials):
    email = serializers.EmailField(required=False, allow_blank=True)


class TeamRequest(serializers.Serializer):
    name = serializers.CharField(max_length=128)
    slug = serializers.CharField(max_length=64, required=False)


class MemberRequest(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(["admin", "member"], default="member")


def account_error(exc: services.AccountError) -> Response:
    return error_response(exc.message, exc.status)


def _authenticate(request: Request) -> object | None:
    data = Credentials(data=request.data)
    data.is_valid(raise_exception=True)
    return auth.authenticate(request._request, username=data.validated_data["username"],
                             password=data.validated_data["password"])


WRONG_CREDENTIALS = "wrong username or password"


class CredentialsView(APIView):
    """A view that takes a username and password in its body: no session or token authentication
    (an old session does not matter), throttled as the ``login`` scope (PRISM_LOGIN_RATE per client)."""

    authentication_classes: list = []  # credentials in the body; an old session does not matter
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "login"


class SignUpView(CredentialsView):
    @extend_schema(request=SignUp, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request) -> Response:
        """Create an account and sign in; 403 when sign-up is turned off (PRISM_SIGNUP_ENABLED=0)."""
        data = SignUp(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            user = services.sign_up(**data.validated_data)
        except services.AccountError as exc:
            return account_error(exc)
        auth.login(request._request, user, backend="django.contrib.auth.backends.ModelBackend")
        return Response(selectors.me_dict(user), status=201)


class LoginView(CredentialsView):
    @extend_schema(request=Credentials, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request) -> Response:
        """Sign in (a session cookie); 400 for a wrong username or password; 429 when throttled
        (PRISM_LOGIN_RATE per client address)."""
        user = _authenticate(request)
        if user is None:
            return error_response(WRONG_CREDENTIALS, 400)
        auth.login(request._request, user)
        return Response(selectors.me_dict(user))


class LogoutView(APIView):
    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request) -> Response:
        """Sign out (ends the session)."""
        auth.logout(request._request)
        return Response(selectors.me_dict(None))


class MeView(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        """Who is signed in (`user` null when nobody), its teams, and whether sign-up is open and
        sign-in required to upload and compile."""
        return Response(selectors.me_dict(request.user))


class TokenView(CredentialsView):
    @extend_schema(request=Credentials, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request) -> Response:
        """`{token}` for scripts and the CLI: send `Authorization: Token <token>`. The same token
        every time until it is deleted (admin). 400 for a wrong username or password; 429 throttled."""
        user = _authenticate(request)
        if user is None:
            return error_response(WRONG_CREDENTIALS, 400)
        token, _ = Token.objects.get_or_create(user=user)
        return Response({"token": token.key, "username": user.get_username()})


def _signed_in_or_401(request: Request) -> Response | None:
    if signed_in(request.user):
        return None
    return error_response("sign in first (POST /api/auth/login, or send Authorization: Token <token>)", 401)


class TeamListView(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT, operation_id="teams_list")
    def get(self, request: Request) -> Response:
        """The requester's teams."""
        return Response([selectors.team_dict(t) for t in selectors.teams_of(request.user)])

    @extend_schema(request=TeamRequest, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request) -> Response:
        """Create a team; the requester becomes its admin. 400 for a taken slug."""
        if (denied := _signed_in_or_401(request)) is not None:
            return denied
        data = TeamRequest(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            team = services.create_team(request.user, **data.validated_data)
        except services.AccountError as exc:
            return account_error(exc)
        return Response(selectors.team_dict(team), status=201)


class TeamDetailView(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, slug: str) -> Response:
        """A team and its members (404 unless the requester is a member)."""
        team = selectors.team_for(request.user, slug)
        if team is None:
            return error_response(f"no team {slug}", 404)
        return Response(selectors.team_dict(team))


class TeamMembersView(APIView):
    @extend_schema(request=MemberRequest, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, slug: str) -> Response:
        """Add a member or change its role (team admins only: 403 otherwise)."""
        team = selectors.team_for(request.user, slug)
        if team is None:
            return error_response(f"no team {slug}", 404)
        data = MemberRequest(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            services.add_member(team, request.user, **data.validated_data)
        except services.AccountError as exc:
            return account_error(exc)
        return Response(selectors.team_dict(team))


class TeamMemberView(APIView):
    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def delete(self, request: Request, slug: str, username: str) -> Response:
        """Remove a member (an admin removes anyone, a member itself)."""
        team = selectors.team_for(request.user, slug)
        if team is None:
            return error_response(f"no team {slug}", 404)
        try:
            services.remove_member(team, request.user, username)
        except services.AccountError as exc:
            return account_error(exc)
        return Response(selectors.team_dict(team))
