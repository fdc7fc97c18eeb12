"""The special tokens of a BertTokenizer, and the tokens added to it, as transformers manages them.

BERT frames every input with roles: ``[CLS] A [SEP] B [SEP]``, ``[UNK]`` for a word the vocabulary
cannot spell, ``[PAD]`` and ``[MASK]``. transformers lets a user add pieces to a tokenizer
(``add_tokens``, ``add_special_tokens``): each is cut out of every text whole before the word
pieces are made (added_tokens.py). This mixin holds that part of ``BertTokenizer``'s surface, so
the class itself reads as the algorithm and its files.
"""

from __future__ import annotations

from ..errors import CheckpointError
from .added_tokens import AddedToken
from .files import SPECIAL_TOKEN_NAMES


class SpecialTokens:
    """The roles, their ids, and the added tokens; mixed into ``BertTokenizer`` (bert_tokenizer.py),
    which provides ``vocab``, ``vocab_file``, ``added`` and ``do_basic_tokenize``."""

    def _set_special_tokens(self, tokens: dict[str, str], additional: list[str]) -> None:
        """The roles ([UNK], [SEP], [PAD], [CLS], [MASK]) and their ids. [UNK], [CLS] and [SEP] frame
        every input; [PAD] and [MASK] are only needed to pad and to mask, so a vocabulary without
        them (Google's test vocabularies) loads, and padding or fill_mask then raise, naming the
        missing piece."""
        missing = [tokens[name] for name in ("unk_token", "sep_token", "cls_token") if tokens[name] not in self.vocab]
        if missing:
            raise CheckpointError(f"vocabulary file {self.vocab_file} lacks the special tokens {missing}")
        for name in SPECIAL_TOKEN_NAMES:
            setattr(self, name, tokens[name])
            setattr(self, name.replace("_token", "_token_id"), self.vocab.get(tokens[name]))  # None: cannot pad/mask
        absent = [token for token in additional if token not in self.vocab]
        if absent:
            raise CheckpointError(f"additional special tokens {absent} are not in the vocabulary {self.vocab_file}")
        self.additional_special_tokens = additional

    def _special_tokens(self) -> list[str]:
        roles = [getattr(self, name) for name in SPECIAL_TOKEN_NAMES]
        return list(dict.fromkeys(t for t in [*roles, *self.additional_special_tokens] if t in self.vocab))

    def _make_matchers(self) -> None:
        specials = self._special_tokens()
        self.added.make_matchers(specials)
        self.all_special_ids = sorted({self.vocab[token] for token in specials})

    def _normalized(self, text: str) -> str:
        return self.added.normalized(text)

    def add_special_tokens(self, special_tokens_dict: dict) -> int:
        """Add special tokens, as transformers does: ``{"additional_special_tokens": ["<e1>", ...]}``
        and/or a role (``"mask_token": "[MASK]"``, ...). A new piece gets the next id; in a text it
        is kept whole, matched exactly (not lowercased). Returns how many pieces were new: grow
        the model's embeddings by as many (``model.resize_token_embeddings(len(tokenizer))``)."""
        unknown = set(special_tokens_dict) - {"additional_special_tokens", *SPECIAL_TOKEN_NAMES}
        if unknown:
            raise ValueError(f"add_special_tokens: unknown keys {sorted(unknown)}")
        added = 0
        for name, value in special_tokens_dict.items():
            tokens = list(value) if name == "additional_special_tokens" else [value]
            if not all(isinstance(token, str) and token for token in tokens):
                raise TypeError(f"add_special_tokens: {name} must be non-empty strings, got {value!r}")
            added += sum(self.added.add_special(token) for token in tokens)
            if name == "additional_special_tokens":
                self.additional_special_tokens = list(dict.fromkeys([*self.additional_special_tokens, *tokens]))
            else:
                setattr(self, name, tokens[0])
                setattr(self, name.replace("_token", "_token_id"), self.vocab[tokens[0]])
        self._make_matchers()
        return added

    def add_tokens(self, new_tokens, special_tokens: bool = False) -> int:
        """Add tokens the vocabulary lacks, as transformers does (added_tokens.py): each is cut out
        of every text before word pieces are made, wherever it occurs; an ordinary token is matched
        after normalization (``"NewWord"`` matches ``"newwords"``: ``newword`` + ``s``), a special
        one (``special_tokens=True``) as typed. ``new_tokens``: a str, or a list of str or
        ``AddedToken`` (minibert's or ``tokenizers``'). A token gets the next id, or keeps the
        vocabulary's if it has the piece. Returns how many tokens were added or changed (as
        transformers counts): grow the model's embeddings with
        ``model.resize_token_embeddings(len(tokenizer))``.

        >>> tok.add_tokens(["NewWord"])                 # doctest: +SKIP
        1
        >>> tok.tokenize("NEWWORDS")                    # doctest: +SKIP
        ['newword', 's']
        """
        values = [new_tokens] if isinstance(new_tokens, str) or hasattr(new_tokens, "content") else list(new_tokens)
        tokens = [AddedToken.of(value, special_tokens) for value in values]
        if not self.do_basic_tokenize and any(token.normalized for token in tokens):
            raise NotImplementedError("add_tokens with do_basic_tokenize=False is not implemented (transformers' "
                                      "fast tokenizer, which minibert follows here, always normalizes)")  # fmt: skip
        count = self.added.add(tokens, set(self._special_tokens()))
        self._make_matchers()
        return count

    @property
    def added_tokens_decoder(self) -> dict[int, AddedToken]:
        """{id: AddedToken}: the special tokens and every added token, as transformers lists them."""
        tokens = {self.vocab[t]: AddedToken(t, normalized=False, special=True) for t in self._special_tokens()}
        tokens.update({self.vocab[content]: token for content, token in self.added.tokens.items()})
        return dict(sorted(tokens.items()))

    @property
    def special_tokens_map(self) -> dict[str, str]:
        """{"unk_token": "[UNK]", "sep_token": "[SEP]", ...}: the special tokens by role."""
        return dict(zip(SPECIAL_TOKEN_NAMES, (self.unk_token, self.sep_token, self.pad_token, self.cls_token,
                                              self.mask_token)))  # fmt: skip

    @property
    def all_special_tokens(self) -> list[str]:
        """The special tokens the vocabulary has, in the roles' order (as transformers lists them)."""
        return list(dict.fromkeys(token for token in self.special_tokens_map.values() if token in self.vocab))
