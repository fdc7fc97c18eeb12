"""Google's TensorFlow checkpoints, read without TensorFlow (minibert/tf_checkpoint.py).

The fixtures in tests/data were written by real TensorFlow 2.21 (tf.compat.v1.train.Saver, the
layout of Google's zips), with scripts/make_tf_checkpoint.py:

* ``tiny_hub``: a random 2-layer BertForPreTraining (H=32, 2 heads, F=37, 111-piece vocabulary)
  made with transformers and saved in the hub's layout (Google dialect: ``bert.``, gamma/beta, cls.*);
* ``uncased_L-2_H-32_A-2``: the same weights as TensorFlow wrote them (``--adam``: with the Adam
  slots and global_step of a pre-training checkpoint), beside Google's bert_config.json and vocab.txt;
* ``tf2_object_checkpoint``, ``not_bert`` (``--foreign``): checkpoints minibert must refuse.

The reference for every number is transformers loading ``tiny_hub``. Where TensorFlow is installed
(``MINIBERT_TF_PYTHON`` names a Python that has it, or this one does), the full-size tests write
checkpoints of the real all-MiniLM-L6-v2 and of a bert-base-shaped model with TensorFlow and compare
the same way.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tf_reference
from helpers import assert_close, compare_outputs, exact_reference, run_with_body
from minibert import BertForPreTraining, BertModel, BertTokenizer, CheckpointError, Embedder
from minibert.formats.crc32c import crc32c, mask, unmask
from minibert.loading.names import checkpoint_to_minibert
from minibert.loading.tf_checkpoint import read_index, read_tf_checkpoint
from minibert.tokenizer import google_lower_case
from tiny_hub import TINY as HUB_DIR

transformers = pytest.importorskip("transformers")

DATA = Path(__file__).parent / "data"
GOOGLE_DIR = DATA / "uncased_L-2_H-32_A-2"
SCRIPT = Path(__file__).parent.parent / "scripts" / "make_tf_checkpoint.py"
TEXTS = ["i love paris", "the bank robber was thirsty and drank water", "un want ed runn ing !", "money in the bank"]


def _batch(directory, texts=TEXTS):
    return BertTokenizer.from_pretrained(directory)(texts, padding=True, return_tensors="pt")


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


@pytest.fixture(scope="module")
def reference():
    return transformers.BertForPreTraining.from_pretrained(str(HUB_DIR), attn_implementation="eager").eval()


def compare_pretraining(model, reference, batch, label: str) -> dict:
    """Every hidden state, the pooler, masked-LM and NSP logits, on real tokens. ``reference`` is a
    transformers model, or a run of one on ``batch`` (``.output``, ``.body``). Each model runs
    once: its body's own output (last hidden state, pooler, hidden states) is taken by a hook on
    ``.bert`` as the heads' forward calls it (helpers.run_with_body)."""
    ours, ours_body = run_with_body(model, batch, output_hidden_states=True)
    if hasattr(reference, "body"):  # its outputs on this batch, already computed (conftest.google_base_run)
        theirs, theirs_body = reference.output, reference.body
    else:
        theirs, theirs_body = run_with_body(reference, batch, output_hidden_states=True)
    report = compare_outputs(ours_body, theirs_body, batch["attention_mask"], label)
    real = batch["attention_mask"].bool()
    report["mlm"] = assert_close(ours.prediction_logits[real], theirs.prediction_logits[real], f"{label} MLM logits")
    report["nsp"] = assert_close(ours.seq_relationship_logits, theirs.seq_relationship_logits, f"{label} NSP logits")
    print(f"{label}: heads max |Δ| mlm {report['mlm']:.1e}, nsp {report['nsp']:.1e}")
    return report


# ----------------------------------------------------------------------------- the format


def test_crc32c_matches_a_bitwise_reference():
    def bitwise(data: bytes) -> int:  # the CRC32C definition, one bit at a time
        crc = 0xFFFFFFFF
        for byte in data:
            crc ^= byte
            for _ in range(8):
                crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        return crc ^ 0xFFFFFFFF

    generator = torch.Generator().manual_seed(0)
    for length in [0, 1, 3, 4, 5, 63, 64, 65, 1000, 4099, 70_001, 262_147]:
        data = bytes(torch.randint(0, 256, (length,), generator=generator, dtype=torch.uint8).tolist())
        assert crc32c(data) == bitwise(data), length
    assert crc32c(b"123456789") == 0xE3069283  # the published check value
    assert all(unmask(mask(value)) == value for value in (0, 1, 0xE3069283, 0xFFFFFFFF))


def test_index_lists_every_variable_with_its_shape():
    entries, num_shards = read_index(GOOGLE_DIR / "bert_model.ckpt")
    assert num_shards == 1
    query = entries["bert/encoder/layer_1/attention/self/query/kernel"]
    assert query.dtype == torch.float32 and query.shape == (32, 32) and query.crc32c is not None
    assert entries["bert/embeddings/word_embeddings"].shape == (111, 32)
    assert entries["cls/seq_relationship/output_weights"].shape == (2, 32)  # (2, H): not a kernel
    assert entries["global_step"].dtype == torch.int64 and entries["global_step"].shape == ()
    assert sum(name.endswith("/adam_m") for name in entries) == 46  # one per variable


def test_every_google_name_maps_through_the_rename_table():
    entries, _ = read_index(GOOGLE_DIR / "bert_model.ckpt")
    model_names = [name for name in entries if not name.endswith(("/adam_m", "/adam_v")) and name != "global_step"]
    renamed = {name: checkpoint_to_minibert(name) for name in model_names}
    assert None not in renamed.values(), [name for name, ours in renamed.items() if ours is None]
    expected = set(BertForPreTraining(BertModel.from_pretrained(GOOGLE_DIR).config).state_dict())
    assert {
        ours if ours.startswith(("mlm_head", "nsp_head")) else "bert." + ours for ours in renamed.values()
    } == expected
    assert checkpoint_to_minibert("bert/encoder/layer_0/attention/self/query/kernel/adam_m") is None


def test_optimizer_slots_are_not_read(tmp_path):
    """The shards are mapped and only the wanted tensors' bytes are read (their CRC32C checked): the
    optimizer slots, twice the model in a pre-training checkpoint, never are. Shown by breaking every
    slot's bytes: the model still loads, and reading the slots fails their checksums."""
    shutil.copytree(GOOGLE_DIR, tmp_path / "google")
    prefix = tmp_path / "google" / "bert_model.ckpt"
    entries, _ = read_index(prefix)
    data = Path(f"{prefix}.data-00000-of-00001")
    raw = bytearray(data.read_bytes())
    slots = [entry for name, entry in entries.items() if entry is not None and "adam" in name]
    assert len(slots) > 50
    for entry in slots:
        raw[entry.offset : entry.offset + entry.size] = bytes(entry.size)  # zeros: every slot's CRC32C fails
    data.write_bytes(bytes(raw))
    tensors = read_tf_checkpoint(prefix, wanted=lambda name: "adam" not in name)
    assert not any("adam" in name for name in tensors) and "global_step" in tensors
    BertForPreTraining.from_pretrained(tmp_path / "google")
    with pytest.raises(CheckpointError, match="adam_[mv] fails its CRC32C checksum"):
        read_tf_checkpoint(prefix)


# ----------------------------------------------------------------------------- numbers vs transformers


def test_pretraining_model_matches_transformers(reference):
    model = BertForPreTraining.from_pretrained(GOOGLE_DIR)
    compare_pretraining(model, reference, _batch(GOOGLE_DIR), "TF checkpoint (tiny)")


def test_bert_model_and_embedder_from_google_directory(reference):
    batch = _batch(GOOGLE_DIR)
    model = BertModel.from_pretrained(GOOGLE_DIR)
    with torch.no_grad():
        ours = model(**batch, output_hidden_states=True)
        theirs = reference.bert(**batch, output_hidden_states=True)
    compare_outputs(ours, theirs, batch["attention_mask"], "BertModel from TF")
    vectors = Embedder.from_pretrained(GOOGLE_DIR).embed(TEXTS)
    mask_ = batch["attention_mask"].unsqueeze(-1).float()
    expected = (theirs.last_hidden_state * mask_).sum(1) / mask_.sum(1)
    assert_close(vectors, expected, "Embedder mean pooling from TF")


def test_no_tensorflow_is_imported():
    code = (
        "import sys; sys.modules['tensorflow'] = None\n"  # an import of tensorflow would fail
        "from minibert import BertForPreTraining\n"
        f"BertForPreTraining.from_pretrained({str(GOOGLE_DIR)!r})\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in ('tensorflow', 'keras', 'transformers') and sys.modules[m]))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_tokenizer_of_google_directory_infers_lower_case(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="minibert"):
        tokenizer = BertTokenizer.from_pretrained(GOOGLE_DIR)
    assert tokenizer.basic.do_lower_case is True
    assert "says uncased" in caplog.text
    cased = _copy(GOOGLE_DIR, tmp_path / "cased_L-2_H-32_A-2")
    assert BertTokenizer.from_pretrained(cased).basic.do_lower_case is False
    assert google_lower_case("multi_cased_L-12_H-768_A-12", {})[0] is False
    assert google_lower_case("wwm_uncased_L-24_H-1024_A-16", {})[0] is True
    assert google_lower_case("chinese_L-12_H-768_A-12", {"[CLS]": 0, "的": 1})[0] is True  # Google: lowercase


def test_convert_writes_what_transformers_loads_identically(tmp_path, reference):
    from minibert.apps.cli import main

    out = tmp_path / "converted"
    assert main(["convert", str(GOOGLE_DIR), str(out)]) == 0
    assert sorted(path.name for path in out.iterdir()) == [
        "config.json", "model.safetensors", "special_tokens_map.json", "tokenizer_config.json", "vocab.txt"
    ]  # fmt: skip
    converted = transformers.BertForPreTraining.from_pretrained(str(out), attn_implementation="eager").eval()
    batch = _batch(HUB_DIR)
    with torch.no_grad():
        a = converted(**batch, output_hidden_states=True)
        b = reference(**batch, output_hidden_states=True)
    for index, (x, y) in enumerate(zip(a.hidden_states, b.hidden_states)):
        assert_close(x, y, f"converted hidden state {index}", atol=0.0)  # the same float32 weights
    assert_close(a.prediction_logits, b.prediction_logits, "converted MLM logits", atol=0.0)
    assert_close(a.seq_relationship_logits, b.seq_relationship_logits, "converted NSP logits", atol=0.0)
    fast = transformers.AutoTokenizer.from_pretrained(str(out))
    assert fast("I love PARIS")["input_ids"] == BertTokenizer.from_pretrained(HUB_DIR)("I love PARIS")["input_ids"]


def test_convert_refuses_a_non_empty_destination_and_leaves_nothing_on_failure(tmp_path, capsys):
    from minibert.apps.cli import main

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    assert main(["convert", str(GOOGLE_DIR), str(taken)]) == 1
    assert "not an empty directory" in capsys.readouterr().err
    assert (taken / "keep.txt").read_text() == "mine"
    broken = _copy(GOOGLE_DIR, tmp_path / "broken_uncased")
    data = broken / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1000])
    assert main(["convert", str(broken), str(tmp_path / "out")]) == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["broken_uncased", "taken"]  # no partial output


def test_cli_model_accepts_google_directory():
    result = subprocess.run(
        [sys.executable, "-m", "minibert", "embed", "i love paris", "--model", str(GOOGLE_DIR)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "lowercasing, as the name 'uncased_L-2_H-32_A-2' says uncased" in result.stderr
    assert result.stdout.count("embedding") == 1


# ----------------------------------------------------------------------------- broken and foreign files


def _corrupt(tmp_path, edit) -> Path:
    directory = _copy(GOOGLE_DIR, tmp_path / "uncased_corrupt")
    edit(directory)
    return directory


def _flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_flipped_byte_in_a_tensor_does_not_load(tmp_path):
    entries, _ = read_index(GOOGLE_DIR / "bert_model.ckpt")
    entry = entries["bert/encoder/layer_1/output/dense/kernel"]
    directory = _corrupt(
        tmp_path, lambda d: _flip_byte(d / "bert_model.ckpt.data-00000-of-00001", entry.offset + entry.size // 2)
    )
    with pytest.raises(CheckpointError, match=r"data-00000-of-00001: tensor bert/encoder/layer_1/output/dense/kernel "
                                              r"fails its CRC32C checksum"):  # fmt: skip
        BertModel.from_pretrained(directory)


def test_truncated_data_file_names_the_tensor(tmp_path):
    directory = _corrupt(tmp_path, lambda d: (d / "bert_model.ckpt.data-00000-of-00001").write_bytes(
        (GOOGLE_DIR / "bert_model.ckpt.data-00000-of-00001").read_bytes()[:50_000]))  # fmt: skip
    with pytest.raises(CheckpointError, match=r"tensor \S+ \S+ does not fit its byte range .* truncated or corrupt"):
        BertModel.from_pretrained(directory)


@pytest.mark.parametrize("cut", [10, 47, 2000, -1])
def test_truncated_or_flipped_index_is_refused(tmp_path, cut):
    index = GOOGLE_DIR / "bert_model.ckpt.index"

    def edit(directory):
        if cut == -1:
            _flip_byte(directory / index.name, 100)  # inside the first data block
        else:
            (directory / index.name).write_bytes(index.read_bytes()[:cut])

    directory = _corrupt(tmp_path, edit)
    with pytest.raises(CheckpointError, match=r"bert_model\.ckpt\.index"):
        BertModel.from_pretrained(directory)


def test_missing_data_file_and_foreign_index(tmp_path):
    directory = _corrupt(tmp_path, lambda d: (d / "bert_model.ckpt.data-00000-of-00001").unlink())
    with pytest.raises(CheckpointError, match="data file not found: .*data-00000-of-00001"):
        BertModel.from_pretrained(directory)
    (directory / "bert_model.ckpt.index").write_bytes(os.urandom(4096))
    with pytest.raises(CheckpointError, match="is not a TensorFlow checkpoint index"):
        BertModel.from_pretrained(directory)


def test_tf2_object_checkpoint_is_refused():
    with pytest.raises(CheckpointError, match="TensorFlow 2 object-based checkpoint"):
        BertModel.from_pretrained(DATA / "tf2_object_checkpoint")


def test_checkpoint_of_another_model_names_the_tensors():
    with pytest.raises(CheckpointError, match=r"missing tensors .*bert/embeddings/word_embeddings") as error:
        BertModel.from_pretrained(DATA / "not_bert")
    assert "dense/kernel" in str(error.value)  # the unexpected tensors are listed too


def test_several_checkpoints_need_the_state_file(tmp_path):
    directory = _copy(GOOGLE_DIR, tmp_path / "uncased_run")
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copyfile(directory / f"bert_model.ckpt{suffix}", directory / f"model.ckpt-2000{suffix}")
    with pytest.raises(CheckpointError, match="several TensorFlow checkpoints"):
        BertModel.from_pretrained(directory)
    (directory / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-2000"\n')
    assert BertModel.from_pretrained(directory).config.hidden_size == 32


def test_a_state_file_naming_a_deleted_checkpoint_says_so(tmp_path):
    """The 'checkpoint' file is there but names a checkpoint that is gone (model.ckpt-3000, deleted
    to save space): the error says that, not "no 'checkpoint' file"."""
    directory = _copy(GOOGLE_DIR, tmp_path / "uncased_run")
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copyfile(directory / f"bert_model.ckpt{suffix}", directory / f"model.ckpt-2000{suffix}")
    (directory / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-3000"\n'
                                          'all_model_checkpoint_paths: "model.ckpt-2000"\n')  # fmt: skip
    with pytest.raises(CheckpointError) as raised:
        BertModel.from_pretrained(directory)
    message = str(raised.value)
    assert "its 'checkpoint' file names model.ckpt-3000, which is not there" in message, message
    assert "no 'checkpoint' file" not in message, message


# ----------------------------------------------------------------------------- full size, written by TensorFlow


def _tensorflow_python() -> str | None:
    """$MINIBERT_TF_PYTHON, this Python, or the TensorFlow venv of the pre-training tests (made when missing;
    tf_python has checked that it imports tensorflow and safetensors: not imported a second time, ~6 s)."""
    for candidate in (os.environ.get("MINIBERT_TF_PYTHON"), sys.executable):
        if candidate and subprocess.run([candidate, "-c", "import tensorflow, safetensors"],
                                         capture_output=True, timeout=120).returncode == 0:  # fmt: skip
            return candidate
    return tf_reference.tf_python()


@pytest.fixture(scope="module")
def tensorflow_python():
    python = _tensorflow_python()
    if python is None:
        pytest.skip("TensorFlow is not installed (set MINIBERT_TF_PYTHON to a Python that has tensorflow-cpu)")
    return python


@pytest.fixture(scope="module")
def written_by_tensorflow(tensorflow_python, minilm_dir, google_base, tmp_path_factory) -> dict[str, Path]:
    """all-MiniLM-L6-v2 (with the Adam slots of a pre-training checkpoint) and the bert-base-shaped
    model with heads, each written by TensorFlow with scripts/make_tf_checkpoint.py, as its command
    line runs it (``sys.argv``, ``__main__``): both in one process, which imports TensorFlow once (two
    processes at once, one per core, imported it twice; under ``-n 2`` the other core is a worker's)."""
    out = tmp_path_factory.mktemp("written-by-tensorflow")
    jobs = {"uncased_minilm": [str(minilm_dir), "--adam"], "uncased_L-12_H-768_A-12": [str(google_base[0])]}
    driver = (
        "import json, runpy, sys\n"
        "script, jobs = sys.argv[1], json.loads(sys.argv[2])\n"
        "for source, target, *extra in jobs:\n"
        "    sys.argv = [script, source, target, *extra]\n"
        "    runpy.run_path(script, run_name='__main__')\n"
    )
    arguments = json.dumps([[source, str(out / name), *extra] for name, (source, *extra) in jobs.items()])
    with (out / "tensorflow.log").open("w") as log:  # (a file, not a pipe: nothing waits on a full pipe)
        done = subprocess.run([tensorflow_python, "-c", driver, str(SCRIPT), arguments], stdout=log,
                              stderr=subprocess.STDOUT, timeout=900)  # fmt: skip
    assert done.returncode == 0, (out / "tensorflow.log").read_text()[-2000:]
    return {name: out / name for name in jobs}


def test_full_size_minilm_written_by_tensorflow(written_by_tensorflow, minilm_dir, real_texts):
    """The real all-MiniLM-L6-v2 through a TensorFlow checkpoint (Adam slots beside it), every hidden
    state and the pooler at every position against transformers on the hub's weights. Four real texts
    (7 to 51 tokens): the size that matters is the model's; each weight meets every token."""
    out = written_by_tensorflow["uncased_minilm"]
    reference = transformers.BertModel.from_pretrained(str(minilm_dir), attn_implementation="eager").eval()
    batch = _batch(minilm_dir, real_texts[2:6])
    assert (batch["attention_mask"] == 0).any(), "the batch should contain padding"
    with torch.no_grad():
        ours = BertModel.from_pretrained(out)(**batch, output_hidden_states=True)
        theirs = reference(**batch, output_hidden_states=True)
        exact = exact_reference(reference)(**batch, output_hidden_states=True)
    # Six layers deep, fp32 with another GEMM library (oneDNN where this CPU's measurement picks it)
    # drifts beyond a flat 1e-5 from transformers: the bound comes from the float64 result.
    compare_outputs(ours, theirs, batch["attention_mask"], "all-MiniLM-L6-v2 via TensorFlow checkpoint", exact=exact)


def test_full_size_bert_base_with_heads_written_by_tensorflow(written_by_tensorflow, google_base_run):
    """The bert-base-shaped model with heads through a TensorFlow checkpoint: every hidden state, the
    pooler and both heads' logits against google_base's transformers reference (its output on
    google_base_run's texts, computed once for every test that compares with it)."""
    out = written_by_tensorflow["uncased_L-12_H-768_A-12"]
    compare_pretraining(BertForPreTraining.from_pretrained(out), google_base_run, google_base_run.batch,
                        "bert-base via TensorFlow checkpoint")  # fmt: skip
