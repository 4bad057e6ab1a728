"""The Celery app. Configuration comes from Django settings (`CELERY_*` keys).

Start a worker with `celery -A explorer worker -Q prism.compile -c 1 -l info`.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "explorer.settings")

app = Celery("explorer")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
