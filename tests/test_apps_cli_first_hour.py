"""What a new user meets in the first hour, where it used to mislead: errors that say what is true."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once the socket is closed


def test_an_unreachable_hub_is_said_not_a_tokenizer_without_files(tmp_path):
    """A model not in the cache, a hub that refuses connections: the error says the hub could not be
    reached — before, an optional file's failed download counted as "absent", and the tokenizer said
    the repository "has neither vocab.txt nor tokenizer.json"."""
    env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}", "HF_HOME": str(tmp_path),
           "HF_HUB_DISABLE_TELEMETRY": "1", "MINIBERT_HUB_TIMEOUT": "10"}  # fmt: skip
    env.pop("HF_HUB_OFFLINE", None)
    for command in (["tokenize", "hello", "--model", "someone/some-bert"],
                    ["embed", "hello", "--model", "someone/some-bert"]):  # fmt: skip
        result = subprocess.run([sys.executable, "-m", "minibert", *command], capture_output=True, text=True,
                                env=env, timeout=120)  # fmt: skip
        assert result.returncode == 1, result.stderr
        assert "neither vocab.txt nor tokenizer.json" not in result.stderr
        assert re.search(r"could not be reached|cannot be reached|did not answer|could not download", result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


RECORDS = {"no-exist-bert": ".no_exist", "trees-bert": "trees", "unrecorded-bert": None}

# One `minibert tokenize` per cached model, in this child: cli.main, its stdout and stderr captured
# (helpers.run_minibert), the three results printed as JSON.
TOKENIZE_EACH = """import json, sys
from helpers import run_minibert
results = {name: vars(run_minibert("tokenize", "hello", "--model", "someone/" + name)) for name in sys.argv[1:]}
print(json.dumps(results))
"""


def _cache_without_optional_files(hub, name: str, record: str | None, minilm_dir) -> None:
    """someone/NAME in the hub cache ``hub``: config.json, vocab.txt and model.safetensors only, and
    the absence of the rest recorded as ``record`` says (``.no_exist`` markers, ``trees``, or nothing)."""
    commit = "0" * 40
    folder = hub / f"models--someone--{name}"
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for file in ("config.json", "vocab.txt", "model.safetensors"):
        (snapshot / file).symlink_to(minilm_dir / file)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    if record == ".no_exist":
        for file in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"):
            (folder / ".no_exist" / commit).mkdir(parents=True, exist_ok=True)
            (folder / ".no_exist" / commit / file).touch()
    elif record == "trees":
        files = {file: {"size": 1, "blob_id": "0"} for file in ("config.json", "vocab.txt", "model.safetensors")}
        (folder / "trees").mkdir()
        (folder / "trees" / f"{commit}.json").write_text(json.dumps({"format_version": 1, "files": files}))


@pytest.mark.parametrize("offline", [True, False])
def test_a_cached_model_without_an_optional_file_still_loads(tmp_path, minilm_dir, offline):
    """The other side: a model in the cache whose optional files (here tokenizer.json,
    tokenizer_config.json and the added-token files) are absent loads from the cache,
    online-but-unreachable as offline, when the cache records their absence: huggingface_hub's
    .no_exist markers (left by the hub's 404) or the file list `hf download` keeps
    (trees/COMMIT.json). With no record, nobody asked the hub: whether the repository has them is
    unknown, and the error says so (a cased model's tokenizer_config.json taken as absent would
    lowercase every text). The three caches are three models of one cache, each tokenized by the
    command in one child process per setting: HF_HUB_OFFLINE and the cache's place are read when
    huggingface_hub is imported, so the child is what sets them (one child, not three: each
    imports torch)."""
    from helpers import child_environment

    for name, record in RECORDS.items():
        _cache_without_optional_files(tmp_path / "hub", name, record, minilm_dir)
    env = child_environment(str(Path(__file__).parent), HF_HOME=str(tmp_path), HF_HUB_CACHE=str(tmp_path / "hub"),
                            HF_ENDPOINT=f"http://127.0.0.1:{_closed_port()}")  # fmt: skip
    env.pop("HF_HUB_OFFLINE", None)
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    child = subprocess.run([sys.executable, "-c", TOKENIZE_EACH, *RECORDS], capture_output=True, text=True, env=env,
                           timeout=120)  # fmt: skip
    assert child.returncode == 0, child.stderr
    results = json.loads(child.stdout.splitlines()[-1])
    for name, record in RECORDS.items():
        result = results[name]
        if record is None:
            assert result["returncode"] == 1, result
            assert re.search(r"without \S+\.json, and .*is unknown", result["stderr"]), result
        else:
            assert result["returncode"] == 0, result
            assert "hello" in result["stdout"], result


@pytest.mark.parametrize("name", ["./missing-dir", "uncased_L-12_H-768_A-12", "some/where/deep", "{tmp}/absent"])
def test_convert_of_a_missing_directory_says_so(name, tmp_path):
    from helpers import run_minibert as run

    result = run("convert", name.format(tmp=tmp_path), str(tmp_path / "out"))
    assert result.returncode == 1
    assert "no such directory" in result.stderr and "hf download" not in result.stderr, result.stderr


def _actions(parser, path=()):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, (*path, name))
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield path, action


def test_every_flag_and_positional_has_help():
    from minibert.apps.cli import build_parser

    missing = [f"{' '.join(path)} {action.dest}" for path, action in _actions(build_parser())
               if not action.help]  # fmt: skip
    assert not missing, missing


def test_embed_on_a_terminal_prints_a_summary_and_json_when_asked(minilm_dir, monkeypatch):
    import io

    from helpers import run_minibert as run

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    import contextlib

    from minibert.apps import cli

    for flags, readable in (([], True), (["--json"], False)):
        out = Terminal()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            assert cli.main(["embed", "a text", "another", "--model", str(minilm_dir), *flags]) == 0
        text = out.getvalue()
        if readable:
            assert text.startswith("[0] a text\n    384 dimensions, norm 1.0000: [") and "[1] another" in text
        else:
            assert text.splitlines()[0].startswith('{"text": "a text", "embedding": [')
    piped = run("embed", "a text", "--model", str(minilm_dir))  # not a terminal: JSON lines
    assert piped.stdout.startswith('{"text": "a text"')
