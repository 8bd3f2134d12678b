"""A site's training process killed mid-run: the others stop within the driver's timeout with an
error naming it, and every process ends."""

from __future__ import annotations

import multiprocessing
import time

import pytest

pytest.importorskip("torch", reason="the torch extra (make test installs it)")

from wanreduce.emulator.local_network import LocalNetwork  # noqa: E402
from wanreduce.planner import schedules as S  # noqa: E402
from wanreduce.planner.group_table import group_table  # noqa: E402
from wanreduce.train.digits import load_digits_split  # noqa: E402
from wanreduce.train.launcher import TrainingFailed, run_sites  # noqa: E402
from wanreduce.train.site_worker import RunSpec  # noqa: E402

# the driver's and gloo's timeout in this run: the per-round barrier waits for the other sites'
# local steps, which on a machine at load 15+ can take over 2 s (a survivor then timed out before
# site 1 was killed, and the error named no dead site); 8 s is several rounds' worth at that load
TIMEOUT = 8.0


def test_killed_site_stops_the_others_with_an_error_naming_it():
    table = group_table(S.all_to_all(3))
    spec = RunSpec(mode="average", table=table, steps=10_000, timeout=TIMEOUT, kill=(1, 1))
    with LocalNetwork(3) as net:
        net.configure(table, jobs=[0, 1])
        t = time.monotonic()
        with pytest.raises(TrainingFailed) as err:
            run_sites(spec, net, load_digits_split(0))
        elapsed = time.monotonic() - t
    msg = str(err.value)
    assert "site 1's process died (killed by signal 9)" in msg
    # the survivors stopped with their own errors (which gloo call notices first depends on
    # where each survivor was when site 1 died: the barrier before the next step names rank 1,
    # a receive already posted times out after the driver's timeout; on a busy machine either)
    assert "site 0 stopped: RuntimeError: " in msg
    assert "site 2 stopped: " in msg
    assert "\n" not in msg
    assert "killed by the launcher" not in msg  # the survivors stopped on their own
    assert multiprocessing.active_children() == []
    print(f"{elapsed:.1f} s: {msg}")


LAUNCHER = """
import os, signal, sys, threading, time
import multiprocessing as mp
from wanreduce.planner import schedules as S
from wanreduce.planner.group_table import group_table
from wanreduce.train.digits import load_digits_split
from wanreduce.train.launcher import run_sites
from wanreduce.emulator.local_network import LocalNetwork
from wanreduce.train.site_worker import RunSpec

def die_once_training():
    while len(mp.active_children()) < 2:
        time.sleep(0.1)
    time.sleep(1)
    print(" ".join(str(p.pid) for p in mp.active_children()), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

if __name__ == "__main__":
    table = group_table(S.all_to_all(2))
    with LocalNetwork(2) as net:
        net.configure(table, jobs=[0, 1])
        threading.Thread(target=die_once_training, daemon=True).start()
        run_sites(RunSpec(table=table, steps=10**6, timeout=60), net, load_digits_split(0))
"""


def test_sites_end_when_their_launcher_dies(tmp_path):
    """The launcher SIGKILLed (no clean-up runs): its site processes end by themselves."""
    import os
    import subprocess
    import sys

    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    out = tmp_path / "pids.txt"
    with open(out, "w") as f:  # a file, not a pipe: orphans holding a pipe would block the test
        code = subprocess.run([sys.executable, str(script)], stdout=f).returncode
    assert code == -9
    pids = [int(p) for p in out.read_text().split()]
    assert pids

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        with open(f"/proc/{pid}/stat") as f:  # a zombie has ended
            return f.read().split(")")[1].split()[0] != "Z"

    # a site notices within 0.5 s; the bound waited for is generous for a loaded machine
    deadline = time.monotonic() + 60
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in pids)
