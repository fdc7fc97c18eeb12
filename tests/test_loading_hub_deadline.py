"""The hub's deadline (MINIBERT_HUB_TIMEOUT, loading/hub.py), on a loopback hub (hub_server.py): a
hub that answers slowly is said as what it answered, not as silence; a file that is arriving is not
cut off; a hub that never answers is given up on in bounded time, in one line; the setting is
checked; the deadline bounds the small files, not a weights download (it may rightly take minutes).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from minibert import BertModel, BertTokenizer
from minibert.errors import HubDownloadError, ModelNotFoundError
from tiny_hub import TINY

# ----------------------------------------------------------------------------- 1. the hub answered, but late


@pytest.mark.parametrize("silenced", [False, True], ids=["", "hub-logs-silenced"])
@pytest.mark.parametrize("status", [429, 503])
def test_the_deadline_says_what_the_hub_answered_not_that_it_did_not_answer(hub, monkeypatch, status, silenced):
    """The hub answers config.json at once with HTTP 429 Retry-After: 30 (rate limiting, as the hub
    does to anonymous clients), or 503: huggingface_hub waits and asks again, and the deadline said
    "the hub did not answer", and to go offline. It says what the hub answered, and for a 429 what
    to do (wait, or pass a token)."""
    import logging

    printed = []  # what huggingface_hub's logger passes on to its handlers
    catcher = logging.Handler()
    catcher.emit = printed.append
    logging.getLogger("huggingface_hub").addHandler(catcher)
    # ERROR: as the minibert command silences it (and a user may), the warnings still read, not printed;
    # else huggingface_hub's own WARNING (set here: a command run in this process before leaves ERROR)
    level_before = logging.getLogger("huggingface_hub").level
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR if silenced else logging.WARNING)
    done_waiting = threading.Event()
    monkeypatch.setattr("huggingface_hub.utils._http.time.sleep", lambda seconds: done_waiting.wait(seconds))
    monkeypatch.setenv("MINIBERT_HUB_TIMEOUT", "1")
    hub.fail("org/tiny", "config.json", status=status, retry_after=30 if status == 429 else None)
    started = time.monotonic()
    try:
        with pytest.raises(HubDownloadError) as raised:
            BertModel.from_pretrained("org/tiny", token=False)
    finally:  # the resolving thread left behind ends now, with the hub still up: were it to meet the hub
        hub.failures.clear()  # gone, huggingface_hub would reset its shared sessions, cutting another
        done_waiting.set()  # test's download ("Bad file descriptor")
        for thread in [thread for thread in threading.enumerate() if thread.name == "minibert-hub"]:
            thread.join(timeout=20)
        logging.getLogger("huggingface_hub").removeHandler(catcher)
        logging.getLogger("huggingface_hub").setLevel(level_before)
    message = str(raised.value)
    assert bool([r for r in printed if r.levelno == logging.WARNING]) != silenced, printed
    assert time.monotonic() - started < 10
    assert message.startswith(f"org/tiny: could not download config.json within 1 s (the limit is "
                              f"MINIBERT_HUB_TIMEOUT): the hub answered HTTP {status}"), message  # fmt: skip
    assert "did not answer" not in message and "HF_HUB_OFFLINE" not in message, message
    if status == 429:
        assert "huggingface_hub was waiting 31 s" in message and "pass a token (token=..." in message, message


def test_the_deadline_does_not_cut_off_a_file_that_is_arriving(hub, monkeypatch):
    """vocab.txt answered at once, its bytes arriving over 7.5 s (a slow link; a multilingual vocabulary
    is megabytes): the deadline of 3 s said "the hub did not answer". It bounds the wait for an
    answer only: the file loads. (3 s, not less: the answer itself must come within the deadline on
    a machine busy with other tests.)"""
    monkeypatch.setenv("MINIBERT_HUB_TIMEOUT", "3")
    hub.fail("org/tiny", "vocab.txt", method="GET", slow=7.5)
    started = time.monotonic()
    tokenizer = BertTokenizer.from_pretrained("org/tiny")
    assert time.monotonic() - started > 6.5  # (it did arrive slowly, past the deadline)
    assert tokenizer.vocab == BertTokenizer.from_pretrained(TINY).vocab


# ----------------------------------------------------------------------------- 2. a hub that never answers


@pytest.fixture
def silent_hub():
    """A host that accepts connections and never answers."""
    from hub_server import SilentHub

    with SilentHub() as hub:
        yield hub.url


def test_a_hub_that_never_answers_is_given_up_on_in_bounded_time(silent_hub, tmp_path):

    env = {**os.environ, "HF_ENDPOINT": silent_hub, "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf"),
           "MINIBERT_HUB_TIMEOUT": "1"}  # fmt: skip
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "minibert", "embed", "hello", "--model", "someone/some-bert"],
                            capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    took = time.monotonic() - started
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "did not answer within 1 s" in lines[0] and "HF_HUB_OFFLINE=1" in lines[0], lines[0]
    assert took < 20, f"took {took:.1f} s"


def test_the_hub_timeout_setting_is_checked(monkeypatch):
    from minibert.loading.hub import hub_timeout

    monkeypatch.setenv("MINIBERT_HUB_TIMEOUT", "-5")
    with pytest.raises(ValueError, match="MINIBERT_HUB_TIMEOUT"):
        hub_timeout()
    monkeypatch.setenv("MINIBERT_HUB_TIMEOUT", "2.5")
    assert hub_timeout() == 2.5
    monkeypatch.delenv("MINIBERT_HUB_TIMEOUT")
    assert hub_timeout() == 30.0


def test_the_deadline_bounds_small_files_not_a_weights_download(monkeypatch, tmp_path):
    """A hub that takes longer than the limit to give config.json is given up on; a weights file
    whose download takes as long is not cut off (it may rightly take minutes)."""
    import huggingface_hub

    from minibert.loading import hub

    def slow_download(repo_id, filename, **options):
        time.sleep(1.0)
        return str(tmp_path / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", slow_download)
    monkeypatch.setattr(hub, "_unreachable", lambda endpoint: None)  # a hub that takes connections, then is slow
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("MINIBERT_HUB_TIMEOUT", "0.3")
    with pytest.raises(ModelNotFoundError, match="did not answer within 0.3 s"):
        hub.resolve_file("some-org/model", "config.json")
    for weights in ("model.safetensors", "pytorch_model.bin"):
        assert hub.resolve_file("some-org/model", weights) == tmp_path / weights
