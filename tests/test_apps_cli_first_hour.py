"""What a new user meets in the first hour, where it used to mislead: errors that say what is true."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

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


@pytest.mark.parametrize("record", [".no_exist", "trees", None])
@pytest.mark.parametrize("offline", [True, False])
def test_a_cached_model_without_an_optional_file_still_loads(tmp_path, minilm_dir, offline, record):
    """The other side: a model in the cache whose optional files (here tokenizer.json,
    tokenizer_config.json and the added-token files) are absent loads from the cache,
    online-but-unreachable as offline, when the cache records their absence: huggingface_hub's
    .no_exist markers (left by the hub's 404) or the file list `hf download` keeps
    (trees/COMMIT.json). With no record, nobody asked the hub: whether the repository has them is
    unknown, and the error says so (a cased model's tokenizer_config.json taken as absent would
    lowercase every text)."""
    commit = "0" * 40
    folder = tmp_path / "hub" / "models--someone--cached-bert"
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name in ("config.json", "vocab.txt", "model.safetensors"):
        (snapshot / name).symlink_to(minilm_dir / name)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    if record == ".no_exist":
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"):
            (folder / ".no_exist" / commit).mkdir(parents=True, exist_ok=True)
            (folder / ".no_exist" / commit / name).touch()
    elif record == "trees":
        files = {name: {"size": 1, "blob_id": "0"} for name in ("config.json", "vocab.txt", "model.safetensors")}
        (folder / "trees").mkdir()
        (folder / "trees" / f"{commit}.json").write_text(json.dumps({"format_version": 1, "files": files}))
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_HUB_CACHE": str(tmp_path / "hub"),
           "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}  # fmt: skip
    env.pop("HF_HUB_OFFLINE", None)
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    result = subprocess.run([sys.executable, "-m", "minibert", "tokenize", "hello", "--model", "someone/cached-bert"],
                            capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    if record is None:
        assert result.returncode == 1, result.stderr
        assert re.search(r"without \S+\.json, and .*is unknown", result.stderr), result.stderr
        return
    assert result.returncode == 0, result.stderr
    assert "hello" in result.stdout


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
