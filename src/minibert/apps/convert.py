"""Any checkpoint minibert reads → a directory in the Hugging Face hub's layout.

Its main use is Google's own release format: ``minibert convert uncased_L-12_H-768_A-12 out/``
turns the directory unpacked from Google's zip (``bert_config.json``, the TensorFlow checkpoint,
``vocab.txt``) into what transformers and every hub tool expect::

    out/config.json              model_type "bert", the architecture, Google's numbers
    out/model.safetensors        the hub's tensor names (``bert.`` prefix, ``cls.*`` heads if present)
    out/vocab.txt, out/tokenizer_config.json, out/special_tokens_map.json
                                 the tokenizer, as ``BertTokenizer.save_pretrained`` writes it: its casing
                                 (for Google's zips as minibert decided it, and logged why), added tokens,
                                 roles and settings; model_max_length at most the model's positions

A sentence-transformers model (a folder or hub id with ``modules.json``) keeps its recipe:
``modules.json``, ``sentence_bert_config.json``, ``config_sentence_transformers.json`` and each
module's folder (``1_Pooling/``, ``2_Dense/``) are copied, so ``minibert embed`` on the result gives
the vectors it gave on the source; a recipe ``embed`` cannot follow is refused before writing. A
source's model card (README.md: what the model is, its license) is copied too, whatever the model.

The whole directory is written beside the destination, then renamed into place in one step: an
error or interruption leaves nothing behind, and an existing non-empty destination is refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ..errors import CheckpointError, FileWriteError
from ..formats.atomic_files import (
    WRITE_ERRORS,
    current_umask,
    hidden_prefix,
    link_target,
    naming_the_file,
    why_not_a_folder,
    write_atomically,
)
from ..loading.google_folder import model_folder
from ..loading.hub import looks_like_a_path, resolve_file
from ..loading.local_files import not_a_file
from ..loading.save_pretrained import SaveOptions, save_pretrained

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
    source's own ``architectures`` when it names a class whose heads the tensors hold, else the
    class the tensors call for (``class_for``): the pre-training heads (``BertForPreTraining``), one
    of them (``BertForMaskedLM``, ``BertForNextSentencePrediction``), a classifier (Google's
    run_classifier.py ``output_weights``: ``BertForSequenceClassification``, its labels ``labels``
    in id order, else LABEL_0 ...; without a pooler ``BertForTokenClassification``), a
    question-answering head (run_squad.py's ``cls/squad/*``: ``BertForQuestionAnswering``); without
    heads the encoder alone (``BertModel``, without a pooler if the source has none).
    """
    from ..loading.checkpoint_files import find_checkpoint, tensor_names
    from ..tokenizer.bert_tokenizer import BertTokenizer

    destination = Path(destination)
    target = _place_of(destination)
    parent = target.parent if str(target.parent) else Path(".")

    name = os.fspath(source)  # a folder, a hub id, or DIR/model.ckpt-3 (that TensorFlow checkpoint, in its folder)
    if not os.path.isdir(model_folder(name)) and _looks_like_a_path(name):
        a_file = os.path.isfile(name)
        what = f"a file, not a directory: {name}; pass its folder: {os.path.dirname(name) or '.'}" if a_file \
            else f"no such directory: {name}"  # fmt: skip
        raise CheckpointError(f"{what} (convert reads a directory with bert_config.json and "
                              "bert_model.ckpt.*, or one in the hub's layout, or a hub id like "
                              "google-bert/bert-base-uncased)")  # fmt: skip
    config_file, weights_file = find_checkpoint(source)
    cls, keywords = class_for(config_file, tensor_names(weights_file))
    if labels and cls.__name__ not in LABELLED:
        held = "no classifier (output_weights or classifier.weight)" if cls.__name__ != "BertForMultipleChoice" \
            else "a multiple-choice head (one score per choice, no labels)"  # fmt: skip
        raise CheckpointError(f"--labels names a classifier's labels; {weights_file} has {held}: it converts as "
                              f"{cls.__name__}")  # fmt: skip
    if labels:
        keywords.update(id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)})
    # The staging folder first, before the weights are read: a place that cannot be written to (read-only,
    # no permission) is one line naming the destination, not an errno message naming the temporary folder.
    # A new destination is staged beside it and renamed into place; an existing empty one (a mount point,
    # a shared folder with its owner and setgid bit) is kept, and staged inside (_commit).
    fill = target.is_dir()  # (decided here: mkdtemp's path may be absolute where target is relative)
    with naming_the_file(destination):
        staging = Path(tempfile.mkdtemp(prefix=hidden_prefix(destination.name or "convert"), suffix=".partial",
                                        dir=target if fill else parent))  # fmt: skip
    try:
        model = cls.from_pretrained(source, **keywords)
        tokenizer = BertTokenizer.from_pretrained(source)
        # ids the model has no embedding for: refused before writing, as every command that runs SRC refuses it
        model.config.check_vocabulary(tokenizer.vocab, name, config_file.name)
        copied = sentence_transformers_files(source, model.config.hidden_size)
        copied += [MODEL_CARD] if resolve_file(source, MODEL_CARD, required=False) else []
        pooler = _pooler_kept(source, model, tensor_names(weights_file))
        with _write_errors_named(destination, staging):  # (a full disk: "cannot write DST", not a staged file)
            os.chmod(staging, 0o777 & ~current_umask())  # mkdtemp makes it 0700; a directory follows the umask
            save_pretrained(model, staging, SaveOptions(extra_tensors=pooler))
            for name in copied:  # the sentence-transformers recipe (embed pools and normalises as before), the card
                (staging / name).parent.mkdir(mode=0o777, parents=True, exist_ok=True)
                write_atomically(staging / name, resolve_file(source, name).read_bytes())
            # The tokenizer as its save_pretrained writes it (added tokens, roles and every setting kept), its
            # length no more than the model's positions: a Google folder gives none ("no limit").
            tokenizer.model_max_length = min(tokenizer.model_max_length, model.config.max_position_embeddings)
            tokenizer.save_pretrained(staging)
            _commit(staging, target, fill)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
        raise
    return destination


def _pooler_kept(source, model, names) -> dict:
    """The checkpoint's trained pooler, under its hub names, where ``model``'s class is built without
    one (the masked-LM, token and question-answering heads, as in transformers): a converted folder
    holds the whole encoder the checkpoint holds, so that a BertModel read from it (``verify``'s,
    transformers') has its pooler, not a fresh draw. Nothing when the class keeps it, or there is none."""
    from ..loading.checkpoint_files import checkpoint_parts
    from ..model import BertModel

    if getattr(model, "bert", model).pooler is not None or "pooler" not in checkpoint_parts(names):
        return {}
    pooler = BertModel.from_pretrained(source).pooler.dense
    return {"bert.pooler.dense.weight": pooler.weight.detach(), "bert.pooler.dense.bias": pooler.bias.detach()}


def _commit(staging: Path, target: Path, fill: bool) -> None:
    """The staged folder put in place: renamed to ``target`` when it is new (atomic: the whole folder or
    none); into an existing empty ``target`` (``fill``) its entries are moved one by one, config.json
    last (a kill between leaves no folder a loader takes for a model), and the staging folder inside
    removed. A move that fails takes back those made before it: the folder is left empty, as it was."""
    if not fill:
        os.replace(staging, target)
        return
    moved = []
    try:
        for entry in sorted(staging.iterdir(), key=lambda entry: entry.name == "config.json"):
            os.replace(entry, target / entry.name)
            moved.append(target / entry.name)
    except BaseException:
        for path in moved:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        raise
    staging.rmdir()


def _stale_staging(entry: Path) -> bool:
    """A staging folder a killed convert left in the destination it was filling (``.NAME….partial``)."""
    return entry.name.startswith(".") and entry.name.endswith(".partial") and entry.is_dir()


@contextlib.contextmanager
def _write_errors_named(destination: Path, staging: Path):
    """A write into ``staging`` that fails (a full disk, a read-only place) said of the destination:
    "cannot write DST: No space left on device", never of a file in the hidden staging folder."""
    try:
        yield
    except OSError as error:
        inside = isinstance(error.filename, str) and error.filename.startswith(os.fspath(staging))
        if error.errno not in WRITE_ERRORS or not (inside or error.filename is None) or isinstance(
                error, FileWriteError) and os.fspath(destination) in str(error):  # fmt: skip
            raise
        raise FileWriteError(error.errno, f"cannot write {destination}: {os.strerror(error.errno)}") from None


def _place_of(destination: Path) -> Path:
    """The directory that convert puts in place: ``destination``, or the directory a symbolic link
    names (written there, as transformers' save_pretrained and ``cp -r SRC LINK`` write through a
    link to a directory; the link stays a link). Checked before any work: it must be new or an empty
    directory, its parent a directory, and a link must lead to a directory."""
    target = destination
    if destination.is_symlink():
        if not destination.exists():  # a link to nothing, or links in a loop
            raise FileWriteError(errno.ENOENT, f"cannot write {destination}: it is a symbolic link to "
                                 f"{os.readlink(destination)}, which does not exist; convert writes into the "
                                 "directory a link names (as save_pretrained does): make it, or pass another "
                                 "destination")  # fmt: skip
        target = link_target(destination)
    if target.exists() and not target.is_dir():
        raise CheckpointError(f"the destination {destination} is {not_a_file(target) or 'a file'}, not a directory: "
                              "convert writes a new or empty directory")  # fmt: skip
    if target.is_dir():  # (a killed convert's staging folder inside is its own: removed, the folder empty)
        for entry in filter(_stale_staging, target.iterdir()):
            shutil.rmtree(entry, ignore_errors=True)
    if target.exists() and any(target.iterdir()):
        raise CheckpointError(f"the destination {destination} already exists and is not an empty directory")
    parent = target.parent if str(target.parent) else Path(".")
    reason = why_not_a_folder(parent)
    if reason:
        raise CheckpointError(f"the destination's parent directory {parent} {reason}")
    return target


# A sentence-transformers model's files beside the BERT: its pipeline and settings (embedding/recipe.py).
# Each module's folder (1_Pooling/, 2_Dense/) is copied as the recipe reads it.
SENTENCE_TRANSFORMERS_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")
MODULE_FILES = ("config.json", "model.safetensors", "pytorch_model.bin")  # what a Pooling, Dense or Normalize holds
MODEL_CARD = "README.md"  # any model's: copied as it is


def sentence_transformers_files(source: str | os.PathLike, hidden_size: int) -> list[str]:
    """The sentence-transformers files of ``source`` that convert copies (relative names, those that
    exist), after checking that minibert's ``embed`` reads its recipe: a recipe it cannot follow is
    a CheckpointError before anything is written, never a converted model that embeds otherwise."""
    from ..embedding.recipe import is_a_module_folder, read_recipe
    from ..formats.json_files import read_json

    try:
        read_recipe(source, hidden_size=hidden_size)
    except CheckpointError as error:
        raise CheckpointError(f"{source} is a sentence-transformers model whose recipe minibert cannot follow, so "
                              f"the converted model would embed otherwise: {error}") from error  # fmt: skip
    names = [name for name in SENTENCE_TRANSFORMERS_FILES if resolve_file(source, name, required=False)]
    if "modules.json" in names:
        modules = read_json(resolve_file(source, "modules.json"))  # checked by read_recipe
        for folder in (module.get("path", "") for module in modules[1:]):
            if is_a_module_folder(folder):
                names += [f"{folder}/{name}" for name in MODULE_FILES
                          if resolve_file(source, f"{folder}/{name}", required=False)]  # fmt: skip
    return names


# Each class convert writes, and the heads (minibert's prefixes, names.py) its checkpoint holds.
CLASS_HEADS = {
    "BertForPreTraining": {"mlm_head.", "nsp_head."},
    "BertForMaskedLM": {"mlm_head."},
    "BertForNextSentencePrediction": {"nsp_head."},
    "BertForSequenceClassification": {"classifier."},
    "BertForTokenClassification": {"classifier."},
    "BertForMultipleChoice": {"classifier."},
    "BertForQuestionAnswering": {"qa_outputs."},
    "BertModel": set(),
}
LABELLED = ("BertForSequenceClassification", "BertForTokenClassification")  # the classes --labels names labels of


def class_for(config_file: Path, tensor_names: Iterable[str]) -> tuple[type, dict]:
    """(the class that loads every head the checkpoint has, its from_pretrained keywords), from
    config.json and the names of the tensors the weights file holds (checkpoint_files.tensor_names:
    a caller that reads the file for more than this reads it once).

    config.json's ``architectures`` first, when it names a class whose heads are exactly those the
    tensors hold: a token classifier and a sentence classifier, or a multiple-choice head, hold the
    same ``classifier.*``, and only the config tells them apart (a class that would drop a head the
    file holds is not taken: google-bert/bert-base-uncased says BertForMaskedLM beside its
    next-sentence head). Otherwise by the tensor names (the hub's or Google's): both pre-training
    heads, one of them, a question-answering head, a classifier (on the pooler: a sentence
    classifier; without a pooler: a token classifier, as transformers saves it), or the encoder
    alone (``add_pooling_layer=False`` without a pooler)."""
    from .. import heads
    from ..loading.architectures import saved_class
    from ..loading.config_files import config_values
    from ..loading.names import HEAD_PREFIXES, POOLER, checkpoint_to_minibert
    from ..model import BertModel

    names = {checkpoint_to_minibert(name) or "" for name in tensor_names}
    held = {prefix for prefix in HEAD_PREFIXES if any(name.startswith(prefix) for name in names)}
    pooled = any(name.startswith(POOLER) for name in names)
    stated = saved_class((config_values(config_file) or {}).get("architectures"))  # (Google's names none)
    name = stated if stated in CLASS_HEADS and CLASS_HEADS[stated] == held else _class_by_tensors(held, pooled)
    if name == "BertModel":
        return BertModel, {} if pooled else {"add_pooling_layer": False}
    return getattr(heads, name), {}


def _class_by_tensors(held: set[str], pooled: bool) -> str:
    """The class whose heads are those held (the first of CLASS_HEADS: a classifier is a sentence
    classifier on a pooler, else a token classifier), or, for heads no one class has (a classifier
    beside the masked-LM head), the first class that keeps some of them."""
    exact = [name for name, wanted in CLASS_HEADS.items() if wanted == held]
    name = (exact or [name for name, wanted in CLASS_HEADS.items() if wanted and wanted <= held])[0]
    return "BertForTokenClassification" if name == "BertForSequenceClassification" and not pooled else name
