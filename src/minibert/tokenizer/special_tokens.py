"""The special tokens of a BertTokenizer, and the tokens added to it, as transformers manages them.

BERT frames every input with roles: ``[CLS] A [SEP] B [SEP]``, ``[UNK]`` for a word the vocabulary
cannot spell, ``[PAD]`` and ``[MASK]``; transformers' two other roles, ``bos_token`` and ``eos_token``,
are None on BERT until set (a warm-started bert2bert sets them to [CLS] and [SEP]). transformers lets a
user add pieces to a tokenizer (``add_tokens``, ``add_special_tokens``): each is cut out of every text
whole before the word pieces are made (added_tokens.py). This mixin holds that part of
``BertTokenizer``'s surface, so the class itself reads as the algorithm and its files.

A role is also an attribute, as in transformers: ``tokenizer.pad_token = "[unused0]"`` (or
``pad_token_id = 1``) changes the role and its id together, so padding, ``all_special_ids`` and the
saved files follow. As in transformers, what the tokenizer was made with stays: the pieces cut out of
a text as typed and skipped by ``decode(skip_special_tokens=True)`` (``tokenizers``' added tokens),
the framing ``[CLS] A [SEP]`` (its post-processor) and the id WordPiece gives an unknown word; the
tokenizer saved and loaded again takes the new roles for all of them (transformers' does too).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from ..errors import CheckpointError, InputTypeError
from .added_tokens import AddedToken, AddedTokens
from .arguments import token_id
from .fast_basic import FastBasicTokenizer
from .files import SPECIAL_TOKEN_NAMES

FRAMING_ROLES = ("unk_token", "sep_token", "cls_token")  # every input needs them: never None


def _role(name: str) -> property:
    """The attribute ``name`` ("pad_token"): the role's token (None: no such role); assigning it sets
    the role (``SpecialTokens._set_role``)."""
    return property(lambda self: self._role_tokens[name], lambda self, token: self._set_role(name, token),
                    doc=f"The {name.removesuffix('_token')} role's token, or None.")  # fmt: skip


def _role_id(name: str) -> property:
    """The attribute ``name + "_id"``: the role's id (None: no role, or a piece the vocabulary
    lacks); assigning an id sets the role to that id's piece, as in transformers."""

    def get(self) -> int | None:
        token = self._role_tokens[name]
        return None if token is None else self.vocab.get(token)

    def set_id(self, index) -> None:
        piece = None if index is None else self.ids_to_tokens.get(token_id(index))
        if index is not None and piece is None:
            raise ValueError(f"{name}_id = {index!r}: no piece has that id")
        self._set_role(name, piece)

    return property(get, set_id, doc=f"The id of ``{name}``, or None.")


class SpecialTokens:
    """The roles, their ids, and the added tokens; mixed into ``BertTokenizer`` (bert_tokenizer.py),
    which provides ``vocab``, ``ids_to_tokens``, ``vocab_file``, ``added`` and ``do_basic_tokenize``."""

    # BERT's roles; bos and eos (None unless set, as in transformers' BERT) are what seq2seq code reads.
    bos_token, bos_token_id = _role("bos_token"), _role_id("bos_token")
    eos_token, eos_token_id = _role("eos_token"), _role_id("eos_token")
    unk_token, unk_token_id = _role("unk_token"), _role_id("unk_token")
    sep_token, sep_token_id = _role("sep_token"), _role_id("sep_token")
    pad_token, pad_token_id = _role("pad_token"), _role_id("pad_token")
    cls_token, cls_token_id = _role("cls_token"), _role_id("cls_token")
    mask_token, mask_token_id = _role("mask_token"), _role_id("mask_token")

    def _set_special_tokens(self, tokens: dict[str, str], extra: list[str]) -> None:
        """The roles ([UNK], [SEP], [PAD], [CLS], [MASK]) and their ids, and the extra special tokens
        (``extra_special_tokens``, transformers 4's ``additional_special_tokens``). [UNK], [CLS] and
        [SEP] frame every input; [PAD] and [MASK] are only needed to pad and to mask, so a vocabulary
        without them (Google's test vocabularies) loads, and padding or fill_mask then raise, naming
        the missing piece. An extra special token the tokenizer lacks is added, taking the next id
        (``_register_extra_special_tokens``), as transformers 5's constructor adds it. The roles the
        vocabulary has are what is matched as typed from now on, and [CLS] and [SEP] the framing."""
        for name in FRAMING_ROLES:
            _check_not_none(name, tokens[name])
        missing = [tokens[name] for name in FRAMING_ROLES if tokens[name] not in self.vocab]
        if missing:
            raise CheckpointError(f"vocabulary file {self.vocab_file} lacks the special tokens {missing}")
        self._role_tokens = {name: getattr(tokens[name], "content", tokens[name]) for name in SPECIAL_TOKEN_NAMES}
        self._extra_special_tokens = list(dict.fromkeys(extra))
        self._framing_ids = (self.cls_token_id, self.sep_token_id)  # tokenizers' post-processor: made once
        self.added.set_roles(self._roles())

    def _set_role(self, name: str, token) -> None:
        """``tokenizer.pad_token = token``: the role (and so its id) is ``token`` (str or AddedToken;
        None: no such role, refused for [UNK], [CLS] and [SEP]). A piece the tokenizer lacks is
        refused (transformers would give it [UNK]'s id): ``add_special_tokens`` adds it."""
        token = getattr(token, "content", token)
        if name in FRAMING_ROLES:
            _check_not_none(name, token)
        if token is not None and (not isinstance(token, str) or token not in self.vocab):
            raise ValueError(f"{name} = {token!r}: the tokenizer has no such piece (transformers would give it "
                             "[UNK]'s id); add it with tokenizer.add_special_tokens"
                             f"({{{name!r}: {token!r}}})")  # fmt: skip
        self._role_tokens = {**self._role_tokens, name: token}  # (a new dict: a copy.copy keeps its own)
        self._null_roles = {role: file for role, file in self._null_roles.items() if role != name}

    _null_roles: dict[str, str] = {}  # role → the file that sets it null (from_pretrained)

    def role_missing(self, name: str) -> str:
        """Why the role ``name`` (``"pad_token"``, ``"mask_token"``) has no id, for the error of
        what needs it (padding, fill_mask): no such role, or a token the vocabulary lacks."""
        token = getattr(self, name)
        if token is None:
            where = self._null_roles.get(name)
            return f"the tokenizer has no {name} ({where} sets it null)" if where else f"the tokenizer's {name} is None"
        return f"the vocabulary {self.vocab_file.name} has no {token} piece"

    def _register_extra_special_tokens(self) -> None:
        """Each extra special token not yet an added token becomes one, matched as typed (a new
        piece takes the next id; a piece of the vocabulary keeps its own, e.g. ``[unused0]``); one a
        file already lists as an added token stays as the file has it (transformers 5 does both)."""
        tokens = self._extra_special_tokens
        self.added.add([AddedToken(token, special=True) for token in tokens if token not in self.added.tokens],
                       set(), "BertTokenizer(extra_special_tokens=...)")  # fmt: skip

    def _roles(self) -> list[str]:
        """The role tokens the vocabulary has, in transformers' order (bos, eos, unk, sep, pad, cls, mask)."""
        return list(dict.fromkeys(token for token in self.special_tokens_map.values() if token in self.vocab))

    def _normalized(self, text: str) -> str:
        return self.added.normalized(text)

    @property
    def extra_special_tokens(self) -> list[str]:
        """The special tokens beyond the roles (``<e1>``, ...): transformers 5's name. Assigning a
        list only changes which tokens count as special (``all_special_ids``), as in transformers;
        ``add_special_tokens`` also adds them."""
        return list(self._extra_special_tokens)

    @extra_special_tokens.setter
    def extra_special_tokens(self, tokens) -> None:
        self._extra_special_tokens = token_strings(tokens or [])  # (a str is refused, not split into characters)

    additional_special_tokens = extra_special_tokens  # transformers 4's name for the same list

    @property
    def extra_special_tokens_ids(self) -> list[int]:
        return self.convert_tokens_to_ids(self._extra_special_tokens)

    def add_special_tokens(self, special_tokens_dict: dict, replace_extra_special_tokens: bool = True) -> int:
        """Add special tokens, as transformers 5 does: ``{"extra_special_tokens": ["<e1>", ...]}``
        (or transformers 4's key ``additional_special_tokens``) and/or a role (``"mask_token":
        "[MASK]"``, ...). A new piece gets the next id; in a text it is kept whole, matched exactly
        (not lowercased). The list given *replaces* ``extra_special_tokens``
        (``replace_extra_special_tokens=False``: extends it); a token it drops stays an added token
        (still cut out whole and skipped by decode) but no longer counts in ``all_special_ids``.
        Returns how many tokens were added or changed, as transformers counts them (a piece of the
        vocabulary not yet an added token counts): grow the model's embeddings with
        ``model.resize_token_embeddings(len(tokenizer))``."""
        tokens_dict = dict(special_tokens_dict)
        if "additional_special_tokens" in tokens_dict and not tokens_dict.get("extra_special_tokens"):
            tokens_dict["extra_special_tokens"] = tokens_dict.pop("additional_special_tokens")
        unknown = set(tokens_dict) - {"extra_special_tokens", *SPECIAL_TOKEN_NAMES}
        if unknown:
            raise ValueError(f"add_special_tokens: unknown keys {sorted(unknown)}; the keys are "
                             f"{', '.join(SPECIAL_TOKEN_NAMES)} and extra_special_tokens")  # fmt: skip
        tokens: list[AddedToken] = []
        roles: dict[str, str] = {}
        extra = list(self._extra_special_tokens)  # changed only once every key has been checked and added
        for name, value in tokens_dict.items():
            values = value if name == "extra_special_tokens" else [value]
            if name == "extra_special_tokens" and not isinstance(value, (list, tuple)):
                raise TypeError(f"add_special_tokens: extra_special_tokens must be a list, got {value!r}")
            given = [AddedToken.of(token, special=True) for token in values]
            if not all(token.content for token in given):
                raise TypeError(f"add_special_tokens: {name} must be non-empty strings, got {value!r}")
            if name == "extra_special_tokens":
                known = [] if replace_extra_special_tokens else extra
                given = [token for token in given if token.content not in known]
                if replace_extra_special_tokens and given:
                    extra = list(dict.fromkeys(token.content for token in given))
                else:
                    extra.extend(token.content for token in given)
            else:
                roles[name] = given[0].content
            tokens.extend(given)
        added = self.added.add(tokens, set(), "add_special_tokens")
        self._extra_special_tokens = extra
        self._role_tokens = {**self._role_tokens, **roles}  # (cut out as typed now; the framing stays)
        self._null_roles = {role: file for role, file in self._null_roles.items() if role not in roles}
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
        return self.added.add(tokens, set(self.all_special_tokens))

    @property
    def added_tokens_decoder(self) -> dict[int, AddedToken]:
        """{id: AddedToken}: the roles the tokenizer was made with and every added token, by id, as
        transformers lists them."""
        tokens = {self.vocab[t]: AddedToken(t, normalized=False, special=True) for t in self.added.roles}
        tokens.update({self.vocab[content]: token for content, token in self.added.tokens.items()})
        return dict(sorted(tokens.items()))

    @property
    def added_tokens_encoder(self) -> dict[str, int]:
        """{token: id} of ``added_tokens_decoder``, in id order (transformers' name)."""
        return {token.content: index for index, token in self.added_tokens_decoder.items()}

    def lowercasing_first(self):
        """A copy of this tokenizer that lowercases each text first, accents kept as they were: what
        sentence-transformers' ``do_lower_case`` makes of a cased tokenizer (a ``Lowercase`` step in
        front of its normalizer). The added tokens are registered again under that normalization, as
        ``tokenizers`` refreshes them when its normalizer changes: one matched after normalization
        matches the lowercased text ("COVID" meets an added ``covid``) and the words around it are
        lowercased too; special ones are still matched as typed. This tokenizer stays as it was (the
        copy has its own vocabulary, so a token added to one is not in the other)."""
        if self.basic.do_lower_case:
            return self
        if not self.do_basic_tokenize:  # words are what whitespace separates: nothing would lowercase them
            raise NotImplementedError("lowercasing the text first (do_lower_case) on a tokenizer with "
                                      "do_basic_tokenize=False is not implemented")  # fmt: skip
        before = self.basic
        lowered = copy.copy(self)
        lowered.basic = FastBasicTokenizer(True, before.strip_accents, before.tokenize_chinese_chars)
        lowered.vocab, lowered.ids_to_tokens = dict(self.vocab), dict(self.ids_to_tokens)
        lowered._extra_special_tokens = list(self._extra_special_tokens)
        lowered.added = AddedTokens(lowered.vocab, lowered.ids_to_tokens, lowered.basic, self.vocab_file)
        lowered.added.set_roles(list(self.added.roles))
        # As a tokenizer read from files restores them: each under its id, then checked under the new
        # normalization (two tokens lowercased alike: tokenizers' match is not defined).
        why = "lowercasing the text first (do_lower_case)"
        lowered.added.restore([(self.vocab[content], token) for content, token in self.added.tokens.items()], why)
        lowered.added.check_restored(why, error=ValueError)  # (not a file's fault: a ValueError)
        return lowered

    def get_added_vocab(self) -> dict[str, int]:
        """{token: id} of the roles and the added tokens, in id order, as transformers 5 gives it."""
        return self.added_tokens_encoder

    @property
    def special_tokens_map(self) -> dict[str, str]:
        """{"unk_token": "[UNK]", "sep_token": "[SEP]", ...}: the special tokens by role, in
        transformers' order (bos, eos, unk, sep, pad, cls, mask); a role that is None is left out,
        so that ``add_special_tokens(tokenizer.special_tokens_map)`` takes it back (as in transformers
        5, the extra special tokens are not in it: ``extra_special_tokens``)."""
        return {name: token for name, token in self._role_tokens.items() if token is not None}

    @property
    def all_special_tokens(self) -> list[str]:
        """The roles the vocabulary has, in transformers' order (bos, eos, unk, sep, pad, cls, mask), then the
        extra special tokens, each once: as transformers 5 lists them."""
        return list(dict.fromkeys([*self._roles(), *self._extra_special_tokens]))

    @property
    def all_special_ids(self) -> list[int]:
        """The ids of ``all_special_tokens``, in its order (transformers' ``all_special_ids``)."""
        return self.convert_tokens_to_ids(self.all_special_tokens)


def token_strings(tokens: Iterable) -> list[str]:
    """Special tokens given as str or AddedToken (minibert's or ``tokenizers``'), as str."""
    if isinstance(tokens, str):
        raise InputTypeError(f"extra_special_tokens must be a list of tokens, got the str {tokens!r}")
    strings = [getattr(token, "content", token) for token in tokens]
    if not all(isinstance(token, str) and token for token in strings):
        raise InputTypeError(f"extra_special_tokens must be non-empty strings or AddedTokens, got {list(tokens)!r}")
    return strings


def _check_not_none(name: str, token) -> None:
    if token is None:
        raise ValueError(f"{name} cannot be None: BERT frames every input with [CLS] and [SEP] and spells what "
                         "its vocabulary lacks as [UNK]")  # fmt: skip
