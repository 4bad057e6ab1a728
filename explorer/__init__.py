"""Prism's explorer service: Django (HTTP + Channels WebSocket) and Celery around `compiler`.

Importing the package loads the Celery app so that `@shared_task` binds to it.
"""

from explorer.celery import app as celery_app

__all__ = ["celery_app"]
