"""Writes for accounts and teams: sign-up, and team membership managed by team admins.

Passwords are checked by Django's validators (`AUTH_PASSWORD_VALIDATORS`) and stored hashed by
Django (`User.set_password`); nothing here sees a password after that.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from explorer.accounts.models import Membership, Team


class AccountError(Exception):
    """A request about accounts or teams that cannot be done; the message says why (one line).
    `status` is the HTTP status the API answers with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.status = message, status


def _text(value: object, field: str, max_length: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AccountError(f"{field}: required, as text")
    value = value.strip()
    if len(value) > max_length:
        raise AccountError(f"{field}: at most {max_length} characters")
    return value


def sign_up(username: object, password: object, email: object = "") -> object:
    """Create a user. Raises AccountError: sign-up is off (`PRISM_SIGNUP_ENABLED=0`, 403), a
    missing or taken username, or a password Django's validators refuse (their first message)."""
    if not settings.PRISM_SIGNUP_ENABLED:
        raise AccountError("sign-up is turned off on this server; ask an administrator for an account", 403)
    User = get_user_model()
    name = _text(username, "username", 150)
    field = User._meta.get_field(User.USERNAME_FIELD)
    try:
        field.run_validators(name)
    except ValidationError as exc:
        raise AccountError(f"username: {exc.messages[0]}") from exc
    if not isinstance(password, str) or not password:
        raise AccountError("password: required")
    candidate = User(username=name, email=email if isinstance(email, str) else "")
    try:
        password_validation.validate_password(password, candidate)
    except ValidationError as exc:
        raise AccountError(f"password: {exc.messages[0]}") from exc
    candidate.set_password(password)
    try:
        with transaction.atomic():
            candidate.save()
    except IntegrityError as exc:
        raise AccountError(f"username: {name!r} is taken") from exc
    return candidate


def create_team(creator, name: object, slug: object = None) -> Team:
    """A new team with `creator` as its admin. Raises AccountError for a bad or taken slug."""
    title = _text(name, "name", 128)
    key = slugify(slug if isinstance(slug, str) and slug.strip() else title)[:64]
    if not key:
        raise AccountError("slug: letters, digits, '-' or '_' needed")
    try:
        with transaction.atomic():
            team = Team.objects.create(slug=key, name=title)
            Membership.objects.create(team=team, user=creator, role=Membership.Role.ADMIN)
    except IntegrityError as exc:
        raise AccountError(f"slug: a team {key!r} exists already") from exc
    return team


def _require_admin(team: Team, actor) -> None:
    if not Membership.objects.filter(team=team, user_id=actor.pk, role=Membership.Role.ADMIN).exists():
        raise AccountError(f"only an admin of team {team.slug!r} can change its members", 403)


def add_member(team: Team, actor, username: object, role: object = "member") -> Membership:
    """Add a user to a team, or change its role (`admin` or `member`); `actor` must be an admin."""
    _require_admin(team, actor)
    name = _text(username, "username", 150)
    if role not in Membership.Role.values:
        raise AccountError(f"role: one of {', '.join(Membership.Role.values)}; got {role!r}")
    user = get_user_model().objects.filter(username=name).first()
    if user is None:
        raise AccountError(f"username: no user {name!r}")
    member, _ = Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
    return member


def remove_member(team: Team, actor, username: str) -> None:
    """Take a user out of a team; an admin may remove anyone, a member only itself. The last admin
    cannot leave while others remain."""
    member = Membership.objects.filter(team=team, user__username=username).first()
    if member is None:
        raise AccountError(f"no member {username!r} in team {team.slug!r}", 404)
    if member.user_id != actor.pk:
        _require_admin(team, actor)
    admins = Membership.objects.filter(team=team, role=Membership.Role.ADMIN)
    if member.role == Membership.Role.ADMIN and admins.count() == 1 and team.memberships.count() > 1:
        raise AccountError(f"{username!r} is the last admin of team {team.slug!r}: make another admin first")
    member.delete()
