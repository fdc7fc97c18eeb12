"""The task functions by hub id with ``revision=`` and ``token=`` (tasks/loading.py), on a loopback
hub (hub_server.py), as transformers' ``pipeline(task, model=..., revision=..., token=...)`` takes them.

A gated repository (401 without a token, 403 with another) loads with ``token=``, and answers what
the model loaded with ``from_pretrained(..., token=...)`` answers when passed in; a ``revision=``
reads that commit's files while main is another commit, also after main was loaded and kept; the
token is in no key, repr or message; with a model already loaded, both are a ``TaskArgumentError``;
and ``fill_mask``'s fallback to the bundled toy does not hide a refused token.
"""

from __future__ import annotations

import inspect
import shutil
import warnings
from pathlib import Path

import pytest

from hub_server import HubServer
from minibert import (
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertTokenizer,
    CrossEncoder,
    answer,
    classify,
    fill_mask,
    next_sentence,
    rerank,
    tag,
)
from minibert.errors import ModelNotFoundError, TaskArgumentError
from minibert.loading.hub import DEFAULT_MODEL, HubOptions
from minibert.tasks import loading
from tiny_hub import TINY  # a BertForPreTraining: config, weights, vocab.txt

TOKEN = "hf_TaskTokenSecret123"
TEXT = "the man was in the house"

# task → (the transformers class its checkpoint is saved as, its labels, minibert's class, the call)
TASKS = {
    "classify": ("BertForSequenceClassification", 2, BertForSequenceClassification,
                 lambda **model: classify(TEXT, top_k=None, **model)),
    "tag": ("BertForTokenClassification", 3, BertForTokenClassification,
            lambda **model: tag(TEXT, ignore_labels=(), **model)),
    "answer": ("BertForQuestionAnswering", 2, BertForQuestionAnswering,
               lambda **model: answer("who was in the house?", TEXT, top_k=3, **model)),
    "rerank": ("BertForSequenceClassification", 1, None,
               lambda **model: rerank("the man", ["in the house", "a man was", "the"], **model)),
    "fill_mask": ("BertForPreTraining", None, BertForPreTraining,
                  lambda **model: fill_mask("the man was in the [MASK]", **model)),
    "next_sentence": ("BertForPreTraining", None, BertForPreTraining,
                      lambda **model: next_sentence("the man was here", "he was in the house", **model)),
}  # fmt: skip


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """A loopback hub, this process's cache in tmp_path; the tasks' kept models forgotten around it."""
    loading._load_cached.cache_clear()
    with HubServer({}) as server:
        yield server.in_this_process(monkeypatch, tmp_path / "hub")
    loading._load_cached.cache_clear()


def _checkpoint(folder: Path, task: str, seed: int) -> Path:
    """tiny_hub saved by transformers as the task's class, every weight moved by noise of ``seed``:
    two seeds, two models that answer differently."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    name, labels, _, _ = TASKS[task]
    keywords = {} if labels is None else {"num_labels": labels}
    model = getattr(transformers, name).from_pretrained(TINY, **keywords)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.2 * torch.randn(parameter.shape, generator=generator))
    model.save_pretrained(folder)
    for file in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(TINY / file, folder / file)
    return folder


def _loaded(task: str, repo: str, **download):
    """What the task is given when the model is loaded first: a CrossEncoder for rerank, else
    (model, tokenizer), both by from_pretrained with the same download keywords."""
    cls = TASKS[task][2]
    if cls is None:
        return CrossEncoder(repo, **download)
    return cls.from_pretrained(repo, **download), BertTokenizer.from_pretrained(repo, **download)


@pytest.mark.parametrize("task", TASKS)
def test_a_gated_repository_loads_with_token_and_answers_as_from_pretrained(hub, tmp_path, task):
    hub.repos["org/gated"] = _checkpoint(tmp_path / "gated", task, seed=1)
    hub.gate("org/gated", TOKEN)
    run = TASKS[task][3]
    with pytest.raises(ModelNotFoundError, match="gated repository") as refused:  # no token: the hub's 401
        run(model="org/gated", token=False)
    assert refused.value.refused
    with pytest.raises(ModelNotFoundError, match="gated repository") as refused:  # another token: 403
        run(model="org/gated", token="hf_another")
    assert TOKEN not in str(refused.value) and "hf_another" not in str(refused.value)
    ours = run(model="org/gated", token=TOKEN)
    assert ours == run(model=_loaded(task, "org/gated", token=TOKEN))
    assert all(value == f"Bearer {TOKEN}" for value in hub.authorizations["config.json"][-1:])


@pytest.mark.parametrize("task", TASKS)
def test_revision_reads_that_commit_while_main_is_another(hub, tmp_path, task):
    """main moved from A to B: revision=A answers as from_pretrained(revision=A), also after main
    was loaded and kept (the kept model's key has the revision), and main answers as B."""
    hub.repos["org/moved"] = _checkpoint(tmp_path / "a", task, seed=1)
    first = hub.commit  # A, main's first commit
    second = hub.push("org/moved", _checkpoint(tmp_path / "b", task, seed=2))  # B, main's now
    run = TASKS[task][3]
    at_main = run(model="org/moved")
    at_first = run(model="org/moved", revision=first)
    assert at_first == run(model=_loaded(task, "org/moved", revision=first))
    assert at_main == run(model=_loaded(task, "org/moved"))
    assert at_first != at_main, "the two commits' models must answer differently for this test to tell them apart"
    assert {revision for _, repo, revision, _ in hub.asked if repo == "org/moved"} == {"main", first, second}


@pytest.mark.parametrize("task", TASKS)
def test_revision_and_token_with_a_loaded_model_are_refused_without_the_token(hub, tmp_path, task):
    hub.repos["org/open"] = _checkpoint(tmp_path / "open", task, seed=1)
    loaded = _loaded(task, "org/open")
    givens = [loaded] if task == "rerank" else [loaded, loaded[0]]
    for given in givens:
        with pytest.raises(TaskArgumentError, match=r"revision= is for a model given by name") as raised:
            TASKS[task][3](model=given, revision="v1")
        assert raised.value.parameter == "revision"
        with pytest.raises(TaskArgumentError, match=r"token= is for a model given by name") as raised:
            TASKS[task][3](model=given, token=TOKEN)
        error = raised.value
        assert TOKEN not in f"{error} {error!r} {error.args} {vars(error)}"


def test_the_token_is_checked_as_from_pretrained_checks_it_and_kept_nowhere(hub, tmp_path):
    """A token no header can carry is refused before any request, unquoted (transformers_keywords.py's
    check); the kept models' key has no token, and the options' repr does not show it."""
    hub.repos["org/gated"] = _checkpoint(tmp_path / "gated", "classify", seed=1)
    hub.gate("org/gated", TOKEN)
    with pytest.raises(ValueError, match="no HTTP header can carry") as raised:
        classify(TEXT, model="org/gated", token=TOKEN + "\n")
    assert TOKEN not in str(raised.value) and not hub.asked
    with pytest.raises(TypeError, match="revision must be a str"):
        classify(TEXT, model="org/gated", revision=3)
    assert "token" not in inspect.signature(loading._load_cached.__wrapped__).parameters
    assert TOKEN not in repr(HubOptions(token=TOKEN))
    classify(TEXT, model="org/gated", token=TOKEN)
    assert loading._load_cached.cache_info().currsize == 1


def test_revision_main_and_none_are_one_kept_model_and_a_folder_ignores_revision(hub, tmp_path):
    """The hub reads "main" when no revision is given (huggingface_hub's DEFAULT_REVISION), and a load
    from a folder reads no revision at all (transformers ignores it there): each pair is one model,
    loaded once, not two copies in the tasks' small cache."""
    hub.repos["org/open"] = _checkpoint(tmp_path / "open", "classify", seed=1)
    first = classify(TEXT, model="org/open", top_k=None)
    assert classify(TEXT, model="org/open", revision="main", top_k=None) == first
    assert loading._load_cached.cache_info().currsize == 1
    folder = str(_checkpoint(tmp_path / "folder", "classify", seed=2))
    mine = classify(TEXT, model=folder, top_k=None)
    assert classify(TEXT, model=folder, revision="v7", top_k=None) == mine
    assert loading._load_cached.cache_info().currsize == 2


def test_fill_mask_does_not_hide_a_refused_token_behind_the_bundled_toy(hub, monkeypatch):
    """The default model's hub answers 401 (HF_TOKEN refused, or the token given): that is said, not
    replaced by the toy with "not reachable"; nor is a revision= of the default, which asks for hub files."""
    hub.fail(DEFAULT_MODEL, status=401, code="RepoNotFound", message="Invalid credentials in Authorization header")
    monkeypatch.setenv("HF_TOKEN", "hf_expired")
    calls = [lambda: fill_mask("the man was in the [MASK]"),
             lambda: next_sentence("the man was here", "he was in the house", token="hf_expired"),
             lambda: fill_mask("the man was in the [MASK]", revision="v1", token=False)]  # fmt: skip
    for call in calls:
        with warnings.catch_warnings(record=True) as warned, pytest.raises(ModelNotFoundError) as raised:
            warnings.simplefilter("always")
            call()
        assert not [one for one in warned if "bundled" in str(one.message)], [str(one.message) for one in warned]
        assert "hf_expired" not in str(raised.value) and raised.value.refused  # the hub answered: not out of reach


@pytest.mark.parametrize("task", TASKS)
def test_a_model_loaded_at_a_commit_and_given_alone_reads_that_commits_tokenizer(hub, tmp_path, task):
    """main moved from A to B, whose vocab.txt swaps two words: a model loaded with
    ``from_pretrained(revision=A)`` and given alone is read with A's tokenizer (the commit is kept as
    transformers keeps it, ``config._commit_hash``), so it answers as the pair of A's model and A's
    tokenizer. Before: main's tokenizer, B's ids under A's weights, with no error."""
    hub.repos["org/moved"] = folder = _checkpoint(tmp_path / "a", task, seed=1)
    first = hub.commit
    swapped = tmp_path / "b"
    shutil.copytree(folder, swapped)
    words = (swapped / "vocab.txt").read_text().splitlines()
    one, other = words.index("was"), words.index("in")
    words[one], words[other] = words[other], words[one]
    (swapped / "vocab.txt").write_text("\n".join(words) + "\n")
    hub.push("org/moved", swapped)
    model = (TASKS[task][2] or BertForSequenceClassification).from_pretrained("org/moved", revision=first)
    assert model.config._commit_hash == first
    run = TASKS[task][3]
    alone = run(model=model)
    assert alone == run(model=(model, BertTokenizer.from_pretrained("org/moved", revision=first)))
    assert alone != run(model=(model, BertTokenizer.from_pretrained("org/moved"))), "B's tokenizer answers otherwise"
