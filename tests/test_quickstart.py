"""README's quick start, run exactly as written (shell block and expected output extracted from
README.md), with the venv of this interpreter and a free port instead of 22354."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
PORT = "22354"


def _quickstart_blocks() -> tuple[str, list[str]]:
    """(the ```sh block, the lines of the ``` expected-output block) of the quick start."""
    text = README.read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    script = next(body for lang, body in blocks if lang == "sh")
    expected = next(body for lang, body in blocks if lang == "")
    return script, expected.strip().splitlines()


def _free_port() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_readme_quickstart_runs_as_written(tmp_path):
    script, expected = _quickstart_blocks()
    assert PORT in script and ".venv/bin/" in script
    port = _free_port()
    venv_bin = str(Path(sys.executable).parent) + "/"
    run = script.replace(".venv/bin/", venv_bin).replace(PORT, port)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    # Bounded only against a hang: the clients' own timeout (10 s without an answer) ends them.
    p = subprocess.run(["bash", "-c", run], cwd=tmp_path, capture_output=True, text=True,
                       timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    got = p.stdout.strip().splitlines()
    want = [ln.replace(PORT, port) for ln in expected]
    assert got[0] == want[0], p.stdout  # the server's address comes first
    assert sorted(got[1:]) == sorted(want[1:]), p.stdout + p.stderr
