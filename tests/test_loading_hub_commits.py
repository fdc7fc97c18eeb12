"""One load, one commit, on a loopback hub (hub_server.py): the files of one load (tokenizer, model,
recipe) come from one commit, however the branch moves meanwhile, and the model answers as
transformers' load of that commit does. A damaged copy in the cache is named with a remedy that
replaces it, and force_download says the hub's refusal or failure as a plain download would.

The tests run in this process, on tiny_hub.py's ``hub``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from minibert import BertForSequenceClassification, BertModel, BertTokenizer, CrossEncoder, Embedder
from minibert.errors import CheckpointError, ModelNotFoundError
from tiny_hub import IDS, TINY, classifier

# ----------------------------------------------------------------------------- 1. one load, one commit


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
    first = classifier(tmp_path / "a")
    hub.repos["org/race"] = first
    hub.push("org/race", classifier(tmp_path / "b", swapped=True), after="config.json")
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
    hub.repos["org/race"] = classifier(tmp_path / "a")
    pushed_after = "vocab.txt" if load == "Embedder" else "config.json"
    hub.push("org/race", classifier(tmp_path / "b", swapped=True), after=pushed_after)
    Embedder.from_pretrained("org/race") if load == "Embedder" else CrossEncoder("org/race")
    at_main = [asked for asked in hub.asked if asked[2] == "main"]
    assert len({file for _, _, _, file in at_main}) == 1, hub.asked  # the first file; the rest at its commit
    assert any(asked[0] == "GET" and asked[3] == pushed_after for asked in hub.asked), hub.asked  # main moved
    after = hub.asked.index(at_main[-1]) + 1
    assert {revision for _, _, revision, _ in hub.asked[after:]} == {hub.commit}, hub.asked


def test_a_hub_failing_on_config_json_gives_the_cache_s_commit_whole(hub, tmp_path):
    """The cache holds commit A; main has moved to B, and the hub fails on config.json: huggingface_hub
    gives the cache's config.json of A. The weights are then A's too (the cache's), never B's."""
    first = classifier(tmp_path / "a")
    hub.repos["org/race"] = first
    BertForSequenceClassification.from_pretrained("org/race")
    hub.push("org/race", classifier(tmp_path / "b", swapped=True))
    hub.fail("org/race", "config.json", status=500)
    _checked_against_transformers(BertForSequenceClassification.from_pretrained("org/race"), first)


# ----------------------------------------------------------------------------- 2. a damaged copy in the cache


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
