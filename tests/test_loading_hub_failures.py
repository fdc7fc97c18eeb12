"""The hub when it fails (loading/hub.py, loading/hub_failures.py), on a loopback hub (hub_server.py).

An optional file (a weights format further down the list, tokenizer_config.json, modules.json) is
absent only when the hub answered 404 for it, or the cache records that it did. Any other failure (a
server error, a dropped connection, offline with the file not in the cache) is an error that names
the repository, the file and what happened: skipping the file would load other weights, another
casing or another pooling without a word. A gated repository is said to be gated, a disabled one
disabled, refused credentials with the token's remedy.

The hub's download keywords are in test_loading_hub_keywords.py; one commit per load and a damaged
cached copy in test_loading_hub_commits.py; the deadline in test_loading_hub_deadline.py. The tests
run in this process, on tiny_hub.py's ``hub``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from hub_server import HubServer
from minibert import BertModel, BertTokenizer, Embedder
from minibert.errors import CheckpointError, HubDownloadError, ModelNotFoundError
from tiny_hub import TINY, gets, offline

# ----------------------------------------------------------------------------- 1. a failure is not an absence


def test_a_server_error_on_the_weights_is_not_taken_for_no_weights(hub, tmp_path):
    """A 500 on model.safetensors: the error names the file and the status; pytorch_model.bin (here
    holding other numbers) is not loaded in its place, and no "has no weights" is said."""
    both = shutil.copytree(TINY, tmp_path / "both")
    shutil.copy(TINY / "model.safetensors", both / "pytorch_model.bin")  # (never read: never fetched)
    hub.repos["org/both"] = both
    hub.fail("org/both", "model.safetensors", status=500)
    with pytest.raises(HubDownloadError) as raised:
        BertModel.from_pretrained("org/both")
    message = str(raised.value)
    assert "org/both: could not download model.safetensors: the hub answered HTTP 500" in message, message
    assert "no weights" not in message, message
    assert gets(hub, "pytorch_model.bin") == 0, hub.requests


def test_a_server_error_on_tokenizer_config_is_said_not_lowercased(hub, tmp_path):
    """A cased model's tokenizer_config.json answered with 503: an error, not a tokenizer that
    lowercases (Google's rule for a folder without a config)."""
    hub.fail("org/tiny", "tokenizer_config.json", status=503)
    with pytest.raises(HubDownloadError, match=r"could not download tokenizer_config.json: .*HTTP 503"):
        BertTokenizer.from_pretrained("org/tiny")


def test_a_server_error_on_the_recipe_is_said_not_plain_mean_pooling(hub):
    """A 500 on modules.json: an error, not an Embedder without the model's recipe (all-MiniLM's
    normalisation dropped, every vector of the wrong length)."""
    hub.fail("org/tiny", "modules.json", status=500)
    with pytest.raises(HubDownloadError, match=r"could not download modules.json: .*HTTP 500"):
        Embedder.from_pretrained("org/tiny")


def test_a_file_the_hub_says_is_absent_is_absent_online_and_offline(hub, monkeypatch):
    """The other side: a 404 (tiny_hub has no modules.json) is an absent optional file; the cache
    records it (.no_exist), so offline the same model loads, asking nothing."""
    Embedder.from_pretrained("org/tiny")
    asked = sum(hub.requests.values())
    offline(monkeypatch)
    Embedder.from_pretrained("org/tiny")
    assert sum(hub.requests.values()) == asked


def test_offline_a_file_the_cache_lacks_is_unknown_not_absent(hub, monkeypatch):
    """A cache holding config.json only (a first download cut short): offline, the weights are not
    "absent" (nobody asked the hub): the error says the cache lacks model.safetensors and that
    whether the repository has it is unknown."""
    from huggingface_hub import hf_hub_download

    hf_hub_download("org/tiny", "config.json", endpoint=hub.url)
    offline(monkeypatch)
    with pytest.raises(ModelNotFoundError) as raised:
        BertModel.from_pretrained("org/tiny")
    message = str(raised.value)
    assert "org/tiny is in the local Hugging Face cache without model.safetensors" in message, message
    assert "is unknown" in message and "HF_HUB_OFFLINE=1" in message and "no weights" not in message, message


# ----------------------------------------------------------------------------- 2. a dropped connection


@pytest.mark.parametrize(("method", "filename", "how"), [("GET", "model.safetensors", {"truncate": 100}),
                                                         ("HEAD", "config.json", {"close": True})])  # fmt: skip
def test_a_dropped_connection_is_a_download_error(hub, method, filename, how):
    """A body cut short, or a connection closed with no answer: huggingface_hub lets the HTTP
    library's error out (httpx2.RemoteProtocolError, not an OSError); minibert says what happened."""
    hub.fail("org/tiny", filename, method=method, **how)
    with pytest.raises(HubDownloadError) as raised:
        BertModel.from_pretrained("org/tiny")
    message = str(raised.value)
    assert f"could not download {filename}: the connection was closed before the transfer ended" in message, message


def test_the_command_line_says_a_dropped_connection_in_one_line(tmp_path):
    """The CLI prints minibert's error (exit 1), not "internal error"."""
    with HubServer({"org/tiny": TINY}) as server:
        server.fail("org/tiny", "model.safetensors", method="GET", truncate=100)
        result = subprocess.run([sys.executable, "-m", "minibert", "embed", "--model", "org/tiny", "hello"],
                                env=server.environment(tmp_path / "hf"), capture_output=True, text=True,
                                timeout=300)  # fmt: skip
    assert result.returncode == 1, result.stderr
    ours = [line for line in result.stderr.splitlines() if line.startswith("minibert:")]
    assert len(ours) == 1 and "internal error" not in ours[0], result.stderr
    assert "could not download model.safetensors: the connection was closed" in ours[0], ours


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("token", ["hf_expired", False])
def test_refused_credentials_are_said_with_the_token_s_remedy_not_try_again_later(hub, status, token):
    """A 401 or 403 on a file (a bad or expired token) was 'try again later', which cannot help:
    the remedy is the token, told apart by whether one was sent."""
    hub.fail("org/tiny", "model.safetensors", method="GET", status=status)
    with pytest.raises(HubDownloadError) as raised:
        BertModel.from_pretrained("org/tiny", token=token)
    message = str(raised.value)
    assert f"could not download model.safetensors: the hub answered HTTP {status}" in message, message
    assert "try again later" not in message, message
    remedy = "the token given was refused" if token else "the hub asks for a token: pass one"
    assert remedy in message and "HF_TOKEN" in message, message


# ----------------------------------------------------------------------------- 3. gated, private, absent


@pytest.mark.parametrize("token", ["hf_not_allowed", False])
def test_a_gated_repository_is_said_to_be_gated(hub, token):
    """403 GatedRepo: "a gated repository", where to accept its terms, and, when a token was sent,
    not "no token was given"."""
    hub.fail("org/tiny", status=403, code="GatedRepo", message="Access to model org/tiny is restricted.")
    with pytest.raises(ModelNotFoundError) as raised:
        BertModel.from_pretrained("org/tiny", token=token)
    message = str(raised.value)
    assert "org/tiny is a gated repository" in message and f"{hub.url}/org/tiny" in message, message
    assert "no such repository" not in message, message
    assert ("no token was given" in message) == (token is False), message
    if token:
        assert hub.authorizations["config.json"] == [f"Bearer {token}"]


def test_a_repository_not_found_with_a_token_does_not_say_no_token(hub):
    with pytest.raises(ModelNotFoundError) as raised:
        BertModel.from_pretrained("org/absent", token="hf_some_token")
    message = str(raised.value)
    assert "no such repository on the hub, or it is private and the token given has no access" in message, message
    with pytest.raises(ModelNotFoundError, match=r"no token was given"):
        BertModel.from_pretrained("org/absent", token=False)


# ----------------------------------------------------------------------------- 4. messages


def test_a_long_hub_text_is_cut_at_a_word_with_an_ellipsis():
    """huggingface_hub's text for a proxy's page (no X-Repo-Commit header) was cut at 300 characters in
    mid-word, and the next sentence glued on: "... proxy settings a. The repository may hold it". It
    is cut at the last whole word, marked "…"."""
    from minibert.loading.hub_failures import download_failed

    text = ("Response from http://127.0.0.1:33389/org/full/resolve/main/config.json is missing the 'X-Repo-Commit' "
            "header, so it does not seem to be served by a Hugging Face Hub endpoint. If HF_ENDPOINT is set, check "
            "that it points to a Hub-compatible endpoint. Otherwise, check your firewall and proxy settings and make "
            "sure your SSL certificates are updated.")  # fmt: skip
    message = str(download_failed("org/full", "config.json", OSError(text), token_sent=False))
    stub = message.split("config.json: ", 1)[1].split("…", 1)[0]
    assert "…. The repository may hold it" in message, message
    assert text.startswith(stub) and text[len(stub)] == " " and 250 < len(stub) <= 300, stub


def test_weights_only_as_tf_model_h5_are_named_not_fetched(hub, tmp_path, monkeypatch):
    """A repository with tf_model.h5 and flax_model.msgpack only: the error names them (asked with
    HEAD: neither is downloaded) and how to convert them. transformers 5, the reference, ignores
    from_tf (the call the message gave failed there): the conversion names transformers 4 (checked by
    hand: 4.46 to 4.50 convert, with tf-keras beside TensorFlow 2.21; 4.51 to 4.57 do not). Offline,
    with no record of those files in the cache, the repository was said to have "no weights"."""
    transformers = pytest.importorskip("transformers")
    repo = tmp_path / "tfonly"
    repo.mkdir()
    shutil.copy(TINY / "config.json", repo / "config.json")
    (repo / "tf_model.h5").write_bytes(b"\x89HDF")
    (repo / "flax_model.msgpack").write_bytes(b"\x80")
    hub.repos["org/tfonly"] = repo
    with pytest.raises(CheckpointError) as raised:
        BertModel.from_pretrained("org/tfonly")
    message = str(raised.value)
    assert "only as tf_model.h5 (Keras (TensorFlow 2) weights), flax_model.msgpack (Flax weights)" in message
    assert "minibert does not read" in message and "from_tf=True" in message, message
    assert "pip install 'transformers<4.51' torch tensorflow tf-keras" in message, message
    assert gets(hub, "tf_model.h5") == gets(hub, "flax_model.msgpack") == 0, hub.requests
    if int(transformers.__version__.split(".")[0]) >= 5:
        with pytest.raises(OSError, match="model.safetensors"):  # (it reads no tf_model.h5)
            transformers.BertModel.from_pretrained(repo, from_tf=True)
    offline(monkeypatch)
    with pytest.raises(CheckpointError) as raised:
        BertModel.from_pretrained("org/tfonly")
    message = str(raised.value)
    assert "no weights" not in message and "none of the weights files minibert reads" in message, message
    assert "(tf_model.h5, flax_model.msgpack) is unknown" in message, message


def test_offline_a_revision_not_in_the_cache_names_the_revision(hub, monkeypatch):
    BertModel.from_pretrained("org/tiny")  # main, in the cache
    offline(monkeypatch)
    with pytest.raises(ModelNotFoundError) as raised:
        BertModel.from_pretrained("org/tiny", revision="v1")
    message = str(raised.value)
    assert "the model org/tiny at revision 'v1' is not in the local Hugging Face cache" in message, message
    assert "the cache holds it at main only" in message and "--revision v1" in message, message


def test_offline_a_snapshot_listing_says_which_files_are_absent(hub, monkeypatch, tmp_path):
    """``hf download`` keeps the repository's file list (trees/COMMIT.json): offline, a file it does
    not name is absent (modules.json here), one it names but the cache lacks is unknown."""
    BertModel.from_pretrained("org/tiny")
    BertTokenizer.from_pretrained("org/tiny")
    folder = tmp_path / "hub" / "models--org--tiny"
    shutil.rmtree(folder / ".no_exist", ignore_errors=True)
    listing = {"format_version": 1, "files": {path.name: {"size": path.stat().st_size, "blob_id": "0"}
                                              for path in TINY.iterdir()}}  # fmt: skip
    (folder / "trees").mkdir(exist_ok=True)
    (folder / "trees" / f"{hub.commit}.json").write_text(json.dumps(listing))
    offline(monkeypatch)
    Embedder.from_pretrained("org/tiny")  # modules.json & co: absent, as the listing says
    listing["files"]["modules.json"] = {"size": 10, "blob_id": "0"}
    (folder / "trees" / f"{hub.commit}.json").write_text(json.dumps(listing))
    with pytest.raises(ModelNotFoundError, match=r"without modules.json, .*whether the repository has modules.json"):
        Embedder.from_pretrained("org/tiny")


# ----------------------------------------------------------------------------- 5. what the hub says, said true


def test_a_disabled_repository_is_not_told_to_pass_a_token(hub):
    """The hub's 403 "Access to this resource is disabled." (huggingface_hub's DisabledRepoError): no
    token opens it, and none is asked for."""
    hub.fail("org/tiny", status=403, message="Access to this resource is disabled.", code="Disabled")
    for token in (False, "hf_valid"):
        with pytest.raises(HubDownloadError) as raised:
            BertModel.from_pretrained("org/tiny", token=token)
        message = str(raised.value)
        assert "is disabled on the hub: it cannot be downloaded" in message and "pass" not in message, message


@pytest.mark.parametrize("variables", [{"TRANSFORMERS_OFFLINE": "1"}, {"HF_HUB_OFFLINE": "0"}])
def test_offline_huggingface_hub_is_offline_not_a_failed_download(hub, monkeypatch, variables):
    """huggingface_hub takes TRANSFORMERS_OFFLINE=1 for HF_HUB_OFFLINE=1, and reads them at its import
    (here, offline; then HF_HUB_OFFLINE=0 set later changes nothing for it): it makes no request. A
    file the cache lacks was "could not connect to the hub ... try again later"; it is now the
    cache's message, naming the setting."""
    from huggingface_hub import constants

    BertModel.from_pretrained("org/tiny")  # the model cached, its tokenizer not
    monkeypatch.delenv("HF_HUB_OFFLINE")
    for variable, value in variables.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as huggingface_hub read it at its import
    asked = sum(hub.requests.values())
    with pytest.raises(ModelNotFoundError) as raised:
        Embedder.from_pretrained("org/tiny")
    message = str(raised.value)
    said = "TRANSFORMERS_OFFLINE=1 is set" if "TRANSFORMERS_OFFLINE" in variables else "huggingface_hub is in offline"
    assert type(raised.value) is ModelNotFoundError and said in message, message
    assert "without modules.json" in message and "try again" not in message, message  # the Embedder's first file
    assert sum(hub.requests.values()) == asked


def test_blob_of_reads_the_caches_link_into_blobs(tmp_path):
    """The cache's layout is read in hub_failures.py only: run_fingerprint.py names a large cached file
    by its blob (the cache names a weights blob by its SHA-256) through ``blob_of``."""
    from minibert.loading.hub_failures import blob_of

    repo = tmp_path / "models--org--x"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "9f2c").write_bytes(b"weights")
    snapshot = repo / "snapshots" / "a0ce67"
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").symlink_to("../../blobs/9f2c")
    (snapshot / "config.json").write_text("{}")  # a file copied into the snapshot, not a link
    (tmp_path / "plain.bin").write_bytes(b"weights")
    assert blob_of(snapshot / "model.safetensors") == "9f2c"
    assert blob_of(snapshot / "config.json") is None
    assert blob_of(tmp_path / "plain.bin") is None


@pytest.mark.parametrize("revision, said", [(None, "'main'"), ("v2", "'v2'")])
def test_a_missing_revision_is_named_main_where_none_was_given(hub, revision, said):
    """The hub answers RevisionNotFound for a repository with no commits yet: with no revision
    asked, the one looked for is main ("revision None does not exist" named none)."""
    hub.fail("org/tiny", "config.json", status=404, code="RevisionNotFound")
    with pytest.raises(ModelNotFoundError, match=f"org/tiny: revision {said} does not exist on the hub"):
        BertModel.from_pretrained("org/tiny", revision=revision)
