"""Reads for accounts and teams. A team is seen by its members only (others get None: a 404)."""

from __future__ import annotations

from django.conf import settings

from explorer.accounts.models import Team
from explorer.compilations.visibility import signed_in


def team_for(requester, slug: str) -> Team | None:
    """The team `slug` if `requester` is one of its members, else None."""
    if not signed_in(requester):
        return None
    return Team.objects.filter(slug=slug, memberships__user_id=requester.pk).first()


def teams_of(requester) -> list[Team]:
    if not signed_in(requester):
        return []
    return list(Team.objects.filter(memberships__user_id=requester.pk).order_by("slug"))


def team_dict(team: Team) -> dict:
    return {
        "slug": team.slug,
        "name": team.name,
        "members": [{"username": m.user.get_username(), "role": m.role}
                    for m in team.memberships.select_related("user").order_by("user__username")],
        "created_at": team.created_at.isoformat(),
    }


def me_dict(requester) -> dict:
    """Who is signed in (`user`: null when nobody), its teams, and what the server allows."""
    user = {"username": requester.get_username()} if signed_in(requester) else None
    return {
        "user": user,
        "teams": [{"slug": t.slug, "name": t.name} for t in teams_of(requester)],
        "signup_enabled": bool(settings.PRISM_SIGNUP_ENABLED),
        "require_sign_in": bool(settings.PRISM_REQUIRE_SIGN_IN),
    }
