"""A loopback HTTP server that serves model directories the way the Hugging Face hub does, so the
real download path (huggingface_hub → cache → offline reuse) runs in tests without internet.

It answers ``HEAD``/``GET /{org}/{name}/resolve/{revision}/{filename}`` with the headers
huggingface_hub reads (``X-Repo-Commit``, ``ETag``, ``Content-Length``), 404 with the hub's
``X-Error-Code`` for unknown repositories and files (a file's 404 carries ``X-Repo-Commit``, as the
hub's does: huggingface_hub then records the absence in the cache's ``.no_exist``), and counts
requests per file.

``fail(repo, filename, ...)`` makes it fail as a real hub can: an HTTP status with the hub's error
code (500, or 403 ``GatedRepo``; a 429 with the ``Retry-After`` it asks to wait), a connection closed
before any answer, a body cut short, or a body that arrives slowly (a slow link).
``gate(repo, token)`` makes a repository gated as the hub's is: 401 ``GatedRepo`` without a token,
403 with another one, the files with that one.
``push(repo, folder, after=...)`` makes a folder the repository's next commit, at once or right after
a file is served (a push landing in the middle of a load): a branch then serves the new commit, and
an older commit stays served when asked by its hash. ``SilentHub`` is a host that takes connections
and never answers, counting them.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote


class HubServer:
    def __init__(self, repos: dict[str, Path]):
        self.repos = {repo: Path(path) for repo, path in repos.items()}
        self.requests: Counter = Counter()
        self.authorizations: dict[str, list[str]] = {}  # file → the Authorization headers it was asked with
        self.commit = hashlib.sha1(b"minibert-test-commit").hexdigest()  # each repository's first commit
        self.heads: dict[str, str] = {}  # repo → its commit after a push
        self.older: dict[str, dict[str, Path]] = {}  # repo → {commit: folder} of the commits pushed over
        self.pushes: dict[tuple[str, str], tuple[str, Path]] = {}  # (repo, filename) → the push its GET sets off
        self.asked: list[tuple[str, str, str, str]] = []  # (method, repo, revision, filename), in order
        self.failures: dict[tuple[str, str, str], tuple] = {}  # (method, repo, filename) → how (see fail)
        self.gates: dict[str, str] = {}  # repo → the token it is served to (see gate)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_HEAD(self):
                self._serve(body=False)

            def do_GET(self):
                self._serve(body=True)

            def _serve(self, body: bool):
                parts = unquote(self.path.split("?")[0]).strip("/").split("/")
                if len(parts) < 5 or parts[2] != "resolve":
                    return self._error(404, "RepoNotFound")
                repo, revision, filename = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
                server.requests[(self.command, repo, filename)] += 1
                server.asked.append((self.command, repo, revision, filename))
                if self.headers.get("Authorization"):
                    server.authorizations.setdefault(filename, []).append(self.headers["Authorization"])
                failure = server.failure(self.command, repo, filename)
                if failure and failure[0] == "close":
                    self.close_connection = True
                    return
                if failure and failure[0] == "status":
                    return self._error(*failure[1:4], retry_after=failure[4])
                if repo in server.gates and self.headers.get("Authorization") != f"Bearer {server.gates[repo]}":
                    status = 403 if self.headers.get("Authorization") else 401
                    return self._error(status, "GatedRepo", f"Access to model {repo} is restricted.")
                if repo not in server.repos:
                    return self._error(404, "RepoNotFound")
                folder, commit = server.at(repo, revision)
                path = folder / filename
                if not path.is_file():
                    return self._error(404, "EntryNotFound", commit=commit)
                data = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
                self.send_header("X-Repo-Commit", commit)
                self.end_headers()
                if body and failure and failure[0] == "truncate":  # the promised length, then the connection ends
                    self.wfile.write(data[: failure[1]])
                    self.close_connection = True
                elif body and failure and failure[0] == "slow":  # in 20 parts over failure[1] seconds
                    step = max(1, -(-len(data) // 20))
                    for start in range(0, len(data), step):
                        self.wfile.write(data[start : start + step])
                        self.wfile.flush()
                        threading.Event().wait(failure[1] / 20)  # (not time.sleep: in_this_process makes it return)
                elif body:
                    self.wfile.write(data)
                    if (repo, filename) in server.pushes:
                        server.moved(repo, *server.pushes.pop((repo, filename)))

            def _error(self, status: int, code: str | None, message: str | None = None, commit: str | None = None,
                       retry_after: int | None = None):  # fmt: skip
                self.send_response(status)
                if retry_after is not None:
                    self.send_header("Retry-After", str(retry_after))
                if code:
                    self.send_header("X-Error-Code", code)
                    self.send_header("X-Error-Message", message or code)
                if commit:
                    self.send_header("X-Repo-Commit", commit)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def fail(self, repo: str, filename: str = "*", *, method: str = "*", status: int | None = None,
             code: str | None = None, message: str | None = None, truncate: int | None = None,
             close: bool = False, retry_after: int | None = None, slow: float | None = None) -> None:  # fmt: skip
        """From now on, answer ``method`` (HEAD, GET or "*") for ``filename`` ("*": every file) of
        ``repo`` with ``status`` (and the hub's ``X-Error-Code``/``X-Error-Message``; ``Retry-After:
        retry_after``, as the hub's 429 says how long to wait), with a body cut after ``truncate``
        bytes, with the whole body sent in 20 parts over ``slow`` seconds, or by closing the connection
        without an answer (``close``)."""
        how = (("status", status, code, message, retry_after) if status else ("truncate", truncate) if truncate
               else ("slow", slow) if slow else ("close",))  # fmt: skip
        assert status or truncate or slow or close, "say how to fail"
        self.failures[(method, repo, filename)] = how

    def gate(self, repo: str, token: str) -> None:
        """Serve ``repo`` only to ``token``, as the hub serves a gated repository to an account that
        accepted its terms: 401 ``GatedRepo`` to a request without a token, 403 to another token."""
        self.gates[repo] = token

    def push(self, repo: str, folder: Path, *, after: str | None = None) -> str:
        """Make ``folder`` the repository's new commit, which its branch serves from then on: at once,
        or right after the file ``after`` is next served (a push landing in the middle of a load).
        Returns the new commit's hash."""
        commit = hashlib.sha1(f"{repo} {folder}".encode()).hexdigest()
        if after is None:
            self.moved(repo, commit, Path(folder))
        else:
            self.pushes[(repo, after)] = (commit, Path(folder))
        return commit

    def moved(self, repo: str, commit: str, folder: Path) -> None:
        self.older.setdefault(repo, {})[self.heads.get(repo, self.commit)] = self.repos[repo]
        self.repos[repo], self.heads[repo] = folder, commit

    def at(self, repo: str, revision: str) -> tuple[Path, str]:
        """(folder, commit) a revision of ``repo`` names: an older commit by its hash, else the latest."""
        if revision in self.older.get(repo, {}):
            return self.older[repo][revision], revision
        return self.repos[repo], self.heads.get(repo, self.commit)

    def failure(self, method: str, repo: str, filename: str) -> tuple | None:
        for key in ((method, repo, filename), ("*", repo, filename), (method, repo, "*"), ("*", repo, "*")):
            if key in self.failures:
                return self.failures[key]
        return None

    def in_this_process(self, monkeypatch, cache: Path) -> HubServer:
        """Make this process's huggingface_hub ask this server, with its cache in ``cache``:
        huggingface_hub reads HF_HUB_OFFLINE and its cache folder when it is imported, so they are set
        on its ``constants``; its retries of a server error (about 23 s of waiting) are made without the waits."""
        from huggingface_hub import constants

        monkeypatch.setenv("HF_ENDPOINT", self.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True, raising=False)  # (before 0.32: no Xet)
        monkeypatch.setattr("huggingface_hub.utils._http.time.sleep", lambda seconds: None)  # retries, no waits
        return self

    def environment(self, hf_home: Path) -> dict[str, str]:
        """The environment of a process that asks this server as its hub, with its cache in ``hf_home``."""
        return dict(os.environ, HF_ENDPOINT=self.url, HF_HOME=str(hf_home), HF_HUB_OFFLINE="0", HF_HUB_DISABLE_XET="1")

    def __enter__(self) -> HubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class SilentHub:
    """A host that accepts connections and never answers (``url``; ``connections``: how many it took)."""

    def __init__(self):
        import socket

        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.server.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.accepted: list = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                self.accepted.append(self.server.accept()[0])
            except OSError:
                pass

    @property
    def connections(self) -> int:
        return len(self.accepted)

    def __enter__(self) -> SilentHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        for connection in self.accepted:
            connection.close()
        self.server.close()


if __name__ == "__main__":  # serve a directory by hand: python tests/hub_server.py org/name DIR
    import sys
    import time

    with HubServer({sys.argv[1]: Path(sys.argv[2])}) as hub:
        print(hub.url, flush=True)
        time.sleep(3600)
