"""Any checkpoint minibert reads → a directory in the Hugging Face hub's layout.

Its main use is Google's own release format: ``minibert convert uncased_L-12_H-768_A-12 out/``
turns the directory unpacked from Google's zip (``bert_config.json``, the TensorFlow checkpoint,
``vocab.txt``) into what transformers and every hub tool expect::

    out/config.json              model_type "bert", the architecture, Google's numbers
    out/model.safetensors        the hub's tensor names (``bert.`` prefix, ``cls.*`` heads if present)
    out/vocab.txt                copied as it is
    out/tokenizer_config.json    do_lower_case as minibert's tokenizer decided it (and logged why)

The whole directory is written beside the destination, then renamed into place in one step: an
error or interruption leaves nothing behind, and an existing non-empty destination is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from ..errors import CheckpointError
from ..formats.atomic_files import current_umask, naming_the_file, write_atomically
from ..loading.hub import looks_like_a_path, resolve_file

# Google's release zips: uncased_L-12_H-768_A-12, multi_cased_L-12_H-768_A-12, wwm_uncased_L-24_H-1024_A-16, ...
GOOGLE_RELEASE = re.compile(r"^(multi_)?(cased|uncased|wwm_[a-z]+|chinese)_L-\d+_H-\d+_A-\d+")


def _looks_like_a_path(name: str) -> bool:
    """A name meant as a directory, not a hub id: it has a path's form (the loader's rule,
    ``looks_like_a_path``: ./x, /x, ~/x, a/b/c, x\\y), or, convert's own addition, its parent directory
    exists beside it or it is named like Google's release zips. convert's source is nearly always a
    folder unpacked from Google's zip, so ``out/bert`` (``out/`` exists) or ``uncased_L-12_H-768_A-12``
    missing is a mistyped folder, reported as such, where the loader would ask the hub for that id."""
    path = Path(name)
    return (looks_like_a_path(name) or (name.count("/") == 1 and path.parent.is_dir())
            or bool(GOOGLE_RELEASE.match(path.name)))  # fmt: skip


def convert_checkpoint(source: str | os.PathLike, destination: str | os.PathLike,
                       labels: list[str] | None = None) -> Path:  # fmt: skip
    """Convert ``source`` (a directory or hub id) into ``destination`` (a new directory); returns it.

    The heads are kept, and config.json's ``architectures`` names the class that loads them: the
    pre-training heads (``BertForPreTraining``), a classifier (Google's run_classifier.py
    ``output_weights``: ``BertForSequenceClassification``, its labels ``labels`` in id order, else
    LABEL_0 ...), a question-answering head (run_squad.py's ``cls/squad/*``: ``BertForQuestionAnswering``);
    without heads the encoder alone (``BertModel``).
    """
    from ..loading.checkpoint_files import find_checkpoint
    from ..tokenizer.bert_tokenizer import BertTokenizer

    destination = Path(destination)
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise CheckpointError(f"the destination {destination} already exists and is not an empty directory")
    parent = destination.parent if str(destination.parent) else Path(".")
    if not parent.is_dir():
        raise CheckpointError(f"the destination's parent directory {parent} does not exist")

    name = os.fspath(source)
    if not os.path.isdir(name) and _looks_like_a_path(name):
        raise CheckpointError(f"no such directory: {name} (convert reads a directory with bert_config.json and "
                              "bert_model.ckpt.*, or a hub id like google-bert/bert-base-uncased)")  # fmt: skip
    _, weights_file = find_checkpoint(source)
    cls = _class_for(weights_file)
    if labels and cls.__name__ != "BertForSequenceClassification":
        raise CheckpointError(f"--labels names a classifier's labels; {weights_file} has no classifier "
                              f"(output_weights or classifier.weight): it converts as {cls.__name__}")  # fmt: skip
    label_config = {"id2label": dict(enumerate(labels)), "label2id": {label: i for i, label in enumerate(labels)}} \
        if labels else {}  # fmt: skip
    # The staging folder first, before the weights are read: a parent that cannot be written to (read-only,
    # no permission) is one line naming the destination, not an errno message naming the temporary folder.
    with naming_the_file(destination):
        staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", suffix=".partial", dir=parent))
    try:
        model = cls.from_pretrained(source, **label_config)
        tokenizer = BertTokenizer.from_pretrained(source)
        os.chmod(staging, 0o777 & ~current_umask())  # mkdtemp makes it 0700; a directory follows the umask
        model.save_pretrained(staging)
        vocab = resolve_file(source, "vocab.txt")
        write_atomically(staging / "vocab.txt", Path(vocab).read_bytes())
        settings = {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": tokenizer.basic.do_lower_case,
            "strip_accents": None if tokenizer.basic.strip_accents == tokenizer.basic.do_lower_case
            else tokenizer.basic.strip_accents,
            "tokenize_chinese_chars": tokenizer.basic.tokenize_chinese_chars,
            "model_max_length": min(tokenizer.model_max_length, model.config.max_position_embeddings),
        }  # fmt: skip
        write_atomically(staging / "tokenizer_config.json", (json.dumps(settings, indent=2) + "\n").encode())
        if destination.is_dir():
            destination.rmdir()  # empty (checked above): the rename puts the whole directory in its place
        os.replace(staging, destination)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
        raise
    return destination


def _class_for(weights_file: Path) -> type:
    """The class that loads every head the checkpoint has, by its tensor names (hub or Google's)."""
    from ..heads import BertForPreTraining, BertForQuestionAnswering, BertForSequenceClassification
    from ..loading.checkpoint_files import tensor_names
    from ..loading.names import ANSWER_WEIGHTS, CLASSIFIER_WEIGHTS
    from ..model import BertModel

    names = {name.removeprefix("bert.").removeprefix("bert/") for name in tensor_names(weights_file)}
    if any(name.startswith(("cls.predictions", "cls.seq_relationship", "cls/predictions", "cls/seq_relationship"))
           for name in names):  # fmt: skip
        return BertForPreTraining
    if names & set(ANSWER_WEIGHTS):
        return BertForQuestionAnswering
    if names & set(CLASSIFIER_WEIGHTS):
        return BertForSequenceClassification
    return BertModel
