"""Checkpoints and keywords as transformers writes and takes them: sharded checkpoints, an encoder
saved without its pooler, a stored masked-LM decoder, and transformers' ``from_pretrained``
keywords (loading/transformers_keywords.py). Each either gives transformers' numbers (max |Δ|
reported; a load of the same float32 tensors runs the same float32 arithmetic, so the bound is
float32 rounding of a few sums, 1e-5 at these magnitudes) or is refused with a message that is true.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from minibert import BertForMaskedLM, BertModel, BertTokenizer, Embedder
from minibert.errors import CheckpointError, MissingHeadsError, ModelNotFoundError

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

BOUND = 1e-5  # float32 rounding of the same sums (see the module's docstring)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(94)]
IDS = torch.tensor([[2, 5, 7, 9, 11, 3]])


def _config():
    return transformers.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=37)  # fmt: skip


def _our_config():
    import minibert

    return minibert.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=37)  # fmt: skip


def _saved(model, directory, **save):
    model.save_pretrained(directory, **save)
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return directory


def _max_delta(ours, theirs) -> float:
    return (ours - theirs).abs().max().item()


def _as_bin_shards(directory) -> None:
    """transformers 5 writes safetensors shards only; its 4's pytorch_model-0000k-of-0000n.bin shards
    and pytorch_model.bin.index.json, made from them (the same tensors, torch's pickle)."""
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    for shard in sorted(set(index["weight_map"].values())):
        state = safetensors_torch.load_file(str(directory / shard))
        torch.save(state, directory / shard.replace("model-", "pytorch_model-").replace(".safetensors", ".bin"))
        (directory / shard).unlink()
    index["weight_map"] = {name: shard.replace("model-", "pytorch_model-").replace(".safetensors", ".bin")
                           for name, shard in index["weight_map"].items()}  # fmt: skip
    (directory / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    (directory / "model.safetensors.index.json").unlink()


@pytest.mark.parametrize("kind", ["safetensors", "bin"])
def test_a_sharded_checkpoint_loads_every_shard(tmp_path, kind):
    torch.manual_seed(0)
    reference = transformers.BertModel(_config()).eval()
    directory = _saved(reference, tmp_path / "sharded", max_shard_size="20KB")
    if kind == "bin":
        _as_bin_shards(directory)
    assert (directory / f"{'model.safetensors' if kind == 'safetensors' else 'pytorch_model.bin'}.index.json").is_file()
    assert len(list(directory.glob(f"*-of-*.{kind}"))) > 2, sorted(os.listdir(directory))
    with torch.no_grad():
        ours = BertModel.from_pretrained(directory)(IDS).last_hidden_state
        delta = _max_delta(ours, reference(IDS).last_hidden_state)
    assert delta <= BOUND, f"sharded checkpoint: max |Δ| {delta:.3g} against transformers"


def test_a_missing_or_foreign_shard_is_named(tmp_path):
    torch.manual_seed(0)
    directory = _saved(transformers.BertModel(_config()), tmp_path / "sharded", max_shard_size="20KB")
    shard = sorted(directory.glob("model-*-of-*.safetensors"))[1]
    shard.unlink()
    with pytest.raises(ModelNotFoundError, match=f"{shard.name} not found in the directory"):
        BertModel.from_pretrained(directory)
    for outside in ("../elsewhere.safetensors", "/tmp/elsewhere.safetensors", "part/../../x.safetensors",
                    "./model.safetensors", "part//x.safetensors", "x.bin"):  # fmt: skip
        (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": outside}}))
        with pytest.raises(CheckpointError, match="not a .safetensors file in its folder"):
            BertModel.from_pretrained(directory)


def test_shards_in_a_folder_below_the_index_load_as_transformers_loads_them(tmp_path):
    """An index naming ``part/model-00001-of-00005.safetensors``: transformers loads it (the same
    outputs as unsharded); minibert refused it as "not a file beside it", locally and from the hub."""
    torch.manual_seed(0)
    reference = transformers.BertModel(_config()).eval()
    directory = _saved(reference, tmp_path / "sharded", max_shard_size="20KB")
    index_file = directory / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    moved = sorted(set(index["weight_map"].values()))[:2]
    (directory / "part").mkdir()
    for name in moved:
        (directory / name).rename(directory / "part" / name)
    index["weight_map"] = {key: f"part/{name}" if name in moved else name for key, name in index["weight_map"].items()}
    index_file.write_text(json.dumps(index))
    theirs = transformers.BertModel.from_pretrained(str(directory)).eval()
    with torch.no_grad():
        assert torch.equal(theirs(IDS).last_hidden_state, reference(IDS).last_hidden_state)  # the reference reads it
        ours = BertModel.from_pretrained(directory)(IDS).last_hidden_state
        delta = _max_delta(ours, reference(IDS).last_hidden_state)
    assert delta <= BOUND, f"max |Δ| {delta:.3g}"


def test_an_encoder_saved_without_its_pooler(tmp_path):
    """BertModel refuses it with advice that works (not "load it with BertModel"); add_pooling_layer=False
    loads it; the Embedder loads it by itself (mean pooling never reads the pooler), as sentence-transformers does."""
    torch.manual_seed(0)
    reference = transformers.BertModel(_config(), add_pooling_layer=False).eval()
    directory = _saved(reference, tmp_path / "no-pooler")
    with pytest.raises(MissingHeadsError) as caught:
        BertModel.from_pretrained(directory)
    assert "add_pooling_layer=False" in str(caught.value) and "load it with BertModel" not in str(caught.value)
    model = BertModel.from_pretrained(directory, add_pooling_layer=False)
    with torch.no_grad():
        out = model(IDS)
        delta = _max_delta(out.last_hidden_state, reference(IDS).last_hidden_state)
    assert out.pooler_output is None and delta <= BOUND, f"max |Δ| {delta:.3g}"
    sentence_transformers = pytest.importorskip("sentence_transformers")
    texts = ["w1 w2 w3", "w7"]
    ours = Embedder.from_pretrained(directory).embed(texts)
    theirs = sentence_transformers.SentenceTransformer(str(directory), device="cpu").encode(texts)
    assert np.abs(ours - theirs).max() <= BOUND, f"Embedder vs sentence-transformers: {np.abs(ours - theirs).max()}"
    with pytest.raises(ValueError, match="pooling='pooler' reads BERT's pooler, which this model has not"):
        Embedder.from_pretrained(directory).embed(texts, pooling="pooler")
    with pytest.raises(TypeError, match="only BertModel does"):
        BertForMaskedLM.from_pretrained(directory, add_pooling_layer=False)


@pytest.mark.parametrize("stored", ["cls.predictions.decoder.weight", "cls.predictions.decoder.bias"])
def test_a_stored_decoder_that_is_not_the_tied_one_is_refused(tmp_path, stored):
    """transformers unties a stored decoder that differs and uses it (logits 20 away); minibert's
    decoder is the word embeddings (and cls.predictions.bias): it refuses rather than differ."""
    torch.manual_seed(0)
    directory = _saved(transformers.BertForMaskedLM(_config()), tmp_path / "decoder")
    state = safetensors_torch.load_file(str(directory / "model.safetensors"))
    tied = state["bert.embeddings.word_embeddings.weight" if stored.endswith("weight") else "cls.predictions.bias"]
    state[stored] = tied.clone()  # stored, and equal to what it is tied to: loads
    safetensors_torch.save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
    BertForMaskedLM.from_pretrained(directory)
    state[stored] = tied + 0.5
    safetensors_torch.save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=f"{stored} differs from .* untied"):
        BertForMaskedLM.from_pretrained(directory)
    BertModel.from_pretrained(directory, new_heads=True)  # the encoder alone never reads the decoder


def test_transformers_keywords_mean_what_they_mean_there(minilm_dir):
    reference = BertModel.from_pretrained(minilm_dir)
    model = BertModel.from_pretrained(minilm_dir, torch_dtype=torch.float16, device_map="cpu",
                                      attn_implementation="sdpa", low_cpu_mem_usage=True, trust_remote_code=False,
                                      local_files_only=True)  # fmt: skip
    assert model.dtype == torch.float16 and model.device.type == "cpu" and reference.dtype == torch.float32
    assert BertModel.from_pretrained(minilm_dir, device_map={"": "cpu"}).device.type == "cpu"
    refused = [
        (dict(device_map={"embeddings": 0, "encoder": 1}), ValueError, "splits a model over devices"),
        (dict(attn_implementation="flash_attention_2"), ValueError, "is not minibert's"),
        (dict(torch_dtype=torch.float16, dtype=torch.float32), TypeError, "disagree"),
        (dict(local_files_only="yes"), TypeError, "local_files_only must be True or False"),
        (dict(output_scores=True), TypeError, r"unexpected keyword arguments \['output_scores'\].*torch_dtype"),
    ]
    for keywords, kind, message in refused:
        with pytest.raises(kind, match=message):
            BertModel.from_pretrained(minilm_dir, **keywords)
    tokenizer = BertTokenizer.from_pretrained(minilm_dir, use_fast=True, model_max_length=128, padding_side="left",
                                              truncation_side="left", clean_up_tokenization_spaces=True)  # fmt: skip
    assert (tokenizer.model_max_length, tokenizer.padding_side, tokenizer.truncation_side) == (128, "left", "left")
    assert tokenizer.clean_up_tokenization_spaces is True
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['legacy'\]"):
        BertTokenizer.from_pretrained(minilm_dir, legacy=False)
    with pytest.raises(ModelNotFoundError, match="local_files_only=True was passed"):
        BertModel.from_pretrained("some-org/never-downloaded", local_files_only=True)


def test_device_map_none_is_no_map_and_an_empty_map_names_no_device(tmp_path):
    """transformers' default is device_map=None, and code that forwards its own ``device_map=args.device_map``
    passes it: it means no map (the model stays where it is built), as leaving it out does; it was
    refused as "splits a model over devices". An empty map is refused by transformers too (it asks
    for accelerate, or accelerate's lookup fails with KeyError ''): here a ValueError saying so."""
    tiny = "tests/data/tiny_hub"
    model = BertModel.from_pretrained(tiny, device_map=None, torch_dtype=None)
    assert model.device.type == "cpu"
    assert BertModel.from_pretrained(tiny, device_map=None, device="cpu").device.type == "cpu"
    with pytest.raises(ValueError, match=re.escape("device_map={} names no device")):
        BertModel.from_pretrained(tmp_path / "never read", device_map={})


@pytest.mark.parametrize("device_map", [{"embeddings": "cpu", "encoder": "cpu", "pooler": "cpu"},
                                        {"embeddings": "cpu", "encoder": "cpu:0", "pooler": -1},
                                        "balanced", "balanced_low_0", "sequential", " auto"])  # fmt: skip
def test_a_device_map_on_one_device_loads_where_transformers_loads_it(device_map):
    """A map of modules that all name one device, and transformers' placement strategies, put the
    whole model on one device in transformers where torch sees one GPU or none (accelerate's
    get_balanced_memory: low_zero needs two): minibert takes them. The map was refused as one that
    "splits a model over devices", and the strategies as bad device names. (-1 and "cpu:0" are
    minibert's CPU: transformers is given "cpu".)"""
    tiny = "tests/data/tiny_hub"
    ours = BertModel.from_pretrained(tiny, device_map=device_map).device
    reference = dict.fromkeys(device_map, "cpu") if isinstance(device_map, dict) else device_map.strip()
    theirs = transformers.BertModel.from_pretrained(tiny, device_map=reference).device
    assert ours == theirs, (device_map, ours, theirs)


def test_a_device_map_over_several_devices_is_refused_naming_them(monkeypatch, tmp_path):
    """A map naming two devices is refused with the devices it names; a strategy where torch sees
    several GPUs (transformers places the model over them by its own plan) is refused as what it is, and "auto",
    minibert's own, is left as it was: before a file is read."""
    missing = tmp_path / "never read"
    with pytest.raises(ValueError, match=re.escape("splits a model over devices (cpu, cuda:0, cuda:1); minibert")):
        BertModel.from_pretrained(missing, device_map={"embeddings": "cpu", "encoder": 0, "pooler": "cuda:1"})
    with pytest.raises(ValueError, match=re.escape("a map's values are devices ('cpu', 0, 'cuda:1'), not 'auto'")):
        BertModel.from_pretrained(missing, device_map={"": "auto"})  # (transformers: not a device name)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    for strategy in ("balanced", "balanced_low_0", "sequential"):
        with pytest.raises(ValueError, match=re.escape(f"device_map={strategy!r} is transformers' placement "
                                                       "strategy over the 2 GPUs torch sees here")):  # fmt: skip
            BertModel.from_pretrained(missing, device_map=strategy)


def test_cache_dir_and_token_reach_the_hub(minilm_dir, tmp_path):
    """cache_dir= puts the download there (not in HF_HOME), token= is sent: a loopback hub sees both."""
    sys.path.insert(0, os.path.dirname(__file__))
    from hub_server import HubServer

    code = (
        "import sys, minibert\n"
        "m = minibert.BertModel.from_pretrained('some-org/some-bert', cache_dir=sys.argv[1], token='hf_test')\n"
        "t = minibert.BertTokenizer.from_pretrained('some-org/some-bert', cache_dir=sys.argv[1])\n"
        "print(m.config.hidden_size, len(t))\n"
    )
    with HubServer({"some-org/some-bert": minilm_dir}) as hub:
        env = hub.environment(tmp_path / "hf")
        run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "mine")], env=env, capture_output=True,
                             text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["384", "30522"]
    assert list((tmp_path / "mine").glob("models--some-org--some-bert/snapshots/*/model.safetensors"))
    assert not (tmp_path / "hf" / "hub").exists(), "cache_dir= must replace the standard cache"
    assert hub.authorizations and all(value == "Bearer hf_test" for value in hub.authorizations["model.safetensors"])


def test_cross_encoder_takes_torch_modules_as_activation(minilm_dir):
    """sentence-transformers' documented form, activation_fn=torch.nn.Identity(), and the class itself."""
    rerank = importlib.import_module("minibert.tasks.rerank")
    assert rerank._activation(torch.nn.Identity(), {}, 1, "") == "torch.nn.modules.linear.Identity"
    assert rerank._activation(torch.nn.Sigmoid, {}, 1, "") == "torch.nn.modules.activation.Sigmoid"
    with pytest.raises(ValueError, match="activation_fn must be one of"):
        rerank._activation(torch.nn.ReLU(), {}, 1, "")


@pytest.mark.parametrize("texts", [None, 5, b"bytes", ["fine", 3]])
def test_embed_names_what_is_not_a_text(minilm_dir, texts):
    embedder = Embedder.from_pretrained(minilm_dir)
    with pytest.raises(TypeError, match="texts must be a str or a sequence of str"):
        embedder.embed(texts)



def _saved_as(directory, saved_dtype, config_dtype, kind="safetensors"):
    """A tiny checkpoint whose weights are stored in ``saved_dtype`` and whose config.json names
    ``config_dtype`` in transformers 5's ``dtype`` field (None: no field, as minibert and older tools save)."""
    torch.manual_seed(0)
    model = transformers.BertModel(_config()).to(saved_dtype).eval()
    _saved(model, directory)
    config = json.loads((directory / "config.json").read_text())
    config.pop("dtype", None), config.pop("torch_dtype", None)
    if config_dtype is not None:
        config["dtype"] = config_dtype
    (directory / "config.json").write_text(json.dumps(config))
    if kind == "bin":
        torch.save(safetensors_torch.load_file(str(directory / "model.safetensors")), directory / "pytorch_model.bin")
        (directory / "model.safetensors").unlink()
    return directory


@pytest.mark.parametrize(("saved_dtype", "config_dtype", "kind"), [
    (torch.float32, "float32", "safetensors"),      # all-MiniLM-L6-v2's case
    (torch.bfloat16, None, "safetensors"),          # no config field: the weights' type
    (torch.float16, None, "bin"),
    (torch.float32, "float16", "safetensors"),      # the config's field wins over the weights
])  # fmt: skip
def test_dtype_auto_is_the_checkpoints_own_as_in_transformers(tmp_path, saved_dtype, config_dtype, kind):
    """``dtype="auto"`` / ``torch_dtype="auto"`` (model cards' and scripts' spelling) loads the type the
    checkpoint was saved in, as transformers does; it was minibert's speed choice (bfloat16 where
    measured faster: 0.14 off transformers' float32 on MiniLM), which is now ``dtype="fastest"``."""
    directory = _saved_as(tmp_path / "model", saved_dtype, config_dtype, kind)
    expected = transformers.BertModel.from_pretrained(directory, dtype="auto").dtype
    assert expected == (getattr(torch, config_dtype) if config_dtype else saved_dtype)  # the reference's own rule
    assert BertModel.from_pretrained(directory, dtype="auto").dtype == expected
    assert BertModel.from_pretrained(directory, torch_dtype="auto").dtype == expected


def test_dtype_auto_with_a_config_dtype_that_is_no_float_is_named(tmp_path):
    directory = _saved_as(tmp_path / "model", torch.float32, "int64")
    with pytest.raises(CheckpointError, match=r"config.json: dtype 'int64' is not a floating-point torch dtype"):
        BertModel.from_pretrained(directory, dtype="auto")


@pytest.mark.parametrize("names", ["transformers' state_dict()", "Google's (gamma, beta)", "minibert's own"])
@pytest.mark.parametrize("kind", ["BertModel", "BertForPreTraining"])
def test_load_state_dict_takes_transformers_and_googles_names(tmp_path, names, kind):
    """``model.load_state_dict(torch.load("pytorch_model.bin"))``, a fine-tuning script's habit: minibert's module
    names are not transformers', so a transformers state dict was refused with torch's key error, and with
    strict=False loaded nothing, silently (every key missing and unexpected, the model unchanged). The keys are
    now renamed by the table from_pretrained reads: strict loads, and the model computes transformers' numbers."""
    import minibert

    torch.manual_seed(0)
    theirs = getattr(transformers, kind)(_config()).eval()
    state = theirs.state_dict()
    if names.startswith("Google"):  # the hub's oldest files: LayerNorm.gamma / .beta, every tensor under bert.
        google = {r"LayerNorm\.weight$": "LayerNorm.gamma", r"LayerNorm\.bias$": "LayerNorm.beta"}
        for pattern, name in google.items():
            state = {re.sub(pattern, name, key): value for key, value in state.items()}
        state = {("" if key.startswith(("bert.", "cls.")) else "bert.") + key: value for key, value in state.items()}
    torch.save(state, tmp_path / "pytorch_model.bin")
    ours = getattr(minibert, kind)(_our_config()).eval()  # fresh weights of its own
    if names == "minibert's own":
        ours.load_state_dict(state)
        torch.save(ours.state_dict(), tmp_path / "pytorch_model.bin")
        ours = getattr(minibert, kind)(_our_config()).eval()
    loaded = ours.load_state_dict(torch.load(tmp_path / "pytorch_model.bin"))
    assert not loaded.missing_keys and not loaded.unexpected_keys
    with torch.no_grad():
        mine, reference = ours(IDS), theirs(IDS)
    for field in ("last_hidden_state", "pooler_output", "prediction_logits", "seq_relationship_logits"):
        if field in reference:
            assert _max_delta(mine[field], reference[field]) <= BOUND, f"{field} after load_state_dict ({names})"
    fresh = getattr(minibert, kind)(_our_config())
    loaded = fresh.load_state_dict(theirs.state_dict(), strict=False)  # nothing left unloaded, quietly
    assert not loaded.missing_keys and not loaded.unexpected_keys


def test_load_state_dict_still_names_what_does_not_fit():
    """A key the rename table does not know stays as given: torch reports it (strict), or returns it."""
    import minibert

    ours = minibert.BertModel(_our_config())
    state = dict(transformers.BertModel(_config()).state_dict(), **{"encoder.layer.0.extra.weight": torch.zeros(1)})
    with pytest.raises(RuntimeError, match="Unexpected key.*encoder.layer.0.extra.weight"):
        ours.load_state_dict(state)
    assert ours.load_state_dict(state, strict=False).unexpected_keys == ["encoder.layer.0.extra.weight"]
    masked_lm = minibert.BertForMaskedLM(_our_config())
    state = transformers.BertForMaskedLM(_config()).state_dict()
    state["cls.predictions.decoder.weight"] = state["cls.predictions.decoder.weight"] + 0.5  # untied: not BERT's
    with pytest.raises(CheckpointError, match="cls.predictions.decoder.weight differs from .* untied"):
        masked_lm.load_state_dict(state)


def test_load_state_dict_renames_nothing_in_minibert_own_dict_of_another_class():
    """A head model's own dict given to BertModel (names with "bert."): a few of them
    (bert.embeddings.word_embeddings.weight) read as transformers' names too. Renaming those alone
    loaded the embeddings and the pooler and no layer, quietly with strict=False: now nothing is
    renamed, and torch reports every key, as for any module."""
    import minibert

    ours = minibert.BertModel(_our_config())
    state = minibert.BertForSequenceClassification(_our_config()).state_dict()
    loaded = ours.load_state_dict(state, strict=False)
    assert len(loaded.missing_keys) == len(ours.state_dict())
    assert sorted(loaded.unexpected_keys) == sorted(state)


def test_the_file_keywords_of_transformers_example_scripts(minilm_dir, tmp_path):
    """run_glue_no_trainer.py loads with ``from_pretrained(path, from_tf=bool(".ckpt" in path),
    config=config)``: a TypeError here, where transformers 5 drops from_tf. So are use_safetensors,
    variant=None, proxies=None and use_cache=False, each a default or a no-op there."""
    reference = BertModel.from_pretrained(minilm_dir)
    for keywords in (dict(from_tf=False), dict(from_tf=True, from_flax=False), dict(use_safetensors=True),
                     dict(use_safetensors=None, variant=None, proxies=None)):  # fmt: skip
        model = BertModel.from_pretrained(minilm_dir, **keywords)
        assert torch.equal(model(IDS).last_hidden_state, reference(IDS).last_hidden_state), keywords
    transformers_model = transformers.BertModel.from_pretrained(str(minilm_dir), use_cache=False)
    uncached = BertModel.from_pretrained(minilm_dir, use_cache=False)
    assert uncached.config.use_cache is False is transformers_model.config.use_cache
    uncached.save_pretrained(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "config.json").read_text())["use_cache"] is False
    bin_only = tmp_path / "bin"  # (transformers 5 saves safetensors whatever it is asked: the .bin by hand)
    transformers.BertModel(_config()).save_pretrained(bin_only)
    state = safetensors_torch.load_file(str(bin_only / "model.safetensors"))
    torch.save(state, bin_only / "pytorch_model.bin")
    (bin_only / "model.safetensors").unlink()
    with pytest.raises(OSError):  # (transformers refuses a .bin folder under use_safetensors=True too)
        transformers.BertModel.from_pretrained(str(bin_only), use_safetensors=True)
    with pytest.raises(CheckpointError, match=r"use_safetensors=True, but the checkpoint.s weights are .*\.bin"):
        BertModel.from_pretrained(bin_only, use_safetensors=True)
    refused = [(dict(use_safetensors=False), ValueError, "use_safetensors=False"),
               (dict(variant="fp16"), ValueError, r"variant='fp16' .* model\.fp16\.safetensors"),
               (dict(proxies={"https": "x"}), ValueError, "HTTPS_PROXY"),
               (dict(from_tf="yes"), TypeError, "from_tf must be True or False"),
               (dict(use_cache="no"), TypeError, "use_cache must be True or False")]  # fmt: skip
    for keywords, kind, message in refused:
        with pytest.raises(kind, match=message):
            BertModel.from_pretrained(minilm_dir, **keywords)
