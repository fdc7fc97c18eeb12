"""The options of pre-training, each a field with its default, limits and help written once:
``InstanceOptions`` (the flags of Google's ``create_pretraining_data.py``, ``minibert
pretraining-data``) and ``PretrainOptions`` (``minibert pretrain``). The commands' flags are made
from these fields (apps/flag_types.py ``add_flags``), and values made in Python are checked by the
same limits (limits.py). This module imports neither torch nor the loop: the parser reads it.

>>> InstanceOptions(max_seq_length=64, whole_word_mask=True).max_tokens_per_pair
61
>>> InstanceOptions(max_seq_length=4)  # doctest: +ELLIPSIS
Traceback (most recent call last):
minibert.errors.DataError: max_seq_length must be a whole number of at least 5, got 4 (the smallest instance is ...)
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field

from ..errors import DataError
from ..limits import fields_out_of_limits

SMALLEST_SEQUENCE = 5  # [CLS] A [SEP] B [SEP] with one piece in A and one in B
DEFAULT_SEED = 12345  # create_pretraining_data.py's --random_seed; pretrain's too
LARGEST_SEED = 2**63 - 1  # torch.manual_seed(seed + rank) takes up to 2**64 - 1


def option(help: str, **metadata) -> dict:
    """A field's flag: its help, its limits (``low``, ``high``, ``above_low``, ``below_high``) and
    other argparse options; ``why``: what a limit is for, said when a value passes it."""
    return {"help": help, **metadata}


@dataclass(frozen=True)
class InstanceOptions:
    """How instances are cut and masked; the defaults are Google's flags' defaults."""

    max_seq_length: int = field(default=128, metadata=option(
        "pieces per instance, [CLS] and both [SEP] included; shorter ones are padded", low=SMALLEST_SEQUENCE,
        why="the smallest instance is [CLS] A [SEP] B [SEP] with one piece each in A and B"))  # fmt: skip
    max_predictions_per_seq: int = field(default=20, metadata=option(
        "masked pieces per instance, at most (the features' padded length)", low=1,
        why="at least one piece is masked"))  # fmt: skip
    masked_lm_prob: float = field(default=0.15, metadata=option(
        "share of an instance's pieces masked (rounded; at least 1)", low=0.0, high=1.0, above_low=True))  # fmt: skip
    short_seq_prob: float = field(default=0.1, metadata=option(
        "how often a shorter target length is drawn from 2..max instead", low=0.0, high=1.0))  # fmt: skip
    dupe_factor: int = field(default=10, metadata=option(
        "passes over the corpus, each with other segment cuts and masks", low=1,
        why="it is the number of passes over the corpus"))  # fmt: skip
    whole_word_mask: bool = field(default=False, metadata=option(
        "mask all pieces of a word together (google-research/bert's later flag)", action="store_true"))  # fmt: skip

    def __post_init__(self):
        refuse_out_of_limits(self, flags=False)
        if not isinstance(self.whole_word_mask, bool):
            raise DataError(f"whole_word_mask must be True or False, got {self.whole_word_mask!r}")

    @property
    def max_tokens_per_pair(self) -> int:
        """Pieces of A and B together: the sequence less [CLS] and the two [SEP]."""
        return self.max_seq_length - 3


@dataclass(frozen=True)
class PretrainOptions:
    """The flags of ``minibert pretrain``; defaults are Google's (run_pretraining.py, optimization.py)."""

    data: list[str] = field(metadata=option(  # TFRecord files (create_pretraining_data.py / minibert pretraining-data)
        "TFRecord files of instances (minibert pretraining-data; Google's script)", nargs="+", required=True,
        metavar="FILE"))  # fmt: skip
    output: str = field(metadata=option("the run directory (a hub-layout checkpoint at every save)", required=True))
    steps: int = field(metadata=option("updates to make (the schedule reaches 0 there)", low=1, required=True))
    batch_size: int = field(metadata=option(  # the GLOBAL batch
        "instances per update, over all processes and micro-batches", low=1, required=True))  # fmt: skip
    init: str | None = field(default=None, metadata=option(
        "start from this checkpoint: a hub folder or id, Google's TF checkpoint, a run"))  # fmt: skip
    config: str | None = field(default=None, metadata=option(
        "start from random weights of this config.json (with --vocab)"))  # fmt: skip
    vocab: str | None = field(default=None, metadata=option("with --config: the vocab.txt of the instances' ids"))
    do_lower_case: bool = field(default=True, metadata=option(  # (with --config) the tokenizer config written
        "with --config: the tokenizer keeps case", flag="--cased", action="store_false"))  # fmt: skip
    learning_rate: float = field(default=1e-4, metadata=option("the peak rate", low=0.0, above_low=True))
    warmup_steps: int = field(default=0, metadata=option("linear warmup from 0", low=0))
    weight_decay: float = field(default=0.01, metadata=option("never on LayerNorm or biases", low=0.0))
    max_grad_norm: float = field(default=1.0, metadata=option(
        "the global gradient norm is clipped to this", low=0.0, above_low=True))  # fmt: skip
    dropout: float | None = field(default=None, metadata=option(
        "replace the config's dropout probabilities (0: exact runs)", low=0.0, high=1.0, below_high=True))  # fmt: skip
    seed: int = field(default=DEFAULT_SEED, metadata=option("random weights and dropout", low=0, high=LARGEST_SEED))
    save_every: int = field(default=1000, metadata=option(
        "steps between checkpoints, and one at the end", low=1))  # fmt: skip
    accumulate: int = field(default=1, metadata=option(
        "micro-batches per update in each process: gradient accumulation", low=1))  # fmt: skip
    resume: bool = field(default=False, metadata=option(
        "continue the run in --output from its last checkpoint", action="store_true"))  # fmt: skip
    bf16: bool = field(default=False, metadata=option(
        "forward in bfloat16 autocast (faster with AMX; a warning where it is not: precision.py)",
        action="store_true"))  # fmt: skip
    allow_wrap: bool = field(default=False, metadata=option(
        "allow a --batch-size larger than the data (each batch repeats instances)", action="store_true"))  # fmt: skip
    progress: bool | None = field(default=None, compare=False)  # a progress line on stderr (default: a terminal)

    def check(self, processes: int) -> None:
        refuse_out_of_limits(self, flags=True)
        if (self.init is None) == (self.config is None):
            raise DataError("give exactly one of --init (a checkpoint) and --config (random weights)")
        if self.config is not None and self.vocab is None:
            raise DataError("--config needs --vocab (the vocab.txt the instances' ids come from)")
        pieces = processes * self.accumulate
        if self.batch_size % pieces:
            raise DataError(f"--batch-size {self.batch_size} does not split into {processes} process(es) × "
                            f"--accumulate {self.accumulate}: make it a multiple of {pieces}")  # fmt: skip

    def settings(self, processes: int) -> dict:
        """What a resumed run must share with the run it continues."""
        kept = asdict(self)
        for name in ("data", "output", "resume", "progress", "config", "vocab", "do_lower_case", "save_every",
                     "allow_wrap"):  # fmt: skip
            kept.pop(name)
        return {**kept, "processes": processes}


def refuse_out_of_limits(options, flags: bool) -> None:
    """DataError naming the first field outside its limits (as its ``--flag`` when ``flags``), and
    why the limit is there where the field says."""
    problems = fields_out_of_limits(options)
    if problems:
        name, problem = problems[0]
        why = {setting.name: setting.metadata.get("why") for setting in dataclasses.fields(options)}[name]
        shown = "--" + name.replace("_", "-") if flags else name
        raise DataError(f"{shown} {problem}" + (f" ({why})" if why else ""))
