"""Who may see a compilation or a model (issue 14): one rule, used by every selector.

- `private`: the owner and the members of the owner's teams;
- `unlisted` (the default): anyone who has the link; not in listings;
- `public`: anyone, and listed.

A requester is a Django user, signed in or anonymous (`AnonymousUser`, or None from code that has
no request). Anything a requester may not see is answered exactly as something that does not exist
(HTTP 404, WebSocket close 4404), so its existence is not revealed either.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from explorer.accounts.models import Membership


class Visibility(models.TextChoices):
    PRIVATE = "private"
    UNLISTED = "unlisted"
    PUBLIC = "public"


VISIBILITIES = tuple(v.value for v in Visibility)
DEFAULT = Visibility.UNLISTED.value


def signed_in(requester) -> bool:
    return requester is not None and bool(getattr(requester, "is_authenticated", False))


def circle(requester) -> set[int]:
    """The ids of the users whose private things `requester` sees: itself and its teammates (empty
    for an anonymous requester). Cached on the user object for the request."""
    if not signed_in(requester):
        return set()
    cached = getattr(requester, "_prism_circle", None)
    if cached is None:
        teams = Membership.objects.filter(user_id=requester.pk).values("team_id")
        cached = {requester.pk, *Membership.objects.filter(team_id__in=teams).values_list("user_id", flat=True)}
        requester._prism_circle = cached
    return cached


def can_see(requester, owner_id: int | None, visibility: str) -> bool:
    """True when `requester` may see a thing with this owner and visibility."""
    if visibility != Visibility.PRIVATE:
        return True
    return owner_id is not None and owner_id in circle(requester)


def visible_q(requester, prefix: str = "") -> Q:
    """A filter for querysets of things with `owner` and `visibility` fields (`prefix`: the path to
    them, e.g. `"compilation__"`) that keeps what `requester` may see."""
    shared = Q(**{f"{prefix}visibility__in": [Visibility.UNLISTED, Visibility.PUBLIC]})
    mine = circle(requester)
    return shared | Q(**{f"{prefix}owner_id__in": mine}) if mine else shared


def check_visibility(value: object, requester) -> str:
    """The visibility a request asks for (None: the default), or ValueError with a one-line message:
    an unknown value, or `private` from an anonymous requester (nobody could ever see it)."""
    if value is None:
        return DEFAULT
    if value not in VISIBILITIES:
        shown = value if isinstance(value, str) else type(value).__name__
        raise ValueError(f"visibility must be one of {', '.join(VISIBILITIES)}; got {shown!r}")
    if value == Visibility.PRIVATE and not signed_in(requester):
        raise ValueError("visibility 'private' needs a signed-in user (an anonymous owner could never see it)")
    return str(value)
