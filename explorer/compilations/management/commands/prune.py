"""`manage.py prune [--days N]`: delete compilations and models older than N days (default
`PRISM_RETENTION_DAYS`) with everything they hold (`services.retention.prune`)."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from explorer.compilations.services.retention import prune


class Command(BaseCommand):
    help = "Delete finished compilations, uploads and unused models older than N days."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--days", type=int, default=None,
                            help="age in days (default PRISM_RETENTION_DAYS; 0 there: keep everything)")

    def handle(self, *args, **opts) -> None:
        days = opts["days"] if opts["days"] is not None else int(settings.PRISM_RETENTION_DAYS)
        if days <= 0:
            if opts["days"] is not None:
                raise CommandError("--days must be at least 1")
            self.stdout.write("retention is off (PRISM_RETENTION_DAYS=0): nothing deleted")
            return
        counts = prune(days)
        self.stdout.write("deleted " + ", ".join(f"{n} {what}" for what, n in counts.items())
                          + f" older than {days} days")
