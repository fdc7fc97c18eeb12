"""``create_pretraining_data``: Google's script as one function (text files → TFRecord files).

>>> summary = create_pretraining_data(["corpus.txt"], "vocab.txt", ["train.tfrecord"])   # doctest: +SKIP
>>> summary.instances, summary.documents                                                   # doctest: +SKIP
(5210, 1000)
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import DataError
from ...formats.atomic_files import refuse_what_is_not_a_file, why_not_a_folder
from ...formats.file_sets import files_written_together, first_same_file, same_file
from ...limits import names_a_folder, plain_number
from .documents import check_invalid_utf8, read_documents
from .full_tokenizer import PretrainingVocabulary
from .instances import create_instances
from .options import DEFAULT_SEED, InstanceOptions, path_list
from .records import write_shards


@dataclass(frozen=True)
class PretrainingDataSummary:
    documents: int  # documents with at least one sentence
    sentences: int
    instances: int  # written, over all output files
    per_file: tuple[int, ...]  # instances in each output file, in the order given


def create_pretraining_data(
    input_files: str | os.PathLike | Sequence[str | os.PathLike],
    vocab_file: str | os.PathLike,
    output_files: str | os.PathLike | Sequence[str | os.PathLike],
    options: InstanceOptions | None = None,
    random_seed: int = DEFAULT_SEED,
    do_lower_case: bool = True,
    invalid_utf8: str = "error",
    preserve_unused_tokens: bool = False,
) -> PretrainingDataSummary:
    """Read the text, cut and mask the instances with ``random.Random(random_seed)``, write them
    round-robin over ``output_files``: the instances of Google's ``create_pretraining_data.py``
    with the same flags (``--do_lower_case`` = ``do_lower_case``, ``--preserve_unused_tokens`` =
    ``preserve_unused_tokens``). One path (a ``str`` or ``Path``) for ``input_files`` or
    ``output_files`` is one file, as a list of one. Every argument is checked before any file is
    read, and nothing is written on an error: a ``DataError`` naming the file or argument (for the
    vocabulary and the text too: missing, not UTF-8, empty), or a ``FileWriteError`` naming an output
    that cannot be written (a FIFO, a device, a name too long, a full disk)."""
    if options is None:
        options = InstanceOptions()
    elif not isinstance(options, InstanceOptions):  # a dict read no flag: it failed after all the reading
        raise DataError(f"options must be an InstanceOptions, got {type(options).__name__}: write "
                        "InstanceOptions(max_seq_length=..., ...)")  # fmt: skip
    if not isinstance(vocab_file, (str, os.PathLike)):
        raise DataError(f"vocab_file must be a path (str or Path), got {type(vocab_file).__name__}")
    input_files = [Path(path) for path in path_list(input_files, "input_files")]
    output_names = path_list(output_files, "output_files")
    for name in output_names:  # read before Path drops the slash ("shards/" would be written as a file "shards")
        if names_a_folder(name):
            raise DataError(f"output {name!r} names a folder, not a file: name the TFRecord file(s) to write")
    output_files = [Path(name) for name in output_names]
    if not input_files or not output_files:
        raise DataError("pre-training data needs at least one input file and one output file")
    seed = plain_number(random_seed, int)  # np.int64(3) is 3 (random.Random refuses NumPy's ints)
    if seed is None:
        raise DataError(f"random_seed must be a whole number (an int), got {random_seed!r} "
                        f"({type(random_seed).__name__})")  # fmt: skip
    for name, value in [("do_lower_case", do_lower_case), ("preserve_unused_tokens", preserve_unused_tokens)]:
        if not isinstance(value, bool):  # "False" is truthy: it would lowercase, silently
            raise DataError(f"{name} must be True or False, got {value!r}")
    check_invalid_utf8(invalid_utf8)  # before the vocabulary is read
    for path in output_files:
        directory = path.parent if str(path.parent) else Path(".")
        reason = why_not_a_folder(directory)
        if reason:  # quoted: a stray space (--output "a.tfrecord, out/b.tfrecord") shows
            raise DataError(f"output {str(path)!r}: the directory {str(directory)!r} {reason}")
        if os.path.isdir(path):
            raise DataError(f"output {path} is a directory, not a file")
        refuse_what_is_not_a_file(path)  # a FIFO, a device (/dev/null), a name too long: FileWriteError
    same = first_same_file(output_names)  # the files, not the names (as typed): a link, a linked folder, a hard link
    if same is not None:  # (renamed into place one after the other, the second would replace the first)
        raise DataError(f"the output files must be different files (one per shard): {str(same[0])!r} and "
                        f"{str(same[1])!r} are the same file")  # fmt: skip
    for output in output_files:
        for source, what in [*((path, "input file") for path in input_files), (vocab_file, "vocabulary file")]:
            if same_file(output, source):
                raise DataError(f"output {output} is the {what} {source}: it would be overwritten")
    # The temporary files first: a folder that takes no new file is said before the corpus is read.
    with files_written_together(output_files) as handles:  # all renamed into place together, or none
        vocabulary = PretrainingVocabulary.load(vocab_file, do_lower_case, preserve_unused_tokens)
        documents = read_documents(input_files, vocabulary.piece_ids, invalid_utf8)
        rng = random.Random(seed)
        frame_ids = (vocabulary.cls_id, vocabulary.sep_id)
        instances = create_instances(documents, frame_ids, vocabulary.mask_id, vocabulary.is_continuation, options, rng)
        lengths = (options.max_seq_length, options.max_predictions_per_seq)
        per_file = write_shards(instances, handles, output_files, *lengths)
    sentences = sum(len(document) for document in documents)
    return PretrainingDataSummary(len(documents), sentences, len(instances), tuple(per_file))
