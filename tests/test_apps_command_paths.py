"""A command's data flows top-down, and docs/CONTRIBUTING.md draws the path it really takes.

Each command is run in this process under a profiler that notes every minibert module entered (the
first time) and every call that climbs: a function of a lower room calling one of a higher room
(rooms as tests/test_layering.py orders them). The modules above the core (apps/, tasks/,
embedding/) and the commands' file room (formats/line_files.py, formats/atomic_files.py), in the
order first entered, must be the list CONTRIBUTING.md gives for the command; the core beneath
(tokenizer, model, loading, the other formats) is not listed. The one climb allowed is a function
handed down and called back: ``map_in_streams(forward, batches)`` runs the caller's ``forward``.

Only the model's load is left out of the trace where a cache made it instant (the path is the
same either way).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path

import pytest
from test_layering import ROOMS, room

import minibert
from minibert.apps import cli
from tiny_hub import TINY

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = str(Path(minibert.__file__).parent) + "/"
LISTED_ROOMS = ("apps", "tasks", "embedding")
FILE_ROOM = {"formats.line_files", "formats.atomic_files"}
# The modules that call back a function handed down to them: map_in_streams(forward, batches) runs
# the caller's forward, in this thread or in its worker threads.
CALLBACKS = {"embedding.streams"}


def _module(frame) -> str | None:
    name = frame.f_code.co_filename
    if not name.startswith(PACKAGE):
        return None
    return name[len(PACKAGE) : -3].replace("/", ".").removesuffix(".__init__") or "__init__"


class Trace:
    """Modules entered (first time, in order) and calls that climb, while the block runs."""

    def __init__(self):
        self.entered: list[str] = []
        self.path: list[str] = []  # the entered modules CONTRIBUTING.md lists (see listed())
        self.climbs: list[str] = []

    def __enter__(self) -> Trace:
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(None)
        threading.setprofile(None)

    def _profile(self, frame, event, arg) -> None:
        if event != "call":
            return
        callee = _module(frame)
        if callee is None or _importing(frame):
            return
        caller_frame = frame.f_back
        while caller_frame is not None and _module(caller_frame) is None:
            caller_frame = caller_frame.f_back
        caller = _module(caller_frame) if caller_frame is not None else None
        if callee not in self.entered:
            self.entered.append(callee)
        from_apps = room(caller or "") == "apps" or caller in FILE_ROOM
        listed = callee.split(".")[0] in LISTED_ROOMS or (callee in FILE_ROOM and from_apps)
        if listed and callee not in self.path:
            self.path.append(callee)
        if caller is None:
            return
        if ROOMS.index(room(callee)) > ROOMS.index(room(caller)):
            handed_down = any(_module(outer) in CALLBACKS for outer in _stack(caller_frame))
            if not handed_down:
                self.climbs.append(f"{caller}.{caller_frame.f_code.co_name} -> {callee}.{frame.f_code.co_name}")

    def listed(self) -> list[str]:
        """The entered modules CONTRIBUTING.md lists: above the core, and the file room as the apps
        use it (the core writes its own caches through atomic_files too)."""
        return self.path


def _importing(frame) -> bool:
    """Whether the frame runs as part of an import (a module's body, a class body in it): the
    code that defines things, not the command's data flow."""
    return any(outer.f_code.co_name == "<module>" and _module(outer) for outer in _stack(frame))


def _stack(frame):
    while frame is not None:
        yield frame
        frame = frame.f_back


def documented_path(command: str) -> list[str]:
    """The numbered list under '`minibert COMMAND ...`' in CONTRIBUTING.md, as module names."""
    text = (ROOT / "docs" / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = re.search(rf"^`minibert {command}\b[^\n]*\n((?:\d+\. [^\n]*\n)+)", text, flags=re.M)
    assert section, f"docs/CONTRIBUTING.md draws no path for minibert {command}"
    files = re.findall(r"^\d+\. `([\w/]+)\.py`", section.group(1), flags=re.M)
    return [name.replace("/", ".") for name in files]


def _traced_command(argv: list[str]) -> Trace:
    from helpers import run_minibert

    assert run_minibert(*argv).returncode == 0  # once before: imports and caches, so the trace is the path
    args = cli.build_parser().parse_args(argv)
    with Trace() as trace:
        args.run(args)
    return trace


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "texts.txt").write_text("A man is eating food.\nA man eats.\n", encoding="utf-8")
    return folder


def test_the_path_of_embed(inputs, capsys):
    argv = ["embed", "--model", str(TINY), "--input", str(inputs / "texts.txt"), "--output", str(inputs / "v.npy")]
    trace = _traced_command(argv)
    assert ["apps.cli", *trace.listed()] == documented_path("embed"), " ".join(trace.listed())
    assert not trace.climbs, trace.climbs


def test_the_path_of_classify(make, inputs, capsys):
    model = make("BertForSequenceClassification", scale=5.0, num_labels=3)
    argv = [
        "classify",
        "--model",
        str(model),
        "--input",
        str(inputs / "texts.txt"),
        "--output",
        str(inputs / "c.jsonl"),
    ]
    trace = _traced_command(argv)
    assert ["apps.cli", *trace.listed()] == documented_path("classify"), " ".join(trace.listed())
    assert not trace.climbs, trace.climbs


def test_the_path_of_a_serve_request():
    """From the parsed flags to the settings and the app, then one /v1/embeddings request."""
    starlette = pytest.importorskip("starlette.testclient")
    from minibert.apps.serve.app import build_app
    from minibert.apps.serve.settings import settings_from

    args = cli.build_parser().parse_args(["serve", "--model", str(TINY)])
    with Trace() as trace:
        app = build_app(settings_from(args))
        with starlette.TestClient(app) as client:
            deadline = time.monotonic() + 120
            while client.get("/health").status_code != 200:
                assert time.monotonic() < deadline, "the model did not load"
                time.sleep(0.05)
            request = {"model": "tiny_hub", "input": ["a text", "another"]}
            response = client.post("/v1/embeddings", content=json.dumps(request))
            assert response.status_code == 200, response.text
    assert ["apps.cli", "apps.commands", *trace.listed()] == documented_path("serve"), " ".join(trace.listed())
    assert not trace.climbs, trace.climbs


def test_gemm_reaches_the_model_as_an_argument(monkeypatch):
    """--gemm is passed to from_pretrained, not put in the environment for speed/gemm.py to find."""
    from minibert.apps.commands import load_embedder
    from minibert.speed import gemm

    monkeypatch.delenv("MINIBERT_GEMM", raising=False)
    seen = []
    original = gemm.choose
    monkeypatch.setattr(gemm, "choose", lambda model, gemm=None: seen.append(gemm) or original(model, gemm))
    args = cli.build_parser().parse_args(["--gemm", "mkl", "embed", "x", "--model", str(TINY)])
    embedder = load_embedder(args)
    assert seen == ["mkl"] and embedder.model.gemm_backend == "mkl"
    assert "MINIBERT_GEMM" not in __import__("os").environ


def test_the_trace_sees_a_climb():
    """The control: a file-room function calling an apps function is reported."""
    from minibert.formats.line_files import JsonLines

    with Trace() as trace:
        JsonLines(cli._negative_values_joined).write({"text": "a"})  # formats calls apps back
    assert trace.climbs == ["formats.line_files.write -> apps.cli._negative_values_joined"]
