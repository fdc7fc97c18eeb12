"""`minibert serve` and the signals that end a run (docs/cli.md, docs/serving.md *Lifecycle*):
SIGTERM and SIGINT drain the requests and exit 0, at whatever moment of the start they arrive;
every other (SIGHUP, SIGQUIT, SIGUSR1/2, SIGALRM) stops the server the same way, with one line and
exit 128 + N. A SIGTERM sent as "serving on" was written used to be lost (the server ran on until
SIGKILL); a SIGHUP wrote a traceback and the server kept serving. Each test waits for a condition
(a line of the log, the handler in /proc), never for a fixed time."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_apps_serve import _free_port

from helpers import signals_as_from_a_terminal

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


def _start(model_dir, *options: str, host: str = "127.0.0.1") -> subprocess.Popen:
    command = [sys.executable, "-m", "minibert", "serve", "--model", str(model_dir), "--host", host,
               "--port", str(_free_port()), *options]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=signals_as_from_a_terminal)  # (CI's background job ignores SIGINT, SIGQUIT)


def _read_until(process: subprocess.Popen, words: str) -> str:
    """The log up to and including the first line holding ``words``."""
    lines = []
    while True:
        line = process.stderr.readline()
        assert line, f"the server exited before {words!r}: {''.join(lines)}"
        lines.append(line)
        if words in line:
            return "".join(lines)


def _catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for the signal (Linux: SigCgt in /proc/PID/status)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught >> (signum - 1) & 1)


def _wait_for(moment: str, process: subprocess.Popen) -> str:
    """Run the server to ``moment``; the log so far."""
    if moment == "at once":
        return ""
    if moment == "handler in place":  # the command's handler, before the server exists
        if not Path(f"/proc/{process.pid}/status").exists():
            pytest.skip("needs /proc")
        deadline = time.monotonic() + 60
        while not _catches(process.pid, signal.SIGTERM):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.001)
        return ""
    return _read_until(process, {"serving on": "serving on http://", "ready": "; ready"}[moment])


def _stopped(process: subprocess.Popen, signum: int, before: str) -> tuple[int, str]:
    process.send_signal(signum)
    try:
        _, rest = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        _, rest = process.communicate()
        raise AssertionError(f"still running 120 s after {signal.Signals(signum).name}: {before + rest}") from None
    return process.returncode, before + rest


@pytest.mark.parametrize("moment", ["at once", "handler in place", "serving on", "serving on", "ready"])
def test_a_sigterm_at_any_moment_of_the_start_stops_the_server(minilm_dir, moment):
    process = _start(minilm_dir)
    returncode, log = _stopped(process, signal.SIGTERM, _wait_for(moment, process))
    # (at once: perhaps before Python runs minibert, where the signal's default action ends it)
    assert returncode == 0 or (moment == "at once" and returncode == -signal.SIGTERM), log
    assert "Traceback" not in log and "error" not in log, log


@pytest.mark.parametrize("name, moment", [("SIGHUP", "ready"), ("SIGQUIT", "ready"), ("SIGUSR1", "ready"),
                                          ("SIGUSR2", "ready"), ("SIGALRM", "ready"), ("SIGHUP", "serving on"),
                                          ("SIGHUP", "handler in place"), ("SIGINT", "ready")])  # fmt: skip
def test_every_signal_that_ends_a_run_stops_the_server_with_one_line(minilm_dir, name, moment):
    signum = getattr(signal, name)
    process = _start(minilm_dir)
    returncode, log = _stopped(process, signum, _wait_for(moment, process))
    assert "Traceback" not in log, log
    if signum == signal.SIGINT:  # Ctrl-C: a server's usual stop, as SIGTERM
        assert returncode == 0, log
        return
    assert returncode == 128 + signum, log
    assert log.splitlines()[-1] == f"minibert: stopped by {name}; the server stopped as on SIGTERM", log


def test_an_ipv6_address_is_written_in_brackets(minilm_dir):
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    process = _start(minilm_dir, host="::1")
    line = _read_until(process, "serving on").splitlines()[-1]
    returncode, log = _stopped(process, signal.SIGTERM, line)
    assert line.startswith("minibert: serving on http://[::1]:"), line
    assert returncode == 0, log
