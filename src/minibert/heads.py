"""BERT's heads: small layers on top of ``BertModel`` that turn its vectors into predictions.

Pre-training gave BERT two heads (the paper's section 3.1):

* the masked-LM head predicts, at every position, which word piece was there before it was masked:
  a transform (dense + activation + LayerNorm), then a score against every word embedding;
* the next-sentence head reads the pooler output and says whether sentence B followed sentence A.

Their tensors carry the hub's names ``cls.predictions.*`` and ``cls.seq_relationship.*``; THE
rename table (weights.py) maps them onto ``mlm_head`` and ``nsp_head`` below.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .activations import activation
from .config import BertConfig
from .errors import CheckpointError
from .model import BertModel, ModelOutput
from .pretrained import PretrainedBert


@dataclass
class BertPreTrainingOutput(ModelOutput):
    prediction_logits: torch.Tensor  # (B, T, vocab_size): masked-LM scores of every piece at each position
    seq_relationship_logits: torch.Tensor  # (B, 2): [is next sentence, is random sentence]
    last_hidden_state: torch.Tensor | None = None
    pooler_output: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


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
        """hidden_states (B, T, H), word_embeddings (vocab_size, H) — the tied input matrix."""
        x = self.layer_norm(self.activation(self.transform(hidden_states)))  # (B, T, H)
        return F.linear(x, word_embeddings, self.bias)  # (B, T, vocab_size)


class BertForPreTraining(PretrainedBert):
    """BERT with its two pre-training heads: masked-LM (which piece was masked?) and next-sentence
    prediction (does sentence B follow sentence A?, from the pooler output)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        if config.extra.get("tie_word_embeddings", True) is not True:
            raise CheckpointError(
                "config field tie_word_embeddings = false: a masked-LM decoder with weights of its own is "
                "not implemented; minibert's decoder is the word embedding matrix, as in BERT"
            )
        self.config = config
        self.bert = BertModel(config)
        self.mlm_head = MaskedLMHead(config)
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        self.init_weights()

    @property
    def embeddings(self):
        return self.bert.embeddings

    def forward(
        self,
        input_ids,
        attention_mask=None,
        token_type_ids=None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertPreTrainingOutput:
        out = self.bert(
            input_ids,
            attention_mask,
            token_type_ids,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        return BertPreTrainingOutput(
            prediction_logits=self.mlm_head(out.last_hidden_state, self.bert.embeddings.word_embeddings.weight),
            seq_relationship_logits=self.nsp_head(out.pooler_output),
            last_hidden_state=out.last_hidden_state,
            pooler_output=out.pooler_output,
            hidden_states=out.hidden_states,
            attentions=out.attentions,
        )
