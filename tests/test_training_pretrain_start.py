"""What a `minibert pretrain` run starts from, as Google's run_pretraining.py starts: random weights of
`--config` drawn for every row of every table, the [PAD] row too (Google's embedding has no padding
row; transformers zeros it), the pad_token_id of `--vocab`'s [PAD] in the run's config.json, and
the tokenizer of `--init`, which a `--vocab` or `--cased` may repeat but not replace (a checkpoint
without a tokenizer takes `--vocab`'s).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from helpers import run_minibert
from random_instances import random_instances, write_instances

TINY = Path("tests/data/tiny_hub")  # vocab_size 111 ([PAD] [UNK] [CLS] [SEP] [MASK] first), do_lower_case true
PIECES = (TINY / "vocab.txt").read_text(encoding="utf-8").splitlines()
STD = 0.02  # tiny_hub's initializer_range


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    return write_instances(folder / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=3))


def pretrain(data: Path, output: Path, *flags: str):
    return run_minibert("pretrain", "--data", str(data), "--output", str(output), "--steps", "1", "--batch-size",
                        "4", "--warmup-steps", "1", *flags)  # fmt: skip


def one_line_error(result, code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("minibert: error:"), result.stderr
    return lines[0]


def write_vocab(path: Path, first: list[str]) -> Path:
    """A vocabulary of tiny_hub's size whose special tokens come first in the order given."""
    rest = [piece for piece in PIECES if piece not in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")]
    path.write_text("".join(f"{piece}\n" for piece in [*first, *rest][: len(PIECES)]), encoding="utf-8")
    return path


def test_a_run_from_a_config_draws_every_row_and_its_recipe_draws_them_again(data, tmp_path):
    """Every embedding row is drawn, [PAD]'s too, as Google's embedding has no padding row (transformers
    zeros it). The one update of a run whose warmup gives it rate 0 changes nothing, so the run's
    weights are its first ones; and, as docs/pretraining.md says, torch.manual_seed(12345) before
    BertForPreTraining(config) draws them again."""
    from minibert import BertConfig, BertForPreTraining

    result = pretrain(data, tmp_path / "run", "--config", str(TINY / "config.json"), "--vocab", str(TINY / "vocab.txt"))
    assert result.returncode == 0, result.stderr
    weights = load_file(tmp_path / "run" / "model.safetensors")
    drawn = {name: tensor for name, tensor in weights.items() if name.endswith("weight") and "LayerNorm" not in name}
    values = torch.cat([tensor.flatten() for tensor in drawn.values()])  # ~20,000 values
    # the sample's deviation: within 6 standard errors (≈ 1/√(2n) ≈ 0.5% each) of initializer_range
    assert float(values.std()) / STD == pytest.approx(1.0, abs=0.03)
    row = weights["bert.embeddings.word_embeddings.weight"][0]  # [PAD]: drawn (transformers zeros it)
    assert bool((row != 0).all())

    torch.manual_seed(12345)  # pretrain's default --seed
    recipe = BertForPreTraining(BertConfig.from_json_file(TINY / "config.json")).state_dict()
    ours = BertForPreTraining.from_pretrained(tmp_path / "run").state_dict()
    assert all(torch.equal(recipe[name], ours[name]) for name in ours)


def test_the_runs_pad_token_id_is_that_of_the_vocabularys_pad(data, tmp_path):
    """`minibert vocab --special-tokens` puts [PAD] anywhere or nowhere. A config.json without
    pad_token_id (BertConfig's default: 0) gave the run's config.json 0 whatever --vocab said: a model
    whose transformers embedding freezes the [MASK] or [UNK] row. It now takes --vocab's [PAD] (null
    without one), and a config.json naming another id is refused."""
    config = json.loads((TINY / "config.json").read_text())
    del config["pad_token_id"]
    unnamed = tmp_path / "config.json"
    unnamed.write_text(json.dumps(config))
    mask_first = write_vocab(tmp_path / "mask_first.txt", ["[MASK]", "[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    no_pad = write_vocab(tmp_path / "no_pad.txt", ["[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    for vocab, expected in [(mask_first, 1), (no_pad, None), (TINY / "vocab.txt", 0)]:
        output = tmp_path / f"run-{vocab.stem}"
        result = pretrain(data, output, "--config", str(unnamed), "--vocab", str(vocab))
        assert result.returncode == 0, result.stderr
        assert json.loads((output / "config.json").read_text())["pad_token_id"] == expected, vocab

    line = one_line_error(pretrain(data, tmp_path / "refused", "--config", str(TINY / "config.json"), "--vocab",
                                   str(mask_first)), 1)  # fmt: skip
    assert (f"--config {TINY / 'config.json'}: pad_token_id is 0, '[MASK]' in --vocab {mask_first}, whose [PAD] is "
            'id 1: give "pad_token_id": 1, or leave it out') in line, line
    assert not (tmp_path / "refused").exists()


def test_init_with_a_tokenizer_refuses_another_vocabulary_or_casing(data, tmp_path):
    """--vocab and --cased were dropped with --init: the run trained and saved the checkpoint's
    tokenizer while the instances' ids meant --vocab's pieces. Now another vocabulary, or --cased
    where the checkpoint lowercases, is a usage error naming both; the same vocabulary is taken."""
    swapped = list(PIECES)
    swapped[40], swapped[41] = swapped[41], swapped[40]
    other = tmp_path / "other.txt"
    other.write_text("".join(f"{piece}\n" for piece in swapped), encoding="utf-8")
    line = one_line_error(pretrain(data, tmp_path / "a", "--init", str(TINY), "--vocab", str(other)), 2)
    assert (f"--vocab {other} is not the vocabulary of --init {TINY}'s tokenizer (id 40: {swapped[40]!r} in --vocab, "
            f"{PIECES[40]!r} in the checkpoint's)") in line, line
    line = one_line_error(pretrain(data, tmp_path / "b", "--init", str(TINY), "--cased"), 2)
    assert f"--cased: --init {TINY}'s tokenizer lowercases" in line, line
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    same = pretrain(data, tmp_path / "same", "--init", str(TINY), "--vocab", str(TINY / "vocab.txt"))
    assert same.returncode == 0, same.stderr


def test_init_without_a_tokenizer_takes_the_vocabulary_given(data, tmp_path):
    """A checkpoint of config.json and weights alone was refused even with --vocab ("has neither
    vocab.txt nor tokenizer.json"); it now trains with --vocab's tokenizer (and --cased), and
    without --vocab the message says to give it."""
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(TINY / name, bare / name)
    vocab = write_vocab(tmp_path / "vocab.txt", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    result = pretrain(data, tmp_path / "run", "--init", str(bare), "--vocab", str(vocab), "--cased")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "vocab.txt").read_text(encoding="utf-8") == vocab.read_text(encoding="utf-8")
    assert json.loads((tmp_path / "run" / "tokenizer_config.json").read_text())["do_lower_case"] is False
    line = one_line_error(pretrain(data, tmp_path / "none", "--init", str(bare)), 1)
    assert f"--init {bare} has neither vocab.txt nor tokenizer.json: give --vocab" in line, line
    larger = tmp_path / "larger.txt"
    larger.write_text(vocab.read_text(encoding="utf-8") + "extra\n", encoding="utf-8")
    line = one_line_error(pretrain(data, tmp_path / "larger", "--init", str(bare), "--vocab", str(larger)), 1)
    assert "vocab_size is 111" in line, line


def test_a_flag_conflict_is_the_librarys_one_check_said_as_a_usage_error(data, tmp_path, monkeypatch):
    """The command checked the flags itself before the run (and loaded --init's tokenizer for it), then
    the library checked them again and loaded it again. Now the library's check is the only one: its
    FlagConflictError, a DataError from Python, is what the command says with exit 2; the tokenizer
    is loaded once."""
    from minibert.errors import DataError, FlagConflictError
    from minibert.tokenizer import BertTokenizer
    from minibert.training import PretrainOptions
    from minibert.training import pretrain as train

    swapped = list(PIECES)
    swapped[40], swapped[41] = swapped[41], swapped[40]
    other = tmp_path / "other.txt"
    other.write_text("".join(f"{piece}\n" for piece in swapped), encoding="utf-8")
    options = PretrainOptions(data=[str(data)], output=str(tmp_path / "python"), steps=1, batch_size=4,
                              warmup_steps=1, init=str(TINY), vocab=str(other))  # fmt: skip
    with pytest.raises(FlagConflictError, match=f"--vocab {other} is not the vocabulary of --init") as raised:
        train(options)
    assert isinstance(raised.value, DataError) and not (tmp_path / "python").exists()
    loads = []
    real = BertTokenizer.from_pretrained.__func__
    monkeypatch.setattr(BertTokenizer, "from_pretrained",
                        classmethod(lambda cls, *a, **k: loads.append(a[0]) or real(cls, *a, **k)))  # fmt: skip
    line = one_line_error(pretrain(data, tmp_path / "refused", "--init", str(TINY), "--vocab", str(other)), 2)
    assert "is not the vocabulary of --init" in line and loads == [str(TINY)], (line, loads)
    loads.clear()
    same = pretrain(data, tmp_path / "same", "--init", str(TINY), "--vocab", str(TINY / "vocab.txt"))
    assert same.returncode == 0 and loads == [str(TINY)], (same.stderr, loads)
