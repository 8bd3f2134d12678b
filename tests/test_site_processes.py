"""The one site-process launcher (emulator/site_processes.py): reports, deaths, bounds."""

import multiprocessing
import os
import time

from wanreduce.emulator.site_processes import SiteProcesses


def _report_and_exit(site, queue):
    queue.put((site, f"report {site}"))


def _die_without_report(site, queue):
    if site == 1:
        os._exit(7)
    queue.put((site, "ok"))


def _hang(site, queue):
    time.sleep(600)


def test_reports_waiting_in_the_queue_are_taken_before_any_exit_is_judged():
    """Every process exited before the launcher looked (a busy launcher): none is taken for
    dead while its report waits in the queue (one report was read per look before the fix)."""
    ctx = multiprocessing.get_context("fork")
    with SiteProcesses(ctx, 6, _report_and_exit, lambda s: (s,)) as sites:
        sites.start()
        for p in sites.procs:
            p.join()
        got = sites.collect(report_grace=0.0)
    assert got.died == {} and got.given_up == {}
    assert got.reports == {s: f"report {s}" for s in range(6)}


def test_a_process_that_exits_without_its_report_died_and_the_hook_runs_once():
    ctx = multiprocessing.get_context("fork")
    calls = []
    with SiteProcesses(ctx, 3, _die_without_report, lambda s: (s,)) as sites:
        sites.start()
        got = sites.collect(on_failure=lambda: calls.append(1))
    assert got.died == {1: 7} and set(got.reports) == {0, 2} and calls == [1]


def test_sites_still_running_are_given_up_at_the_lifetime_and_killed():
    ctx = multiprocessing.get_context("fork")
    t = time.monotonic()
    with SiteProcesses(ctx, 2, _hang, lambda s: (s,)) as sites:
        sites.start()
        got = sites.collect(lifetime=1.0)
    assert got.given_up == {0: "lifetime", 1: "lifetime"}
    assert time.monotonic() - t < 60
    assert all(not p.is_alive() for p in sites.procs)
