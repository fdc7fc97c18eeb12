"""The hub when it fails (loading/hub.py, loading/hub_failures.py), on a loopback hub (hub_server.py).

An optional file (a weights format further down the list, tokenizer_config.json, modules.json) is
absent only when the hub answered 404 for it, or the cache records that it did. Any other failure (a
server error, a dropped connection, offline with the file not in the cache) is an error that names
the repository, the file and what happened: skipping the file would load other weights, another
casing or another pooling without a word. A gated repository is said to be gated, a disabled one
disabled; arguments (a token that cannot be sent among them) are checked before a byte is
downloaded. The files of one load come from one commit, however the branch moves meanwhile; a
damaged copy in the cache is named with a remedy that replaces it.

The tests run in this process (a subprocess per case would spend seconds importing torch):
huggingface_hub reads HF_HUB_OFFLINE and its cache folder when it is imported, so the fixture sets
them on its ``constants``; its retries of a server error (about 23 s of waiting) are made without
the waits.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hub_server import HubServer
from minibert import BertForSequenceClassification, BertModel, BertTokenizer, CrossEncoder, Embedder
from minibert.errors import CheckpointError, HubDownloadError, ModelNotFoundError

TINY = Path(__file__).parent / "data" / "tiny_hub"  # config.json, model.safetensors, tokenizer_config.json, vocab.txt
IDS = [[2, 5, 7, 9, 3]]


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """A loopback hub serving tests/data/tiny_hub as org/tiny, this process's cache in tmp_path."""
    with HubServer({"org/tiny": TINY}) as server:
        yield server.in_this_process(monkeypatch, tmp_path / "hub")


def _offline(monkeypatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def _gets(server: HubServer, filename: str) -> int:
    return sum(count for (method, _, name), count in server.requests.items() if method == "GET" and name == filename)


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
    assert _gets(hub, "pytorch_model.bin") == 0, hub.requests


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
    _offline(monkeypatch)
    Embedder.from_pretrained("org/tiny")
    assert sum(hub.requests.values()) == asked


def test_offline_a_file_the_cache_lacks_is_unknown_not_absent(hub, monkeypatch):
    """A cache holding config.json only (a first download cut short): offline, the weights are not
    "absent" (nobody asked the hub): the error says the cache lacks model.safetensors and that
    whether the repository has it is unknown."""
    from huggingface_hub import hf_hub_download

    hf_hub_download("org/tiny", "config.json", endpoint=hub.url)
    _offline(monkeypatch)
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


# ----------------------------------------------------------------------------- 4. arguments before downloads


@pytest.mark.parametrize("keywords", [{"dtype": "float33"}, {"num_label": 3}, {"dtype": "int32"}])
def test_arguments_are_checked_before_any_download(hub, keywords):
    """A misspelt keyword or dtype is refused before config.json, let alone the weights, is fetched."""
    with pytest.raises((TypeError, ValueError)):
        BertModel.from_pretrained("org/tiny", **keywords)
    with pytest.raises((TypeError, ValueError)):
        Embedder.from_pretrained("org/tiny", dtype=keywords.get("dtype", "fp33"))
    assert not hub.requests, hub.requests


@pytest.mark.parametrize("auto, keywords", [
    ("AutoModel", {"num_label": 3}), ("AutoModelForSequenceClassification", {"nmu_labels": 3}),
    ("AutoModel", {"dtype": "float8"}), ("AutoConfig", {"hidden_sise": 64}), ("AutoTokenizer", {"do_lower": True}),
])  # fmt: skip
def test_the_auto_names_check_their_keywords_before_any_download(hub, auto, keywords):
    """An Auto class read config.json (its model_type) before the class it stands for checked the
    keywords: a typo cost two requests, and offline or on a failing hub it was said as a hub error.
    The class's own error now comes first, as from the class itself, with no request."""
    import minibert

    with pytest.raises((TypeError, ValueError)) as raised:
        getattr(minibert, auto).from_pretrained("org/tiny", **keywords)
    assert not hub.requests, hub.requests
    bert_class = getattr(minibert, auto).bert_class
    with pytest.raises(type(raised.value)) as direct:
        bert_class.from_pretrained("org/tiny", **keywords)
    assert str(direct.value) == str(raised.value)


@pytest.mark.parametrize("name", ["BertModel", "BertForMaskedLM", "BertConfig", "BertTokenizer",
                                  "AutoModel", "AutoModelForMaskedLM", "AutoConfig", "AutoTokenizer"])  # fmt: skip
def test_subfolder_is_refused_by_name_with_how_to_load_one(hub, tmp_path, name):
    """transformers' subfolder= (a checkpoint in enc/ of a repository): through an Auto class it was
    "the repository has no file config.json", a repository that has enc/config.json; through a class,
    a generic unexpected keyword. It is refused by name, with no request, saying how to load one (the
    repository downloaded, the folder's path passed); subfolder="", transformers' default, changes nothing."""
    import minibert

    hub.repos["org/sub"] = tmp_path / "sub"
    shutil.copytree(TINY, tmp_path / "sub" / "enc")
    loader = getattr(minibert, name)
    with pytest.raises(TypeError) as raised:
        loader.from_pretrained("org/sub", subfolder="enc")
    message = str(raised.value)
    assert message.startswith("subfolder='enc'") and "from_pretrained('path/enc')" in message, message
    assert not hub.requests, hub.requests
    assert loader.from_pretrained(tmp_path / "sub" / "enc") is not None  # (the folder's path: how to load one)
    assert loader.from_pretrained("org/tiny", subfolder="") is not None


# ----------------------------------------------------------------------------- 5. messages


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
    assert _gets(hub, "tf_model.h5") == _gets(hub, "flax_model.msgpack") == 0, hub.requests
    if int(transformers.__version__.split(".")[0]) >= 5:
        with pytest.raises(OSError, match="model.safetensors"):  # (it reads no tf_model.h5)
            transformers.BertModel.from_pretrained(repo, from_tf=True)
    _offline(monkeypatch)
    with pytest.raises(CheckpointError) as raised:
        BertModel.from_pretrained("org/tfonly")
    message = str(raised.value)
    assert "no weights" not in message and "none of the weights files minibert reads" in message, message
    assert "(tf_model.h5, flax_model.msgpack) is unknown" in message, message


def test_offline_a_revision_not_in_the_cache_names_the_revision(hub, monkeypatch):
    BertModel.from_pretrained("org/tiny")  # main, in the cache
    _offline(monkeypatch)
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
    _offline(monkeypatch)
    Embedder.from_pretrained("org/tiny")  # modules.json & co: absent, as the listing says
    listing["files"]["modules.json"] = {"size": 10, "blob_id": "0"}
    (folder / "trees" / f"{hub.commit}.json").write_text(json.dumps(listing))
    with pytest.raises(ModelNotFoundError, match=r"without modules.json, .*whether the repository has modules.json"):
        Embedder.from_pretrained("org/tiny")


# ----------------------------------------------------------------------------- 6. the Auto names read as their classes


@pytest.mark.parametrize("cache_dir", [True, False])
def test_the_auto_names_read_config_json_with_the_calls_cache_dir_and_local_files_only(hub, monkeypatch, tmp_path,
                                                                                       cache_dir):  # fmt: skip
    """AutoModel, AutoTokenizer and AutoConfig read config.json for its model_type before the BERT
    class loads. That read ignored the call's keywords: it looked in the default cache (a false
    "not in the local Hugging Face cache" for a cache_dir that held it), and asked the hub though
    local_files_only=True (10 s against a hub that never answers). It now reads as the class does:
    against a hub that never answers, nothing connects."""
    from hub_server import SilentHub
    from minibert import AutoConfig, AutoModel, AutoTokenizer

    where = {"cache_dir": tmp_path / "elsewhere"} if cache_dir else {}
    BertModel.from_pretrained("org/tiny", **where)  # online, from the loopback hub: the cache filled
    BertTokenizer.from_pretrained("org/tiny", **where)
    with SilentHub() as silent:
        monkeypatch.setenv("HF_ENDPOINT", silent.url)
        monkeypatch.setenv("MINIBERT_HUB_TIMEOUT", "2")
        model = AutoModel.from_pretrained("org/tiny", local_files_only=True, **where)
        tokenizer = AutoTokenizer.from_pretrained("org/tiny", local_files_only=True, **where)
        config = AutoConfig.from_pretrained("org/tiny", local_files_only=True, **where)
        assert silent.connections == 0
    assert type(model) is BertModel and type(tokenizer) is BertTokenizer
    assert config.hidden_size == model.config.hidden_size


def test_the_auto_names_send_the_token_when_reading_config_json(hub):
    """The model_type check asked for config.json without the call's token: a private or gated
    repository failed there, before the class that would have sent it."""
    from minibert import AutoConfig, AutoModel, AutoTokenizer

    for auto in (AutoModel, AutoTokenizer, AutoConfig):
        auto.from_pretrained("org/tiny", token="hf_mine")
    asked = sum(count for (_, _, name), count in hub.requests.items() if name == "config.json")
    assert asked and hub.authorizations["config.json"] == ["Bearer hf_mine"] * asked, hub.authorizations


# ----------------------------------------------------------------------------- 7. one load, one commit


def _classifier(folder: Path, swapped: bool = False) -> Path:
    """tiny_hub's encoder with a 2-label classifier, saved by transformers. ``swapped``: the same model
    pushed again with its labels, and their classifier rows, in the other order: it answers the same."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    names = ["negative", "positive"][::-1] if swapped else ["negative", "positive"]
    model = transformers.BertForSequenceClassification.from_pretrained(
        TINY, num_labels=2, id2label=dict(enumerate(names)), label2id={name: i for i, name in enumerate(names)})
    if swapped:
        with torch.no_grad():
            model.classifier.weight.copy_(model.classifier.weight.flip(0))
            model.classifier.bias.copy_(model.classifier.bias.flip(0))
    model.save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(TINY / name, folder / name)
    return folder


def _logits_and_label(model) -> tuple:
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor(IDS)).logits[0]
    return logits, model.config.id2label[int(logits.argmax())]


def _checked_against_transformers(model, folder: Path) -> None:
    """``model``'s logits and label equal transformers' on ``folder`` (the same float32 tensors and
    arithmetic: float32 rounding of a few sums, 1e-5 at these magnitudes)."""
    transformers = pytest.importorskip("transformers")
    (ours, our_label) = _logits_and_label(model)
    (theirs, their_label) = _logits_and_label(transformers.BertForSequenceClassification.from_pretrained(folder).eval())
    assert (ours - theirs).abs().max().item() <= 1e-5 and our_label == their_label, (ours, theirs, our_label)


def test_a_push_in_the_middle_of_a_load_does_not_mix_two_commits(hub, tmp_path):
    """main moves to commit B right after config.json is served: config.json came from A, and the
    weights asked for by the branch came from B, whose labels are in the other order: the wrong
    label, without an error. Every file of the load is now asked at the commit of the first, as
    transformers 5 resolves the revision once per from_pretrained."""
    first = _classifier(tmp_path / "a")
    hub.repos["org/race"] = first
    hub.push("org/race", _classifier(tmp_path / "b", swapped=True), after="config.json")
    model = BertForSequenceClassification.from_pretrained("org/race")
    _checked_against_transformers(model, first)
    after = hub.asked.index(("GET", "org/race", "main", "config.json")) + 1
    assert {revision for _, _, revision, _ in hub.asked[after:]} == {hub.commit}, hub.asked


@pytest.mark.parametrize("load", ["Embedder", "CrossEncoder"])
def test_the_tokenizer_the_model_and_the_recipe_come_from_one_commit(hub, tmp_path, load):
    """An Embedder or a CrossEncoder reads a tokenizer, a model and sentence-transformers' files: the
    load's first request asks for main (the Embedder's is modules.json, read first to refuse a pipeline
    minibert does not compute before anything else is fetched) and fixes its commit; a push landing
    once a file is served (the tokenizer's vocab.txt, the model's config.json) changes none of the
    files read after it."""
    hub.repos["org/race"] = _classifier(tmp_path / "a")
    pushed_after = "vocab.txt" if load == "Embedder" else "config.json"
    hub.push("org/race", _classifier(tmp_path / "b", swapped=True), after=pushed_after)
    Embedder.from_pretrained("org/race") if load == "Embedder" else CrossEncoder("org/race")
    at_main = [asked for asked in hub.asked if asked[2] == "main"]
    assert len({file for _, _, _, file in at_main}) == 1, hub.asked  # the first file; the rest at its commit
    assert any(asked[0] == "GET" and asked[3] == pushed_after for asked in hub.asked), hub.asked  # main moved
    after = hub.asked.index(at_main[-1]) + 1
    assert {revision for _, _, revision, _ in hub.asked[after:]} == {hub.commit}, hub.asked


def test_a_hub_failing_on_config_json_gives_the_cache_s_commit_whole(hub, tmp_path):
    """The cache holds commit A; main has moved to B, and the hub fails on config.json: huggingface_hub
    gives the cache's config.json of A. The weights are then A's too (the cache's), never B's."""
    first = _classifier(tmp_path / "a")
    hub.repos["org/race"] = first
    BertForSequenceClassification.from_pretrained("org/race")
    hub.push("org/race", _classifier(tmp_path / "b", swapped=True))
    hub.fail("org/race", "config.json", status=500)
    _checked_against_transformers(BertForSequenceClassification.from_pretrained("org/race"), first)


# ----------------------------------------------------------------------------- 8. a damaged copy in the cache


def _damaged_blob(cache: Path) -> Path:
    """The blob the cache's model.safetensors of org/tiny links to, its last 1000 bytes cut off."""
    blob = next(cache.glob("models--org--tiny/snapshots/*/model.safetensors")).resolve()
    with blob.open("r+b") as handle:
        handle.truncate(blob.stat().st_size - 1000)
    return blob


def test_a_damaged_copy_in_the_cache_is_named_with_remedies_that_work(hub, tmp_path):
    """The error named the snapshot's link and said "delete it and download it again": huggingface_hub
    then links the same damaged blob again, without a download. It names the blob and gives two
    remedies, each run here: transformers' force_download=True, and the `hf download` command."""
    hf = shutil.which("hf")
    BertModel.from_pretrained("org/tiny")
    blob = _damaged_blob(tmp_path / "hub")
    with pytest.raises(CheckpointError) as raised:
        BertModel.from_pretrained("org/tiny")
    message = str(raised.value)
    assert str(blob) in message and "force_download=True" in message, message
    BertModel.from_pretrained("org/tiny", force_download=True)  # downloads it again: it loads
    assert blob.stat().st_size == (TINY / "model.safetensors").stat().st_size
    if hf is None:
        pytest.skip("huggingface_hub's `hf` command is not installed")
    _damaged_blob(tmp_path / "hub")
    with pytest.raises(CheckpointError) as raised:
        BertModel.from_pretrained("org/tiny")
    command = str(raised.value).split("`")[1]
    assert command.startswith("hf download org/tiny model.safetensors --revision "), command
    environment = hub.environment(tmp_path / "unused") | {"HF_HUB_CACHE": str(tmp_path / "hub")}
    subprocess.run([hf, *command.split()[1:]], env=environment, check=True, capture_output=True, timeout=120)
    BertModel.from_pretrained("org/tiny")


@pytest.mark.parametrize("case", ["no such repository", "gated", "token refused", "HTTP 500", "HTTP 429"])
def test_force_download_says_the_hubs_refusal_or_failure_as_without_it(hub, case):
    """force_download=True (the remedy a damaged copy's error gives): huggingface_hub wraps the hub's
    refusal or failure of its HEAD in ValueError("Force download failed due to the above error."),
    which came out bare, the repository and what happened unnamed. It is now the error the same load
    gives without force_download, for a model, a tokenizer and a config."""
    from minibert import BertConfig

    repo, token = "org/tiny", None
    if case == "no such repository":
        repo = "org/tiyn"
    elif case in ("gated", "token refused"):
        hub.gate("org/tiny", "hf_allowed")
        token = "hf_other" if case == "token refused" else False
    else:
        hub.fail("org/tiny", status=int(case.split()[1]))
    for load in (BertModel.from_pretrained, BertTokenizer.from_pretrained, BertConfig.from_pretrained):
        said = []
        for force in (False, True):
            with pytest.raises(ModelNotFoundError) as raised:
                load(repo, token=token, force_download=force)
            said.append((type(raised.value), str(raised.value)))
        assert said[1] == said[0]
        assert said[1][1].startswith(repo), said


def test_force_download_with_huggingface_hub_offline_says_so(hub, monkeypatch):
    """huggingface_hub made offline at its import (HF_HUB_OFFLINE then unset): force_download=True
    was its ValueError("Cannot pass 'force_download=True' when offline mode is enabled."), naming no
    file; it is a ModelNotFoundError naming the repository, the file and the setting."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelNotFoundError) as raised:
        BertModel.from_pretrained("org/tiny", force_download=True)
    message = str(raised.value)
    assert message.startswith("org/tiny: force_download=True asks the hub for config.json again, but "
                              "huggingface_hub is in offline mode"), message  # fmt: skip


# ----------------------------------------------------------------------------- 9. the download keywords


@pytest.mark.parametrize("token", ["hf_SECRET123\n", "", "hf_SECRET 123", True])
def test_a_token_that_cannot_be_sent_is_refused_before_any_request_and_never_shown(hub, monkeypatch, tmp_path, token):
    """A token read from a file with its newline, an empty one (os.environ.get("HF_TOKEN", "")), or
    token=True with no saved login: the request was never sent, yet it was reported as a dropped
    connection ("try again later"), the token in the message. It is refused first, by its keyword."""
    from huggingface_hub import constants

    for variable in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-saved-login"))
    with pytest.raises(ValueError, match="token") as raised:
        BertModel.from_pretrained("org/tiny", token=token)
    assert "SECRET" not in str(raised.value) and "try again" not in str(raised.value), raised.value
    assert not hub.requests, hub.requests


def test_a_header_the_http_library_refused_is_not_a_dropped_connection_and_hides_the_token():
    from minibert.loading.hub_failures import what_happened

    class LocalProtocolError(Exception):  # h11's, as httpx raises it for a header it will not send
        pass

    said = what_happened(LocalProtocolError("Illegal header value b'Bearer hf_SECRET123\\n'"))
    assert "could not be sent" in said and "SECRET" not in said and "closed" not in said, said


def test_offline_with_cache_dir_names_that_cache_and_lists_its_models(hub, tmp_path):
    """local_files_only=True with cache_dir=X: the message spoke of the standard cache (and listed
    org/tiny, cached there, as loading offline) and its `hf download` filled the standard cache."""
    BertModel.from_pretrained("org/tiny")  # in the standard cache
    mine = tmp_path / "mine"
    with pytest.raises(ModelNotFoundError) as raised:
        BertModel.from_pretrained("org/tiny", cache_dir=mine, local_files_only=True)
    message = str(raised.value)
    assert f"not in the local Hugging Face cache {mine}" in message, message
    assert f"`hf download org/tiny --cache-dir {mine}`" in message, message
    assert message.endswith("Models that load offline here: minibert/fortunes-mini."), message


def test_cache_dir_as_bytes_is_that_folder(hub, tmp_path, monkeypatch):
    """bytes were taken by str(), the cache written into a folder named "b'...'" under the current one."""
    monkeypatch.chdir(tmp_path)
    BertModel.from_pretrained("org/tiny", cache_dir=bytes(tmp_path / "mine"))
    assert list((tmp_path / "mine").glob("models--org--tiny/snapshots/*/model.safetensors"))
    assert not list(tmp_path.glob("b'*")), sorted(path.name for path in tmp_path.iterdir())


def test_the_embedder_and_cross_encoder_take_sentence_transformers_download_keywords(hub, tmp_path):
    """sentence-transformers' SentenceTransformer and CrossEncoder take token, cache_folder and
    local_files_only; the Embedder and CrossEncoder refused them with Python's bare TypeError, while
    the gated repository's message said "pass token=...". Each reaches every file; another keyword is
    a TypeError listing what is taken."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    import inspect

    keywords = ("token", "cache_folder", "local_files_only")
    for theirs in (sentence_transformers.SentenceTransformer, sentence_transformers.CrossEncoder):
        assert set(keywords) <= set(inspect.signature(theirs.__init__).parameters), theirs
    hub.repos["org/race"] = _classifier(tmp_path / "race")
    mine = tmp_path / "mine"
    Embedder.from_pretrained("org/race", token="hf_mine", cache_folder=mine)
    CrossEncoder("org/race", token="hf_mine", cache_folder=mine)
    assert set(hub.authorizations) >= {"vocab.txt", "config.json", "model.safetensors", "modules.json"}
    assert {value for values in hub.authorizations.values() for value in values} == {"Bearer hf_mine"}
    assert not (tmp_path / "hub").exists(), "cache_folder= must replace the standard cache"
    asked = sum(hub.requests.values())
    Embedder.from_pretrained("org/race", cache_folder=mine, local_files_only=True)
    CrossEncoder("org/race", cache_folder=mine, local_files_only=True)
    assert sum(hub.requests.values()) == asked
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['cache_dir'\].*cache_folder"):
        Embedder.from_pretrained("org/race", cache_dir=mine)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['cache_dir'\].*cache_folder"):
        CrossEncoder("org/race", cache_dir=mine)


def test_a_load_of_several_parts_checks_its_download_keywords_once(tmp_path, monkeypatch):
    """token=True sends the saved login, which is looked up (huggingface_hub's get_token) to refuse a
    missing one before any request. An Embedder, a CrossEncoder and an Auto class load several parts
    (tokenizer, model, recipe or architecture), and each part checked the keywords again: three reads
    of the login for one Embedder. Now once per load."""
    import huggingface_hub

    from minibert import AutoModelForSequenceClassification

    folder = _classifier(tmp_path / "once")
    reads = []
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: reads.append("read") or "hf_saved")
    loads = {"Embedder": lambda: Embedder.from_pretrained(folder, token=True),
             "CrossEncoder": lambda: CrossEncoder(folder, token=True),
             "AutoModel": lambda: AutoModelForSequenceClassification.from_pretrained(folder, token=True)}  # fmt: skip
    for name, load in loads.items():
        reads.clear()
        load()
        assert reads == ["read"], name


# ----------------------------------------------------------------------------- 10. what the hub says, said true


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


# ----------------------------------------------------------------------------- 11. the deadline (MINIBERT_HUB_TIMEOUT)


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
