"""Celery worker hooks: every pool process of every worker reaps compilations left `running` by a
lost worker, and the run folders (`prism-run-<pid>-*`) of killed processes, once when it starts and
then every `PRISM_REAP_INTERVAL_S` seconds; it limits its own address space
(`PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES`) and writes a fatal error's report where the message of a
lost compilation finds it (`services.fault_log`); and it measures the machine's roofline ceilings once
(`compiler.runtime.ceilings.worker_ceilings` at all the CPUs it may use, the compilations' default
thread count), which every compilation it times then carries in `model.timed`; and it starts the child
that will compile its first compilation (`compiler.isolated_compile.prestart`).

The reaper runs in the pool processes, not in the worker's main process, on purpose: the main
process forks new pool processes (when one dies), and a SQLite connection open in a process at
fork time leaves the child's SQLite locking state corrupt ("database is locked" for good). So the
main process never opens the database.
"""

import logging
import resource
import threading
import time

from celery.signals import worker_process_init, worker_process_shutdown, worker_ready
from django.conf import settings
from django.db import connections

from compiler import isolated_compile
from compiler.runtime.ceilings import worker_ceilings
from compiler.runtime.pool import available_threads
from compiler.runtime.process import remove_stale_run_dirs
from explorer.compilations.services import fault_log
from explorer.compilations.services.reaper import reap_stale_compilations

log = logging.getLogger(__name__)
_stop = threading.Event()
_last_prune = [0.0]
PRUNE_EVERY_S = 3600.0


def _retention_due() -> None:
    """Once an hour per pool process, when `PRISM_RETENTION_DAYS` > 0: `services.retention.prune`."""
    days = int(settings.PRISM_RETENTION_DAYS)
    if days > 0 and time.monotonic() - _last_prune[0] >= PRUNE_EVERY_S:
        # models are imported once the apps are ready (this module loads in AppConfig.ready)
        from explorer.compilations.services.retention import prune

        _last_prune[0] = time.monotonic()
        prune(days)


def _reap_forever() -> None:
    while True:
        try:
            reaped = reap_stale_compilations()
            if reaped:
                log.warning("reaped compilations left running by lost workers: %s", ", ".join(reaped))
            for folder in remove_stale_run_dirs():
                log.warning("removed the run folder %s of a killed process", folder)
            fault_log.remove_stale()
            _retention_due()
        except Exception:  # noqa: BLE001 - keep reaping; the next round may succeed
            log.exception("reaping stale compilations failed")
        finally:
            connections.close_all()
        if _stop.wait(float(settings.PRISM_REAP_INTERVAL_S)):
            return


@worker_process_init.connect
def start_reaper(**kwargs) -> None:
    limit_address_space()
    fault_log.enable()
    threading.Thread(target=_reap_forever, name="prism-reaper", daemon=True).start()
    # measured now, before the first compilation (whose run stage would otherwise measure on first use)
    threading.Thread(target=worker_ceilings, args=(available_threads(),), name="prism-ceilings", daemon=True).start()
    if settings.PRISM_COMPILE_IN_CHILD:
        isolated_compile.prestart()  # the first compilation's child, started in the thread that runs tasks


@worker_process_shutdown.connect
def stop_reaper(**kwargs) -> None:
    _stop.set()
    fault_log.disable()


@worker_ready.connect
def announce_stack(**kwargs) -> None:
    """One line naming the stack whose keys this worker reads (the main process; no database)."""
    log.info("stack %s: broker keys prefixed %r, channel-layer prefix %r", settings.PRISM_STACK,
             settings.PRISM_BROKER_KEY_PREFIX, settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"])


def limit_address_space() -> None:
    """RLIMIT_AS of this pool process: `PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES`. A compilation that
    needs more gets a MemoryError, which the compiler reports as a `compile.failed` naming the limit
    (`compiler.runtime.limits.memory_error_message`), instead of the OS killing the worker."""
    want = int(settings.PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
