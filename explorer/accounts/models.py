"""Teams of Django users. Users, password hashing and sessions are Django's own
(`django.contrib.auth`); API tokens are Django REST framework's (`rest_framework.authtoken`).

A team's members see each other's `private` compilations and models (`visibility.py`)."""

from django.conf import settings
from django.db import models


class Team(models.Model):
    """A named group of users; `slug` is its id in URLs (`/api/teams/<slug>`)."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="teams")

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """A user in a team; `admin` members add and remove members."""

    class Role(models.TextChoices):
        ADMIN = "admin"
        MEMBER = "member"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="unique_team_member")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"
