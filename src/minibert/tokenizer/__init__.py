"""BERT's tokenizer: text → word pieces → ids, and the call API transformers' users know.

    >>> from minibert.tokenizer import BertTokenizer

The modules, read in this order:

* ``algorithm.py`` — the algorithm, plain, as Google's tokenization.py writes it: ``BasicTokenizer``
  (clean, space out CJK ideographs, strip accents, lower-case, split on whitespace and punctuation)
  and ``WordPieceTokenizer`` (greedy longest-match-first);
* ``fast_basic.py`` — ``FastBasicTokenizer``, the same words through ``str.translate`` tables, with
  offsets: what ``BertTokenizer`` runs (a test proves it equal to the plain one);
* ``google.py`` — ``google_tokenizer``: Google's ``FullTokenizer`` character for character, for
  outputs that must equal Google's (``pretraining-data``);
* ``bert_tokenizer.py`` — ``BertTokenizer``, a thin core: the vocabulary, special tokens, ids back
  to text;
* ``added_tokens.py`` — what ``add_tokens`` adds: pieces cut out of a text before the two stages,
  and every rule of adding them (``AddedTokens``);
* ``framing.py`` — ``[CLS] A [SEP] (B [SEP])``, the segment ids: the one home of BERT's framing;
* ``call_api.py`` — transformers' call API: framing, truncation, overflow windows, padding, ``pad``;
  ``decoding.py`` — ids back to text: ``decode``, ``batch_decode``;
  ``pad_columns.py`` — what ``pad`` is given, as columns, and its tensors (a collator's labels keep their type);
  ``call_request.py`` — one ``CallRequest`` per call, its arguments parsed and checked once;
  ``encoding.py`` — truncation plans, overflow windows, padding, tensors;
  ``batch_encoding.py`` — ``BatchEncoding`` and the maps back to words and characters;
* ``wordpiece_plain.py`` — learning a vocabulary from text as ``tokenizers`` does, plainly
  (``learn_vocabulary_plainly``); ``wordpiece_trainer.py`` — the same, fast (``train_wordpiece``,
  what ``minibert vocab`` runs), over the word counts of ``word_counts.py``;
* ``files.py`` — vocab.txt, tokenizer_config.json, the casing of Google's checkpoints;
  ``directory.py`` — the files ``from_pretrained`` reads and ``save_pretrained`` writes;
  ``added_token_files.py`` — where a folder keeps its added tokens, as transformers 5 reads them;
  ``tokenizer_json.py`` — a repository's ``tokenizer.json``, its only vocabulary where it has no ``vocab.txt``;
  ``named_class.py`` — the ``tokenizer_class`` a folder names, as ``AutoTokenizer`` reads it;
  ``arguments.py`` — the checks of what users pass.
"""

from .added_tokens import AddedToken
from .algorithm import BasicTokenizer, WordPieceTokenizer, is_punctuation, is_removed_in_cleaning
from .batch_encoding import BatchEncoding
from .bert_tokenizer import BertTokenizer
from .fast_basic import FastBasicTokenizer
from .files import google_lower_case
from .vocab_file import load_vocab
from .wordpiece_trainer import save_vocabulary, train_wordpiece

# transformers 5's BertTokenizerFast is its BertTokenizer (one class, the tokenizers library's speed
# and offsets), and so it is here: the name tutorials written for transformers 4 import.
BertTokenizerFast = BertTokenizer

__all__ = [
    "AddedToken",
    "BasicTokenizer",
    "BatchEncoding",
    "BertTokenizer",
    "BertTokenizerFast",
    "FastBasicTokenizer",
    "WordPieceTokenizer",
    "google_lower_case",
    "is_punctuation",
    "is_removed_in_cleaning",
    "load_vocab",
    "save_vocabulary",
    "train_wordpiece",
]
