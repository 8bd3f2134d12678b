"""One process per site: start them, collect one report from each, notice deaths, bound the wait.

The one launcher of the emulator's rounds (``emulator/runner.py``), of training
(``train/launcher.py``) and of ``bench/bench_loss.py``'s sites. Each site process is ``target(*args(site), queue)`` and puts exactly one
``(site, report)`` on ``queue`` before it ends. :meth:`SiteProcesses.collect` waits for the
reports; a process that has exited and whose report has not arrived ``report_grace`` s later
(the queue's feeder thread flushes a report just before exit) died. Once a report says the site
failed (``is_failure``) or a process died, ``on_failure`` runs once (e.g. aborting a barrier
the others wait at) and the others get ``after_failure`` s to stop with their own reports; at
``lifetime`` (from the start) or at the end of that grace, every site still without a report is
given up. :meth:`SiteProcesses.stop` (also on leaving the ``with`` block) kills what is still
alive and joins everything: no site process outlives its launcher's call.
"""

from __future__ import annotations

import math
import queue as queue_mod
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Seconds a process may have exited before its report is taken as lost (it died).
REPORT_GRACE = 2.0


def exit_reason(code: int | None) -> str:
    """A process's exit code in words ("exit code 3", "killed by signal 9")."""
    return f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"


@dataclass
class SiteOutcome:
    """What :meth:`SiteProcesses.collect` found, per site: a report, or why there is none."""

    reports: dict[int, Any] = field(default_factory=dict)
    died: dict[int, int | None] = field(default_factory=dict)  # exited without a report: code
    given_up: dict[int, str] = field(default_factory=dict)  # still running: "lifetime"|"failure"


class SiteProcesses:
    """``n`` site processes of ``ctx`` (a multiprocessing context) running ``target``."""

    def __init__(self, ctx: Any, n: int, target: Callable[..., None],
                 args: Callable[[int], tuple], *, name: str = "site") -> None:
        self.queue = ctx.Queue()
        self.procs = [ctx.Process(target=target, name=f"{name}-{s}", daemon=True,
                                  args=(*args(s), self.queue)) for s in range(n)]

    def start(self) -> None:
        for p in self.procs:
            p.start()

    def collect(self, *, lifetime: float = math.inf, after_failure: float = math.inf,
                is_failure: Callable[[Any], bool] = lambda rep: False,
                on_failure: Callable[[], None] | None = None,
                report_grace: float = REPORT_GRACE) -> SiteOutcome:
        """Wait for every site's report (module docstring); never longer than ``lifetime``."""
        out = SiteOutcome()
        n = len(self.procs)
        deadline = time.monotonic() + lifetime
        exited: dict[int, float] = {}
        failed_at: float | None = None
        while len(out.reports) + len(out.died) < n:
            failed = False
            try:  # every report waiting, before any exit is judged (a busy launcher may
                site, rep = self.queue.get(timeout=0.2)  # look only every few seconds)
                while True:
                    out.reports[site] = rep
                    failed |= is_failure(rep)
                    site, rep = self.queue.get_nowait()
            except queue_mod.Empty:
                pass
            now = time.monotonic()
            for s, p in enumerate(self.procs):
                if s in out.reports or s in out.died or p.exitcode is None:
                    continue
                if now - exited.setdefault(s, now) > report_grace:
                    out.died[s] = p.exitcode
                    failed = True
            if failed and failed_at is None:
                failed_at = now
                if on_failure is not None:
                    on_failure()
            why = ("lifetime" if now >= deadline else
                   "failure" if failed_at is not None and now >= failed_at + after_failure else None)
            if why is not None:
                for s in range(n):
                    if s not in out.reports and s not in out.died:
                        out.given_up[s] = why
                break
        return out

    def stop(self, wait: float = REPORT_GRACE) -> None:
        """Give the processes ``wait`` s to end by themselves, kill what is still alive, join
        every process, close the queue."""
        end = time.monotonic() + wait
        for p in self.procs:
            if p.ident is not None:
                p.join(max(0.0, end - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.kill()
            if p.ident is not None:
                p.join(10)
        self.queue.close()

    def __enter__(self) -> SiteProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
