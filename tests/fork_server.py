"""Python examples, each in a fresh process forked from one that has already imported torch.

``python -c EXAMPLE`` spends ~3 s importing torch before the example's first line does anything
(2-core Zen 3); a page of six examples paid it six times. A ``ForkServer`` is one Python, started
with the examples' environment, that imports the third-party libraries minibert is built on (torch,
numpy, safetensors, huggingface_hub: what any ``from minibert import ...`` imports first, and
nothing of minibert's own, whose imports each example still makes itself) and then forks a child per
example. The child is what ``python -c`` would be: its own process, the example's working directory,
a fresh ``__main__`` module, ``sys.argv == ['-c']``, stdin from /dev/null, stdout and stderr to
files, an uncaught exception printed with its traceback and exit status 1, ``sys.exit``'s status as
python gives it, and at the end what an exit does that the example could see (non-daemon threads
waited for, atexit handlers run, output flushed), not the teardown of every module.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

SERVER = r"""
import atexit, gc, json, os, sys, threading, traceback, types
import torch, numpy, safetensors, huggingface_hub  # noqa: F401  (imported once, before the forks)


def leave(code):
    # What the interpreter's exit does that an example could see: wait for its non-daemon threads, run
    # its atexit handlers, flush its output. Then _exit: tearing down torch's modules object by object
    # would write to every page the fork shares with this process (~1 s each, copying them).
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


gc.freeze()  # the children's collections leave the shared imports alone (and their pages shared)
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid:
        print(pid, flush=True)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
        continue
    os.chdir(request["cwd"])
    os.environ.update(request["environ"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_TRUNC),
                            (2, request["stderr"], os.O_WRONLY | os.O_TRUNC)):
        os.dup2(os.open(path, flags), fd)
    sys.stdin = open(0, closefd=False)
    sys.argv = ["-c"]
    main = sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        exec(compile(request["source"], "<string>", "exec"), main.__dict__)
    except SystemExit as exit:  # as python does: None is 0, an int is the status, anything else is printed, 1
        if exit.code is None or isinstance(exit.code, int):
            leave(exit.code or 0)
        print(exit.code, file=sys.stderr)
        leave(1)
    except BaseException:
        traceback.print_exc()
        leave(1)
    leave(0)
"""


class ForkServer:
    def __init__(self, environment: dict[str, str]):
        self.process = subprocess.Popen([sys.executable, "-c", SERVER], env=environment, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)  # fmt: skip
        self.pending = b""

    def run(self, source: str, cwd: Path, timeout: float = 600, environ: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
        """``python -c source`` in ``cwd``, forked: its exit status, stdout and stderr. ``environ``:
        variables set in the child (over the server's environment) before the source runs."""
        with tempfile.TemporaryDirectory() as directory:
            out, err = Path(directory) / "stdout", Path(directory) / "stderr"
            out.touch()
            err.touch()
            request = {"source": source, "cwd": str(cwd), "stdout": str(out), "stderr": str(err),
                       "environ": environ or {}}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            pid = int(self._line(60))
            try:
                code = int(self._line(timeout))
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                code = int(self._line(60))
            return subprocess.CompletedProcess(["python", "-c", source], code, out.read_text(errors="replace"),
                                               err.read_text(errors="replace"))  # fmt: skip

    def _line(self, timeout: float) -> str:
        """The server's next line (read from the pipe unbuffered, so select sees what is not yet read)."""
        while b"\n" not in self.pending:
            if not select.select([self.process.stdout], [], [], timeout)[0]:
                raise TimeoutError(f"no answer from the fork server in {timeout} s")
            chunk = os.read(self.process.stdout.fileno(), 4096)
            assert chunk, f"the fork server exited ({self.process.wait()})"
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
