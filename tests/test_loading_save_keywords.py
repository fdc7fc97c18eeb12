"""``save_pretrained`` takes transformers' keywords where minibert honours them (issue r19 learner,
item 3: ``safe_serialization=True``, which is what minibert does anyway, and run_glue_no_trainer.py's
``is_main_process=..., save_function=accelerator.save`` were Python's bare TypeError).

Each is compared with transformers 5 saving the same weights: ``is_main_process=False`` writes what
it writes (nothing), ``state_dict=`` the same tensors under the same names, ``max_shard_size`` the
same shards and index. What minibert cannot honour (``safe_serialization=False``, ``push_to_hub=True``,
any other keyword) is refused with what it takes; the tokenizer's ``legacy_format`` likewise."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import minibert
from tiny_hub import TINY

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A small classifier in each library, with the same weights (minibert's saved, transformers' loaded)."""
    folder = tmp_path_factory.mktemp("classifier")
    torch.manual_seed(0)
    minibert.BertForSequenceClassification.from_pretrained(TINY, new_heads=True, num_labels=2).save_pretrained(folder)
    ours = minibert.BertForSequenceClassification.from_pretrained(folder)
    theirs = transformers.BertForSequenceClassification.from_pretrained(folder)
    return ours, theirs


def _tensors(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's weights files (one file, or the shards)."""
    found = {}
    for path in sorted(folder.glob("*.safetensors")):
        tensors = load_file(path)
        assert not tensors.keys() & found.keys(), path  # each tensor in one file
        found.update(tensors)
    return found


def _same_tensors(ours: Path, theirs: Path) -> None:
    mine, reference = _tensors(ours), _tensors(theirs)
    assert sorted(mine) == sorted(reference)
    for name, tensor in reference.items():
        assert mine[name].dtype == tensor.dtype and torch.equal(mine[name], tensor), name


def test_the_reviewers_keywords_are_taken_and_save_what_a_plain_save_saves(models, tmp_path):
    ours, _ = models
    ours.save_pretrained(tmp_path / "plain")
    ours.save_pretrained(tmp_path / "safe", safe_serialization=True)
    ours.save_pretrained(tmp_path / "accelerate", is_main_process=True, save_function=torch.save, push_to_hub=False)
    for folder in ("safe", "accelerate"):
        assert sorted(p.name for p in (tmp_path / folder).iterdir()) == ["config.json", "model.safetensors"]
        saved = (tmp_path / folder / "model.safetensors").read_bytes()
        assert saved == (tmp_path / "plain" / "model.safetensors").read_bytes()


def test_not_the_main_process_writes_nothing_as_transformers(models, tmp_path):
    ours, theirs = models
    ours.save_pretrained(tmp_path / "ours", is_main_process=False)
    theirs.save_pretrained(tmp_path / "theirs", is_main_process=False)
    assert [p.name for p in (tmp_path / "ours").iterdir()] == [p.name for p in (tmp_path / "theirs").iterdir()] == []


def test_a_state_dict_is_saved_in_place_of_the_models_as_transformers(models, tmp_path):
    ours, theirs = models
    mine = {name: tensor.clone() for name, tensor in ours.state_dict().items()}
    reference = {name: tensor.clone() for name, tensor in theirs.state_dict().items()}
    for state in (mine, reference):
        state["classifier.weight"].fill_(0.25)
    ours.save_pretrained(tmp_path / "ours", state_dict=mine)
    theirs.save_pretrained(tmp_path / "theirs", state_dict=reference)
    names = [sorted(p.name for p in (tmp_path / side).iterdir()) for side in ("ours", "theirs")]
    assert names[0] == names[1]
    _same_tensors(tmp_path / "ours", tmp_path / "theirs")
    loaded = minibert.BertForSequenceClassification.from_pretrained(tmp_path / "ours")
    assert torch.equal(loaded.classifier.weight, torch.full_like(loaded.classifier.weight, 0.25))
    with pytest.raises(ValueError, match=r"state_dict holds \['encoder.layer.0.output.dense.weight'\].*minibert's"):
        ours.save_pretrained(tmp_path / "bad", state_dict={"encoder.layer.0.output.dense.weight": torch.zeros(1)})


@pytest.mark.parametrize("size", ["20KB", 30_000])
def test_shards_as_transformers_writes_them(models, tmp_path, size):
    """The same layout (shards named model-0000k-of-0000n, an index of every tensor's shard and the
    total size), each shard within the size (huggingface_hub's split, which transformers calls); the
    same tensors in all. Which shard holds which tensor follows each library's tensor order."""
    ours, theirs = models
    ours.save_pretrained(tmp_path / "ours", max_shard_size=size)
    theirs.save_pretrained(tmp_path / "theirs", max_shard_size=size)
    _same_tensors(tmp_path / "ours", tmp_path / "theirs")
    index, reference = (json.loads((tmp_path / side / "model.safetensors.index.json").read_text())
                        for side in ("ours", "theirs"))  # fmt: skip
    assert index["metadata"] == reference["metadata"]  # total_size, and transformers' total_parameters
    shards = sorted(p.name for p in (tmp_path / "ours").glob("model-*-of-*.safetensors"))
    assert len(shards) > 1 and sorted(set(index["weight_map"].values())) == shards
    for shard in shards:
        held = load_file(tmp_path / "ours" / shard)
        assert sorted(held) == sorted(name for name, file in index["weight_map"].items() if file == shard)
        limit = size if isinstance(size, int) else 20_000
        assert sum(t.numel() * t.element_size() for t in held.values()) <= limit or len(held) == 1
    for library, model in ((minibert, ours), (transformers, theirs)):  # each library loads the shards: its weights
        loaded = library.BertForSequenceClassification.from_pretrained(tmp_path / "ours").state_dict()
        assert loaded.keys() == model.state_dict().keys(), library.__name__
        assert all(torch.equal(loaded[name], tensor) for name, tensor in model.state_dict().items()), library.__name__


def test_a_save_removes_the_other_layouts_files(models, tmp_path):
    """Shards over one file, then one file over shards: no stale weights a loader would prefer."""
    ours, _ = models
    ours.save_pretrained(tmp_path, max_shard_size="20KB")
    changed = {name: tensor.clone() for name, tensor in ours.state_dict().items()}
    changed["classifier.bias"].fill_(3.0)
    ours.save_pretrained(tmp_path, max_shard_size="30KB", state_dict=changed)
    assert not (tmp_path / "model.safetensors").exists()
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert sorted(p.name for p in tmp_path.glob("model-*.safetensors")) == sorted(set(index["weight_map"].values()))
    assert minibert.BertForSequenceClassification.from_pretrained(tmp_path).classifier.bias.tolist() == [3.0, 3.0]
    ours.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    assert torch.equal(minibert.BertForSequenceClassification.from_pretrained(tmp_path).classifier.bias,
                       ours.classifier.bias)  # fmt: skip


@pytest.mark.parametrize(("keywords", "error", "message"), [
    ({"safe_serialization": False}, ValueError, r"pytorch_model.bin, and minibert writes model.safetensors only"),
    ({"push_to_hub": True}, ValueError, r"does not upload.*huggingface_hub.upload_folder"),
    ({"variant": "fp16"}, TypeError, r"unexpected keyword arguments \['variant'\]; .*is_main_process, state_dict, "
                                     r"max_shard_size, safe_serialization=True, push_to_hub=False and save_function"),
    ({"is_main_process": "yes"}, TypeError, r"is_main_process must be True or False"),
    ({"max_shard_size": "big"}, ValueError, r"max_shard_size='big' is not a size"),
    ({"max_shard_size": 0}, ValueError, r"max_shard_size=0 is not a size"),
    ({"max_shard_size": "infGB"}, ValueError, r"max_shard_size='infGB' is not a size"),  # (was OverflowError)
    ({"max_shard_size": "nanGB"}, ValueError, r"max_shard_size='nanGB' is not a size"),
    ({"max_shard_size": "-5GB"}, ValueError, r"max_shard_size='-5GB' is not a size"),
    ({"max_shard_size": "0.0001KB"}, ValueError, r"max_shard_size='0.0001KB' is not a size"),  # under a byte
    ({"max_shard_size": True}, ValueError, r"max_shard_size=True is not a size"),
    ({"state_dict": [1]}, TypeError, r"state_dict must be a dict of tensors"),
])  # fmt: skip
def test_what_minibert_cannot_honour_is_refused_saying_what_it_takes(models, tmp_path, keywords, error, message):
    with pytest.raises(error, match=message):
        models[0].save_pretrained(tmp_path / "out", **keywords)
    assert not (tmp_path / "out").exists()


def test_a_shard_size_is_read_in_decimal_units_as_huggingface_hub_reads_it():
    """What the split is given, in bytes (huggingface_hub's units are powers of 1000; its default, and
    transformers 5's, "50GB")."""
    from minibert.loading.save_pretrained import SaveOptions, save_options

    cases = {"5GB": 5_000_000_000, " 0.5 mb": 500_000, "20 KB": 20_000, "1TB": 10**12, "0.001KB": 1, 30_000: 30_000}
    assert {size: save_options({"max_shard_size": size}).max_shard_size for size in cases} == cases
    assert save_options({}).max_shard_size == SaveOptions().max_shard_size == 50_000_000_000


def test_the_refusals_claims_of_transformers_hold(models, tmp_path):
    """safe_serialization=False: transformers 5 writes model.safetensors all the same; the upload
    named is huggingface_hub's function, with those keywords."""
    import inspect

    import huggingface_hub

    models[1].save_pretrained(tmp_path, safe_serialization=False)
    assert (tmp_path / "model.safetensors").exists() and not (tmp_path / "pytorch_model.bin").exists()
    assert {"repo_id", "folder_path"} <= set(inspect.signature(huggingface_hub.upload_folder).parameters)


def test_the_tokenizers_keywords(tmp_path, caplog):
    tokenizer = minibert.BertTokenizer.from_pretrained(TINY)
    plain = tokenizer.save_pretrained(tmp_path / "plain")
    for keywords in ({"legacy_format": True}, {"legacy_format": None, "push_to_hub": False}):
        folder = tmp_path / str(len(keywords))
        files = tokenizer.save_pretrained(folder, **keywords)
        assert [Path(name).name for name in files] == [Path(name).name for name in plain]
        assert all((folder / Path(n).name).read_bytes() == Path(n).read_bytes() for n in plain)
    with pytest.raises(ValueError, match=r"legacy_format=False asks for tokenizer.json alone"):
        tokenizer.save_pretrained(tmp_path / "x", legacy_format=False)
    with pytest.raises(TypeError, match=r"\['filename_prefix'\]; .*legacy_format \(None or True\) and push_to_hub"):
        tokenizer.save_pretrained(tmp_path / "x", filename_prefix="mine")
    with pytest.raises(ValueError, match=r"does not upload"):
        tokenizer.save_pretrained(tmp_path / "x", push_to_hub=True)
    assert not (tmp_path / "x").exists()
    with caplog.at_level(logging.WARNING):  # the saved folder loads in transformers
        assert transformers.AutoTokenizer.from_pretrained(tmp_path / "1")("hello")["input_ids"] == tokenizer("hello")[
            "input_ids"]  # fmt: skip


def test_a_model_quantized_by_torch_ao_is_refused_naming_what_cannot_be_saved(tmp_path):
    """torch's quantize_dynamic leaves packed parameters and a dtype in the state dict: saving said
    "AttributeError: 'torch.dtype' object has no attribute 'detach'". It names the entry and what to do."""
    model = minibert.BertModel.from_pretrained(TINY, gemm="mkl")  # (oneDNN's layers are not nn.Linear's type)
    quantized = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    with pytest.raises(ValueError, match=r"save_pretrained: layers\.0\.attention\.query\._packed_params\.\S+ is a "
                       r".*quantize_dynamic.*before quantizing"):  # fmt: skip
        quantized.save_pretrained(tmp_path / "out")
    assert not list((tmp_path / "out").glob("*.safetensors")) and not (tmp_path / "out" / "config.json").exists()
