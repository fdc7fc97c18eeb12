"""BERT's heads: small layers on top of ``BertModel`` that turn its vectors into predictions.

Pre-training gave BERT two heads (the paper's section 3.1): the masked-LM head predicts, at every
position, which word piece was there before it was masked (a transform, then a score against every
word embedding); the next-sentence head reads the pooler output and says whether sentence B
followed sentence A. Fine-tuning puts one small layer on top instead (the paper's section 4):

    BertForSequenceClassification   pooler output → dropout → Linear(H, labels)       sentiment, NLI
    BertForTokenClassification      every token   → dropout → Linear(H, labels)       NER
    BertForQuestionAnswering        every token   → Linear(H, 2): start and end scores SQuAD
    BertForMultipleChoice           each choice's pooler output → Linear(H, 1)        SWAG

The names, the outputs (``loss``, ``logits``, ``start_logits``, ...) and the losses given
``labels`` are transformers', so switching is one line. The tensors carry the hub's names
(``cls.predictions.*``, ``cls.seq_relationship.*``, ``classifier.*``, ``qa_outputs.*``); the rename
table (loading/names.py) maps them onto ``mlm_head``, ``nsp_head``, ``classifier`` and ``qa_outputs`` here.

Shape legend as in model.py; C = choices, V = vocabulary size, K = labels.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .activations import activation
from .config import BertConfig, labels_by_id
from .errors import CheckpointError
from .inputs import choices_as_rows
from .loading.config_fields import PROBLEM_TYPES
from .loading.transformers_names import TransformersNames
from .losses import IGNORE_INDEX, class_ids, classification_loss, masked_lm_loss, skips_padding
from .model import BertModel, BertOutput, ModelOutput
from .pretrained import PretrainedBert

logger = logging.getLogger("minibert")


# ----------------------------------------------------------------------------- outputs


@dataclass
class BertPreTrainingOutput(ModelOutput):
    """transformers' fields, in its order (``out[2]`` is the same in both): the encoder's own output
    is ``model.bert(...)``, its last layer also ``hidden_states[-1]``."""

    loss: torch.Tensor | None = None  # masked-LM loss + next-sentence loss, when labels are given
    prediction_logits: torch.Tensor | None = None  # (B, T, V): masked-LM scores of every piece at each position
    seq_relationship_logits: torch.Tensor | None = None  # (B, 2): [is next sentence, is random sentence]
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class HeadOutput(ModelOutput):
    """What the fine-tuning heads return: transformers' MaskedLMOutput, SequenceClassifierOutput, ..."""

    loss: torch.Tensor | None = None  # a scalar, when labels are given
    logits: torch.Tensor | None = None  # (B, K), (B, T, K), (B, T, V) or (B, C), by head
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class QuestionAnsweringOutput(ModelOutput):
    loss: torch.Tensor | None = None  # (start loss + end loss) / 2, when positions are given
    start_logits: torch.Tensor | None = None  # (B, T): how likely each token starts the answer
    end_logits: torch.Tensor | None = None  # (B, T): ... ends it
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


# ----------------------------------------------------------------------------- the pre-training heads


class MaskedLMHead(nn.Module):
    """Predicts the original piece at each position: transform (dense + activation + LayerNorm),
    then scores against every word embedding (the decoder shares the input embedding matrix) plus
    a bias of its own."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = activation(config.hidden_act)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        """hidden_states (B, T, H), word_embeddings (V, H) — the tied input matrix."""
        x = self.layer_norm(self.activation(self.transform(hidden_states)))  # (B, T, H)
        return F.linear(x, word_embeddings, self.bias)  # (B, T, V)


class BertWithHeads(TransformersNames, PretrainedBert):
    """The encoder (``self.bert``) under one or more heads; subclasses add the heads."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=add_pooling_layer)

    @property
    def embeddings(self):
        return self.bert.embeddings

    def encode(self, input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
               output_attentions, skip_padding: bool = False) -> BertOutput:  # fmt: skip
        """The encoder's outputs; ``skip_padding``: zeros at [PAD] rows, for callers that never read
        them (the tasks): see BertModel.forward."""
        return self.bert(input_ids, attention_mask, token_type_ids, position_ids,
                         output_hidden_states=output_hidden_states, output_attentions=output_attentions,
                         skip_padding=skip_padding, return_dict=True)  # fmt: skip

    def _class_ids(self, labels, name: str, shape: torch.Size, classes: int | None, meaning: str) -> torch.Tensor:
        """``labels`` checked as ids (losses.class_ids: any integer dtype, as many as ``shape``, each in
        [0, classes) or -100; ``meaning`` says so in the error), as int64 on the model's device."""
        return class_ids(labels, name, tuple(shape), classes, meaning).to(self.device)

    def _piece_ids(self, labels, logits: torch.Tensor) -> torch.Tensor:
        """The masked-LM labels (B, T) for its scores (B, T, V)."""
        vocab = logits.shape[-1]
        return self._class_ids(labels, "labels", logits.shape[:2], vocab, f"the original piece's id at each position "
                               f"(B, T), in [0, vocab_size={vocab}), or -100 where no loss counts")  # fmt: skip

    def _next_sentence_ids(self, labels, name: str, logits: torch.Tensor) -> torch.Tensor:
        """The next-sentence labels (B,) for its scores (B, 2)."""
        return self._class_ids(labels, name, logits.shape[:1], 2, "one per pair (B,): 0 (sentence B follows A), "
                               "1 (B is random), or -100 (no loss)")  # fmt: skip

    def _decode_words(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.mlm_head(hidden_states, self.bert.embeddings.word_embeddings.weight)


def refuse_untied(config: BertConfig) -> None:
    """A config of a masked-LM decoder with weights of its own: a CheckpointError (the caller names the file)."""
    if config.extra.get("tie_word_embeddings", True) is not True:
        raise CheckpointError("config field tie_word_embeddings = false: a masked-LM decoder with weights of its own "
                              "is not implemented; minibert's decoder is the word embedding matrix, as in BERT")


class BertForPreTraining(BertWithHeads):
    """BERT with its two pre-training heads: masked-LM (which piece was masked?) and next-sentence
    prediction (does sentence B follow sentence A?, from the pooler output). ``labels`` (B, T):
    the original pieces at masked positions, -100 elsewhere; ``next_sentence_label`` (B,): 0 = B
    follows A, 1 = B is random. The loss is the sum of the two."""

    def __init__(self, config: BertConfig):
        refuse_untied(config)
        super().__init__(config)
        self.mlm_head = MaskedLMHead(config)
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *, labels=None,
                next_sentence_label=None, output_hidden_states: bool = False,
                output_attentions: bool = False, skip_padding: bool = False) -> BertPreTrainingOutput:  # fmt: skip
        with_loss = labels is not None and next_sentence_label is not None
        skip_padding = skips_padding(skip_padding, attention_mask, labels if with_loss else None)
        out = self.encode(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
                          output_attentions, skip_padding)  # fmt: skip
        prediction_logits = self._decode_words(out.last_hidden_state)  # (B, T, V)
        seq_relationship_logits = self.nsp_head(out.pooler_output)  # (B, 2)
        loss = None
        if with_loss:
            next_sentence = self._next_sentence_ids(next_sentence_label, "next_sentence_label", seq_relationship_logits)
            loss = masked_lm_loss(prediction_logits, self._piece_ids(labels, prediction_logits)) + F.cross_entropy(
                seq_relationship_logits, next_sentence
            )
        return BertPreTrainingOutput(
            loss, prediction_logits, seq_relationship_logits, out.hidden_states, out.attentions
        )


class BertForMaskedLM(BertWithHeads):
    """The masked-LM head alone (no pooler, no next-sentence head): fill in ``[MASK]``."""

    def __init__(self, config: BertConfig):
        refuse_untied(config)
        super().__init__(config, add_pooling_layer=False)
        self.mlm_head = MaskedLMHead(config)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *, labels=None,
                output_hidden_states: bool = False, output_attentions: bool = False,
                skip_padding: bool = False) -> HeadOutput:  # fmt: skip
        skip_padding = skips_padding(skip_padding, attention_mask, labels)
        out = self.encode(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
                          output_attentions, skip_padding)  # fmt: skip
        logits = self._decode_words(out.last_hidden_state)  # (B, T, V)
        loss = None if labels is None else masked_lm_loss(logits, self._piece_ids(labels, logits))
        return HeadOutput(loss, logits, out.hidden_states, out.attentions)


class BertForNextSentencePrediction(BertWithHeads):
    """The next-sentence head alone: logits (B, 2), index 0 = "B follows A"."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *, labels=None,
                output_hidden_states: bool = False, output_attentions: bool = False,
                skip_padding: bool = False) -> HeadOutput:  # fmt: skip
        out = self.encode(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
                          output_attentions, skip_padding)  # fmt: skip
        logits = self.nsp_head(out.pooler_output)  # (B, 2)
        loss = None if labels is None else F.cross_entropy(logits, self._next_sentence_ids(labels, "labels", logits))
        return HeadOutput(loss, logits, out.hidden_states, out.attentions)


# ----------------------------------------------------------------------------- the fine-tuning heads


@dataclass(frozen=True)
class Labels:
    """What config.json says about a classifier's labels (transformers' PretrainedConfig fields)."""

    id2label: dict[int, str]  # {0: "NEGATIVE", 1: "POSITIVE"}
    problem_type: str | None  # "single_label_classification", "multi_label_classification", "regression"
    classifier_dropout: float  # before the classifier (training only)

    @property
    def num_labels(self) -> int:
        return len(self.id2label)

    @property
    def label2id(self) -> dict[str, int]:
        return {label: index for index, label in self.id2label.items()}

    @classmethod
    def of(cls, config: BertConfig, announce: bool = False) -> Labels:
        """From config.json: ``id2label`` (its keys are strings in JSON), else ``num_labels``
        (default 2, as transformers) with labels LABEL_0, LABEL_1, ...; ``announce``: log (once, as
        the head is built) when num_labels overrides id2label."""
        id2label, note = labels_by_id(config.extra)
        if note and announce:
            logger.info("config.json: %s", note)
        extra = config.extra
        problem = extra.get("problem_type")
        if problem is not None and problem not in PROBLEM_TYPES:
            raise CheckpointError(f"config field problem_type = {problem!r}: must be single_label_classification, "
                                  "multi_label_classification or regression")  # fmt: skip
        dropout = extra.get("classifier_dropout")
        dropout = config.hidden_dropout_prob if dropout is None else dropout
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise CheckpointError(f"config field classifier_dropout = {dropout!r}: must be a number from 0 to 1")
        return cls(id2label, problem, float(dropout))


class BertWithClassifier(BertWithHeads):
    """The fine-tuning heads, whose outputs are config.json's labels. ``labels`` and ``num_labels`` are
    read from ``self.config`` at each use, as transformers reads them: ``model.config.id2label = {...}``
    renames the labels (a number of labels other than the head's outputs is an error at the next call);
    ``model.config.problem_type = "regression"`` picks the loss of the next call."""

    @property
    def labels(self) -> Labels:
        return Labels.of(self.config)

    @property
    def num_labels(self) -> int:
        return self.config.num_labels

    def _add_classifier(self, outputs: int | None = None) -> None:
        """The fine-tuning heads' one layer: dropout, then Linear(H, outputs) (default: one output
        per label of config.json)."""
        labels = Labels.of(self.config, announce=True)
        self.dropout = nn.Dropout(labels.classifier_dropout)
        self.classifier = nn.Linear(self.config.hidden_size, labels.num_labels if outputs is None else outputs)

    def _checked_num_labels(self) -> int:
        """The classifier's outputs, which must be as many as config.json's labels (one per label)."""
        built, named = self.classifier.out_features, self.config.num_labels
        if built != named:
            raise ValueError(
                f"config.id2label names {named} labels but the classifier has {built} outputs, one per label: "
                f"give config.id2label {built} names, or, for a new head of {named} labels, load one: "
                f"{type(self).__name__}.from_pretrained(path, num_labels={named})"
            )
        return built


class BertForSequenceClassification(BertWithClassifier):
    """One label (or score) per text, from the pooler output: sentiment, NLI, intent, reranking.

    ``labels`` (B,): class ids (single-label: cross-entropy), or (B, K) of 0/1 floats (multi-label:
    binary cross-entropy per label), or (B,) floats with one label (regression: mean squared error),
    as ``problem_type`` in config.json says or, like transformers, as the labels' dtype suggests
    (integers of any dtype: class ids). Labels of another shape, or ids outside [0, K), are a
    ``ValueError`` naming what the loss takes (losses.class_ids), as for every head."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self._add_classifier()
        self.init_weights()

    @property
    def problem_type(self) -> str | None:
        """``config.problem_type``: the loss's kind, set or decided by the first labels seen."""
        return self.config.problem_type

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *, labels=None,
                output_hidden_states: bool = False, output_attentions: bool = False,
                skip_padding: bool = False) -> HeadOutput:  # fmt: skip
        self._checked_num_labels()  # before the encoder's work, which a wrong head would waste
        out = self.encode(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
                          output_attentions, skip_padding)  # fmt: skip
        logits = self.classifier(self.dropout(out.pooler_output))  # (B, K)
        loss = None if labels is None else classification_loss(self.config, logits, labels, self.device)
        return HeadOutput(loss, logits, out.hidden_states, out.attentions)


class BertForTokenClassification(BertWithClassifier):
    """One label per token (named entities, parts of speech): logits (B, T, K); ``labels`` (B, T)
    with -100 where no label counts (padding, the pieces after a word's first)."""

    def __init__(self, config: BertConfig):
        super().__init__(config, add_pooling_layer=False)
        self._add_classifier()
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *, labels=None,
                output_hidden_states: bool = False, output_attentions: bool = False,
                skip_padding: bool = False) -> HeadOutput:  # fmt: skip
        num_labels = self._checked_num_labels()
        skip_padding = skips_padding(skip_padding, attention_mask, labels)
        out = self.encode(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
                          output_attentions, skip_padding)  # fmt: skip
        logits = self.classifier(self.dropout(out.last_hidden_state))  # (B, T, K)
        loss = None
        if labels is not None:
            labels = self._class_ids(labels, "labels", logits.shape[:2], num_labels, "one label id per token (B, T), "
                                     f"in [0, num_labels={num_labels}), or -100 where none counts")  # fmt: skip
            loss = F.cross_entropy(logits.view(-1, num_labels), labels.view(-1), ignore_index=IGNORE_INDEX)
        return HeadOutput(loss, logits, out.hidden_states, out.attentions)


class BertForQuestionAnswering(BertWithClassifier):
    """Extractive question answering: for ``[CLS] question [SEP] context [SEP]``, a start and an end
    score per token; the answer is the best span of context tokens. ``start_positions`` /
    ``end_positions`` (B,), clamped to [0, T] as transformers does: a position past the end becomes T
    and is ignored; a negative one becomes 0, the [CLS] answer, and counts in the loss."""

    def __init__(self, config: BertConfig):
        super().__init__(config, add_pooling_layer=False)
        outputs = Labels.of(config, announce=True).num_labels  # 2: start, end (transformers fails at each call)
        if outputs != 2:
            raise ValueError(f"BertForQuestionAnswering scores a start and an end: num_labels must be 2, not {outputs}")
        self.qa_outputs = nn.Linear(config.hidden_size, outputs)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *, start_positions=None,
                end_positions=None, output_hidden_states: bool = False,
                output_attentions: bool = False, skip_padding: bool = False) -> QuestionAnsweringOutput:  # fmt: skip
        # The loss is a softmax over every position, padding included (as transformers computes it):
        # with positions given, padded positions are computed even when asked to skip them.
        with_loss = start_positions is not None and end_positions is not None
        out = self.encode(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states,
                          output_attentions, skip_padding and not with_loss)  # fmt: skip
        logits = self.qa_outputs(out.last_hidden_state)  # (B, T, 2)
        start_logits, end_logits = (part.squeeze(-1).contiguous() for part in logits.split(1, dim=-1))  # (B, T)
        loss = None
        if with_loss:
            ignored = start_logits.shape[1]  # a position past the end: no loss (a negative one is 0: [CLS])
            given = {"start_positions": start_positions, "end_positions": end_positions}
            meaning = "one token position per question (B,), clamped to [0, T]: past the end, ignored"
            start, end = (self._class_ids(positions, name, start_logits.shape[:1], None, meaning).clamp(0, ignored)
                          for name, positions in given.items())  # fmt: skip
            loss = (F.cross_entropy(start_logits, start, ignore_index=ignored)
                    + F.cross_entropy(end_logits, end, ignore_index=ignored)) / 2  # fmt: skip
        return QuestionAnsweringOutput(loss, start_logits, end_logits, out.hidden_states, out.attentions)


class BertForMultipleChoice(BertWithClassifier):
    """One score per choice: inputs (B, C, T), each choice framed with its question; logits (B, C);
    ``labels`` (B,): the right choice's index."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self._add_classifier(outputs=1)  # one score per choice
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *, labels=None,
                output_hidden_states: bool = False, output_attentions: bool = False,
                skip_padding: bool = False) -> HeadOutput:  # fmt: skip
        choices, rows = choices_as_rows(input_ids, attention_mask, token_type_ids, position_ids)  # (B·C, T) each
        out = self.encode(*rows, output_hidden_states, output_attentions, skip_padding)
        logits = self.classifier(self.dropout(out.pooler_output)).view(-1, choices)  # (B·C, 1) -> (B, C)
        loss = None
        if labels is not None:
            labels = self._class_ids(labels, "labels", logits.shape[:1], choices, "the right choice's index per "
                                     f"question (B,), in [0, choices={choices}), or -100 (no loss)")  # fmt: skip
            loss = F.cross_entropy(logits, labels)
        return HeadOutput(loss, logits, out.hidden_states, out.attentions)
