"""The hub's keywords (loading/hub.py), on a loopback hub (hub_server.py): arguments are checked before
a byte is downloaded (a misspelt keyword, a dtype, subfolder=, a token that cannot be sent); the
Auto names read config.json with the call's own token, cache_dir and local_files_only; the Embedder
and CrossEncoder take sentence-transformers' download keywords; a load of several parts checks them
once.

The tests run in this process, on tiny_hub.py's ``hub``.
"""

from __future__ import annotations

import shutil

import pytest

from minibert import BertModel, BertTokenizer, CrossEncoder, Embedder
from minibert.errors import ModelNotFoundError
from tiny_hub import TINY, classifier

# ----------------------------------------------------------------------------- 1. arguments before downloads


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


# ----------------------------------------------------------------------------- 2. the Auto names read as their classes


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


# ----------------------------------------------------------------------------- 3. the download keywords


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
    hub.repos["org/race"] = classifier(tmp_path / "race")
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

    folder = classifier(tmp_path / "once")
    reads = []
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: reads.append("read") or "hf_saved")
    loads = {"Embedder": lambda: Embedder.from_pretrained(folder, token=True),
             "CrossEncoder": lambda: CrossEncoder(folder, token=True),
             "AutoModel": lambda: AutoModelForSequenceClassification.from_pretrained(folder, token=True)}  # fmt: skip
    for name, load in loads.items():
        reads.clear()
        load()
        assert reads == ["read"], name
