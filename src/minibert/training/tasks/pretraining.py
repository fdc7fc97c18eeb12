"""Pre-training (the paper's section 3.1): masked LM + next sentence, Google's ``run_pretraining.py``.

BERT was pre-trained on pairs of segments ``[CLS] A [SEP] B [SEP]`` with two tasks: predict the
pieces hidden behind ``[MASK]`` (masked LM) and tell whether B followed A in the document or was
drawn from another one (next-sentence prediction). The instances are Google's TFRecords
(pretraining_data/, or Google's create_pretraining_data.py), read and checked by
tfrecord_instances.py, taken in their files' order (order.py ``InstanceOrder``).

    loss = MLM + NSP
      MLM = Σ w·CE(masked piece) / (Σ w + 1e-5)       w = masked_lm_weights: 1.0 real, 0.0 padding
      NSP = mean CE(next-sentence label)               over the batch

Google's denominators are the *global* batch's: Σ w over every instance of the batch and the
batch's size. So each piece computes sums, divides them by the global denominators, and the
gradients of the pieces are *added*: the result is the gradient of the whole batch's loss.
(Averaging per-piece losses, each divided by its own Σ w, gives a different gradient whenever the
pieces hold different numbers of masked positions.)

Google's word embedding has no padding row, and neither has the network trained here
(``without_padding_row``): an id at a position the loss reads gets its gradient whatever piece it is.

Shape legend: B = instances in the piece, T = tokens, P = masked positions per instance
(max_predictions_per_seq), H = hidden size, V = vocabulary size.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ...config import BertConfig
from ...errors import CheckpointError, DataError, FlagConflictError
from ...formats.json_files import parse_json
from ...heads import BertForPreTraining, refuse_untied
from ...inputs import AS_ASKED
from ...loading.checkpoint_files import find_checkpoint
from ...loading.hub import resolve_file
from ...speed.seam import speed_up
from ...tokenizer import BertTokenizer
from .order import InstanceOrder
from .task import PieceSums, Task, TrainingData
from .tfrecord_instances import check_tokenizer_ids, read_instances

MLM_EPSILON = 1e-5  # Google's: Σ w + 1e-5, so a batch without masked positions has loss 0, not NaN


class Pretraining(Task):
    name = "pretraining"
    command = "pretrain"
    watched = {"mlm_loss": "masked-LM loss", "nsp_loss": "next-sentence loss",  # noqa: RUF012
               "gradient_norm": "gradient norm"}  # fmt: skip

    def prepare(self, options, world) -> TrainingData:
        """The instances, checked against the model's config (ids within its vocabulary, T within
        its positions) and against the tokenizer saved with every checkpoint (ids it can give),
        before any weight is built."""
        options.check(world.size)
        config, tokenizer = config_and_tokenizer(options)
        named = f"--config {options.config}" if options.init is None else f"--init {options.init}'s config"
        instances = read_instances(options.data, config, named)  # every record checked before any step
        source = f"--vocab {options.vocab}" if options.vocab is not None else f"--init {options.init}'s tokenizer"
        check_tokenizer_ids(instances, max(tokenizer.vocab.values()) + 1, source, config)
        check_batch_fits(options, len(instances), world.is_main)
        order = InstanceOrder(len(instances), options.batch_size)
        return TrainingData(instances, order, options.steps, options.warmup_steps, tokenizer, config=config)

    def network(self, options, data: TrainingData) -> BertForPreTraining:
        """From ``--init`` (heads it lacks start fresh), or random weights of ``--config`` (a normal of
        std 0.02 on every row, [PAD]'s too, biases 0, LayerNorm 1 and 0: ``PretrainedBert.init_weights``).
        ``--gemm`` picks the linear layers' library of either (random weights without it: the book's
        nn.Linear, MKL). Either has no padding row."""
        if options.init is not None:
            network = BertForPreTraining.from_pretrained(options.init, new_heads=True, gemm=options.gemm).float()
        else:
            network = BertForPreTraining(data.config)
            if options.gemm is not None:
                speed_up(network, options.gemm)
        return without_padding_row(network)

    def denominators(self, train, rows: np.ndarray) -> dict[str, float]:
        """Σ w + 1e-5 over the global batch's masked positions, and its size."""
        weights = train.arrays["masked_lm_weights"][rows]  # (B, P)
        return {"mlm": float(weights.astype(np.float64).sum()) + MLM_EPSILON, "batch_size": float(len(rows))}

    def tokens(self, train, rows: np.ndarray) -> int:
        """Every position of the global batch, padding included: the step computes them all (its
        encoder runs the plain path, the instances at their full width; docs/pretraining.md)."""
        return len(rows) * train.sequence_length

    def sums(self, model, piece: dict[str, torch.Tensor], denominators: dict[str, float]) -> PieceSums:
        """Google's losses of ``piece``, divided by the global batch's denominators.

        Only the masked positions go through the masked-LM head (as Google's ``gather_indexes``): a
        (B, P, V) score tensor instead of (B, T, V). The encoder runs its plain path: the fast path's
        packing (speed/fast_path.py) gathers and scatters tokens, and in the backward pass those cost
        more than the padding they skip."""
        out = model.bert(piece["input_ids"], piece["input_mask"], piece["segment_ids"], use_fast_path=False, **AS_ASKED)
        hidden = out.last_hidden_state  # (B, T, H)
        positions = piece["masked_lm_positions"]  # (B, P)
        gathered = hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))  # (B, P, H)
        mlm_logits = model.mlm_head(gathered, model.bert.embeddings.word_embeddings.weight).float()  # (B, P, V)
        nsp_logits = model.nsp_head(out.pooler_output).float()  # (B, 2)

        labels, weights = piece["masked_lm_ids"], piece["masked_lm_weights"]  # (B, P), (B, P)
        per_prediction = F.cross_entropy(mlm_logits.flatten(0, 1), labels.flatten(), reduction="none")  # (B·P,)
        mlm = (weights.flatten() * per_prediction).sum() / denominators["mlm"]
        nsp = F.cross_entropy(nsp_logits, piece["next_sentence_labels"], reduction="sum") / denominators["batch_size"]
        with torch.no_grad():
            mlm_correct = (weights * (mlm_logits.argmax(-1) == labels)).sum()
            nsp_correct = (nsp_logits.argmax(-1) == piece["next_sentence_labels"]).sum()
        figures = {"mlm_loss": mlm.detach(), "nsp_loss": nsp.detach(), "mlm_correct": mlm_correct,
                   "nsp_correct": nsp_correct}  # fmt: skip
        return PieceSums(mlm + nsp, figures)

    def figures(self, sums: dict[str, float], denominators: dict[str, float]) -> dict[str, float]:
        return {"loss": sums["mlm_loss"] + sums["nsp_loss"], "mlm_loss": sums["mlm_loss"], "nsp_loss": sums["nsp_loss"],
                "mlm_accuracy": sums["mlm_correct"] / max(denominators["mlm"] - MLM_EPSILON, 1e-12),
                "nsp_accuracy": sums["nsp_correct"] / denominators["batch_size"]}  # fmt: skip

    def summary(self, last: dict) -> str:
        return f"masked LM {last['mlm_loss']:.4g}, next sentence {last['nsp_loss']:.4g}"


def without_padding_row(network: BertForPreTraining) -> BertForPreTraining:
    """``network`` with a word embedding that gives every row its gradient, as Google's
    ``embedding_lookup`` does. transformers' (and model.py's) ``padding_idx = pad_token_id`` gives the
    [PAD] row none from the inputs, which is harmless where [PAD] only pads (a padded position
    reaches no loss); in pre-training the id also stands where the loss reads it: masking's random
    replacement draws [PAD] like any piece (Google's rule), and a vocabulary may give that id to
    another piece ([MASK], [UNK]). config.json keeps its pad_token_id: a model loaded from the run
    (to fine-tune, in transformers) has transformers' padding row again."""
    network.get_input_embeddings().padding_idx = None
    return network


def config_and_tokenizer(options) -> tuple[BertConfig, BertTokenizer]:
    """The model's config and tokenizer: ``--init``'s (``init_tokenizer``), or ``--config`` with a
    tokenizer of ``--vocab`` and the pad_token_id of its [PAD] (``padding_id``)."""
    if options.init is not None:
        config = BertConfig.from_json_file(find_checkpoint(options.init)[0])
        return config, init_tokenizer(options, config)
    config = BertConfig.from_json_file(options.config)
    try:  # before the data are read: BertForPreTraining would refuse it, without naming the file
        refuse_untied(config)
    except CheckpointError as error:
        raise CheckpointError(f"--config {options.config}: {error}") from None
    tokenizer = vocab_tokenizer(options, config)
    config.pad_token_id = padding_id(options, config, tokenizer)
    return config, tokenizer


def vocab_tokenizer(options, config: BertConfig) -> BertTokenizer:
    """A tokenizer of ``--vocab`` (``--cased``) whose ids the model has embeddings for, and that cuts
    texts where the model's positions end (BertTokenizer's default is BERT's 512)."""
    tokenizer = BertTokenizer(options.vocab, do_lower_case=options.do_lower_case,
                              model_max_length=config.max_position_embeddings)  # fmt: skip
    config.check_vocabulary(tokenizer.vocab, f"--vocab {options.vocab}")
    return tokenizer


def padding_id(options, config: BertConfig, tokenizer: BertTokenizer) -> int | None:
    """The pad_token_id a run from ``--config`` saves: the id of ``--vocab``'s [PAD], None for a
    vocabulary without one (``minibert vocab --special-tokens`` may leave it out or put it anywhere).
    A config.json that names another id is refused (CheckpointError): the run's model would tell
    transformers (and fine-tuning) to freeze the row of a piece that is not [PAD]."""
    pad = tokenizer.pad_token_id
    if "pad_token_id" not in parse_json(Path(options.config).read_bytes()) or config.pad_token_id == pad:
        return pad
    given, vocabulary = config.pad_token_id, f"--vocab {options.vocab}"
    if given is None:
        said = f"null, but {vocabulary} has [PAD] at id {pad}"
    else:
        has = f"whose [PAD] is id {pad}" if pad is not None else "which has no [PAD]"
        said = f"{given}, {_piece(tokenizer.ids_to_tokens, given)} in {vocabulary}, {has}"
    raise CheckpointError(f"--config {options.config}: pad_token_id is {said}: give \"pad_token_id\": "
                          f"{json.dumps(pad)}, or leave it out (the run then takes --vocab's [PAD])")  # fmt: skip


def init_tokenizer(options, config: BertConfig) -> BertTokenizer:
    """``--init``'s tokenizer: the checkpoint's own, which a ``--vocab`` or ``--cased`` given must
    repeat (``refuse_other_tokenizer``); for a checkpoint without one (config and weights alone),
    ``--vocab``'s, checked as ``--config``'s is."""
    if not has_tokenizer(options.init):
        if options.vocab is None:
            raise CheckpointError(f"--init {options.init} has neither vocab.txt nor tokenizer.json: give --vocab "
                                  "(the vocab.txt the instances' ids come from)")  # fmt: skip
        return vocab_tokenizer(options, config)
    tokenizer = BertTokenizer.from_pretrained(options.init)
    refuse_other_tokenizer(options, tokenizer)
    return tokenizer


def has_tokenizer(name_or_path: str) -> bool:
    """Whether a checkpoint (a folder, a hub id) holds vocab.txt or tokenizer.json."""
    return any(resolve_file(name_or_path, name, required=False) for name in ("vocab.txt", "tokenizer.json"))


def refuse_other_tokenizer(options, tokenizer: BertTokenizer) -> None:
    """A ``--vocab`` or ``--cased`` given with ``--init`` of a checkpoint that has a tokenizer: the
    run trains and saves the checkpoint's, so a --vocab of other pieces (instances whose ids mean
    those pieces) or --cased where it lowercases is a FlagConflictError naming both (``minibert
    pretrain``: a usage error, exit 2), not a flag dropped. One that repeats the checkpoint's is taken."""
    own = f"--init {options.init}'s tokenizer"
    if not options.do_lower_case and tokenizer.do_lower_case:
        raise FlagConflictError(f"--cased: {own} lowercases, and a checkpoint with a tokenizer pre-trains with its "
                                "own; leave out --cased")  # fmt: skip
    if options.vocab is None:
        return
    given, theirs = BertTokenizer(options.vocab).ids_to_tokens, tokenizer.ids_to_tokens  # {id: piece}
    differing = next((index for index in sorted(given.keys() | theirs.keys()) if given.get(index) != theirs.get(index)),
                     None)  # fmt: skip
    if differing is not None:
        raise FlagConflictError(f"--vocab {options.vocab} is not the vocabulary of {own} (id {differing}: "
                                f"{_piece(given, differing)} in --vocab, {_piece(theirs, differing)} in the "
                                "checkpoint's): a checkpoint with a tokenizer pre-trains with its own, on instances "
                                "made with its vocab.txt; leave out --vocab")  # fmt: skip


def _piece(pieces: dict[int, str], index: int) -> str:
    return repr(pieces[index]) if index in pieces else "no piece"


def check_batch_fits(options, count: int, say: bool) -> None:
    """A global batch larger than the data holds some instances several times over (batches wrap
    around the data's end): refused unless ``--allow-wrap``, and then said once (``say``)."""
    if options.batch_size <= count:
        return
    said = (f"--batch-size {options.batch_size} is larger than the {count} instances of --data: every batch would "
            f"hold each instance up to {math.ceil(options.batch_size / count)} times")  # fmt: skip
    if not options.allow_wrap:
        raise DataError(f"{said}; make more instances or a smaller batch, or pass --allow-wrap to train so")
    if say:
        warnings.warn(f"{said} (--allow-wrap)", stacklevel=3)


TASK = Pretraining()
