"""Celery worker hooks: every worker's main process reaps compilations left `running` by a lost
worker, once when it becomes ready and then every `PRISM_REAP_INTERVAL_S` seconds."""

import logging
import threading

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import connections

log = logging.getLogger(__name__)
_stop = threading.Event()


def _reap_forever() -> None:
    from explorer.compilations.services.compilations import reap_stale_compilations

    while True:
        try:
            reaped = reap_stale_compilations()
            if reaped:
                log.warning("reaped compilations left running by lost workers: %s", ", ".join(reaped))
        except Exception:  # noqa: BLE001 - keep reaping; the next round may succeed
            log.exception("reaping stale compilations failed")
        finally:
            connections.close_all()  # no connection may be inherited by forked pool processes
        if _stop.wait(float(settings.PRISM_REAP_INTERVAL_S)):
            return


@worker_ready.connect
def start_reaper(**kwargs) -> None:
    threading.Thread(target=_reap_forever, name="prism-reaper", daemon=True).start()


@worker_shutdown.connect
def stop_reaper(**kwargs) -> None:
    _stop.set()
