"""Added tokens: whole pieces cut out of a text before BERT's two stages (``add_tokens``).

A vocabulary is fixed at pre-training, but a fine-tuning domain has words it lacks ("COVID-19",
a product name, entity markers such as ``<e1>``). transformers' answer, which minibert follows::

    >>> tok.add_tokens(["COVID-19"])                      # doctest: +SKIP
    1
    >>> tok.tokenize("covid-19 cases")                    # doctest: +SKIP
    ['covid-19', 'cases']
    >>> model.resize_token_embeddings(len(tok))           # doctest: +SKIP

Each added token gets the id after the vocabulary's (or keeps its id, if the vocabulary already
has the piece), and is then cut out of every text *before* the basic tokenizer and WordPiece run,
wherever it occurs — even inside a word: with ``"newword"`` added, ``"newwords"`` becomes
``newword`` + ``s``, and that ``s`` is a word of its own (not ``##s``). Two kinds, as in Hugging
Face ``tokenizers``:

* **matched as typed** (``normalized=False``): the special tokens (``[CLS]``, ``[MASK]``, what
  ``add_special_tokens`` adds), looked for in the raw text first;
* **matched after normalization** (``normalized=True``, what ``add_tokens`` gives an ordinary
  token): the token and the rest of the text are both cleaned, accent-stripped and lowercased as
  the vocabulary expects (``BasicTokenizer.normalize``), so ``"NewWord"`` also matches
  ``"NEWWORD"``, and the piece is spelled ``newword`` (``convert_ids_to_tokens``).

Where several added tokens could match, the leftmost wins, then the longest (``"abc"`` before
``"ab"``), as in ``tokenizers``' Aho-Corasick matcher. What that library does and minibert refuses
rather than guess: tokens that only match whole words or swallow the spaces around them
(``single_word``, ``lstrip``, ``rstrip``), a token that normalizes to nothing, two tokens that
normalize to the same text (``tokenizers`` then picks one at random per process), turning a
role (``[MASK]``) into an ordinary token, and re-adding a token with options that leave
transformers' tokenizer disagreeing with its own saved copy (``check_readdable``).
"""

from __future__ import annotations

import re
from collections import ChainMap
from dataclasses import dataclass
from pathlib import Path

from ..errors import CheckpointError
from .vocab_file import repeated_line


@dataclass(frozen=True)
class AddedToken:
    """A token to add, with the options of ``tokenizers.AddedToken`` (which is accepted too).

    ``normalized=None`` means: matched after normalization unless the token is special."""

    content: str
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool | None = None
    special: bool = False

    @classmethod
    def of(cls, value, special: bool) -> AddedToken:
        """A str, a minibert ``AddedToken`` or a ``tokenizers.AddedToken`` (read by its attributes),
        as an ``AddedToken`` with every option decided; refused if minibert cannot match it exactly."""
        if isinstance(value, str):
            token = cls(value, special=special)
        elif isinstance(getattr(value, "content", None), str):
            options = {name: getattr(value, name, False) for name in ("single_word", "lstrip", "rstrip")}
            token = cls(value.content, normalized=getattr(value, "normalized", None),
                        special=getattr(value, "special", False) or special, **options)  # fmt: skip
        else:
            raise TypeError(f"added tokens must be str or AddedToken, got {value!r}")
        for name in ("single_word", "lstrip", "rstrip"):
            if getattr(token, name):
                raise NotImplementedError(f"added token {token.content!r}: {name}=True is not implemented "
                                          "(minibert matches them anywhere, spaces not included)")  # fmt: skip
        normalized = (not token.special) if token.normalized is None else bool(token.normalized)
        if token.special and normalized:
            raise NotImplementedError(f"added token {token.content!r}: a special token matched after normalization "
                                      "is not implemented (special tokens are matched as typed)")  # fmt: skip
        return cls(token.content, normalized=normalized, special=bool(token.special))

    def __str__(self) -> str:  # its content, as tokenizers.AddedToken (f"{token}"; repr() shows the options)
        return self.content

    def as_json(self) -> dict:
        """As transformers writes it in tokenizer_config.json's ``added_tokens_decoder``."""
        return {"content": self.content, "lstrip": False, "normalized": bool(self.normalized), "rstrip": False,
                "single_word": False, "special": self.special}  # fmt: skip


class Matcher:
    """Leftmost-longest matching of fixed strings, each standing for a token id.

    A regular expression of the strings, longest first: Python's ``re`` tries alternatives in
    order, so at the leftmost position where any string occurs, the longest one wins — the match
    rule of ``tokenizers``' Aho-Corasick automaton (``MatchKind::LeftmostLongest``)."""

    def __init__(self, ids: dict[str, int]):
        self.ids = ids
        strings = sorted(ids, key=len, reverse=True)
        self.pattern = re.compile("|".join(re.escape(string) for string in strings)) if strings else None
        self.first_characters = {string[0] for string in strings}

    def __bool__(self) -> bool:
        return self.pattern is not None

    def occurs_in(self, text: str) -> bool:
        """Does any of the strings occur in ``text``?"""
        return self.pattern is not None and self.pattern.search(text) is not None

    def may_occur_in(self, text: str) -> bool:
        """A quick test before the search: does any string's first character occur?"""
        return any(character in text for character in self.first_characters)

    def finditer(self, text: str):
        """(start, end, id) of each match, left to right, not overlapping."""
        if self.pattern is None:
            return
        for match in self.pattern.finditer(text):
            yield match.start(), match.end(), self.ids[match.group()]


# A unit of text on its way to WordPiece: (the id of the added or special token it is, or None;
# the word; with tracking, the index in the text of each of its characters, else None).
Unit = tuple  # (int | None, str, list[int] | None)


class AddedTokens:
    """One tokenizer's added tokens and the rules above: their ids, their spellings, the matchers
    that cut them (and the special tokens) out of a text, and the checks of what may be added.

    It shares the tokenizer's ``vocab`` ({piece: id}) and ``ids_to_tokens``, and enters each added
    piece there; ``basic`` (algorithm.BasicTokenizer) is the normalization an ordinary added token
    is matched after; ``vocab_file``, the file the vocabulary was read from (vocab.txt, or a
    tokenizer.json), is named when a new id cannot be given.

    Adding a token costs the same however many were added before (``add_tokens`` called once per
    token, in a loop, stays linear): each token is normalized once, when registered, and checked
    against an index of the spellings kept up to date (``by_spelling``); the matchers, whose regular
    expressions take time in the number of tokens to compile, are built when a text next needs
    them, not at every addition."""

    def __init__(self, vocab: dict[str, int], ids_to_tokens: dict[int, str], basic, vocab_file=None):
        self.vocab, self.ids_to_tokens, self.basic, self.vocab_file = vocab, ids_to_tokens, basic, vocab_file
        self.tokens: dict[str, AddedToken] = {}  # content → token, in the order added
        self.spellings: dict[int, str] = {}  # id → the piece as shown, where it is not vocab.txt's line
        self.by_spelling: dict[str, str] = {}  # normalized spelling → content, of those matched after it
        self.next_id = max(len(vocab), max(ids_to_tokens, default=-1) + 1)  # kept by register
        self.roles: tuple[str, ...] = ()  # the roles the tokenizer was made with: special from the start
        self._matchers: tuple | None = None  # (as typed, after normalization, skipped); None: to build

    def normalized(self, text: str) -> str:
        return self.basic.normalize(self.basic.clean(text))

    def register(self, token: AddedToken, index: int) -> None:
        """Record an added token under ``index`` (a new id, or the vocabulary's for its piece)."""
        self.tokens[token.content] = token
        self.vocab[token.content] = index
        self.ids_to_tokens.setdefault(index, token.content)
        self.next_id = max(self.next_id, len(self.vocab), index + 1)
        before = self.spellings.pop(index, None)
        if before is not None and self.by_spelling.get(before) == token.content:
            del self.by_spelling[before]
        if token.normalized:  # shown as matched: normalized ("NewWord" → "newword", "中" → " 中 ")
            self.spellings[index] = spelling = self.normalized(token.content)
            self.by_spelling[spelling] = token.content
        self._matchers = None

    def restore(self, entries, source) -> None:
        """Added tokens read from the files (tokenizer_config.json's ``added_tokens_decoder``,
        tokenizer.json's ``added_tokens``, added_tokens.json: files.py, added_token_files.py):
        (id, AddedToken) in the order transformers adds them (their ids'), each under the id the
        file gives: a piece of the vocabulary keeps its id, a new one takes the next."""
        for index, token in entries:
            known = self.vocab.get(token.content)
            if known is None:
                self.check_new_ids(source)
            if known is None and index != self.next_id:
                raise CheckpointError(f"{source}: added token {token.content!r} has id {index}; the next free id "
                                      f"is {self.next_id} (added ids continue the vocabulary)")  # fmt: skip
            if known is not None and known != index:
                raise CheckpointError(f"{source}: added token {token.content!r} has id {index}, but the vocabulary "
                                      f"gives it {known}")  # fmt: skip
            self.register(token, index)

    def check_new_ids(self, source) -> None:
        """A new token's id: transformers 5 gives it the count of pieces, ``len(vocab)``; minibert
        the id after the largest. The two agree where the ids run 0, 1, 2 ... without a gap, which
        a vocab.txt that lists a piece twice lacks (each piece keeps its last line's id: files.py
        ``load_vocab``). There no token gets a new id: a CheckpointError names the repeated line (as
        ``minibert pretraining-data`` refuses such a file), rather than ids transformers reads otherwise."""
        if self.next_id == len(self.vocab):
            return
        repeat = None
        if self.vocab_file is not None and Path(self.vocab_file).suffix != ".json":  # (JSON has no lines)
            try:  # (the vocabulary may have come as a dict, or its file be gone since)
                repeat = repeated_line(self.vocab_file)
            except (OSError, ValueError):
                pass
        why = f"{self.vocab_file}: {repeat}" if repeat else f"{source}: the vocabulary's ids have gaps"
        raise CheckpointError(f"{why}, so it has {len(self.vocab)} pieces with ids up to {self.next_id - 1}: "
                              f"transformers would number a new added token {len(self.vocab)}, minibert "
                              f"{self.next_id}; no token can be added (list each piece once)")  # fmt: skip

    def check_restored(self, source, error: type[Exception] = CheckpointError) -> None:
        """The ordinary added tokens read from a file (``restore``), checked: an ``error`` naming
        ``source`` (the file; ``lowercasing_first``, which restores a tokenizer's tokens under a new
        normalization, gives its reason and a ValueError). One that is also a special token
        by name is kept as the file has it (matched after normalization, and not skipped by
        decode), as transformers loads it: e.g. ``<e1>`` in added_tokens.json and listed in
        special_tokens_map.json's ``additional_special_tokens``."""
        spellings: dict[str, str] = {}
        for token in self.tokens.values():
            if not token.special:
                try:
                    self.check_addable(token, set(), spellings)
                except ValueError as why:
                    raise error(f"{source}: {why}") from None

    def check_addable(self, token: AddedToken, specials: set[str], spellings) -> None:
        """Refuse what transformers does not do reproducibly (see the module doc). ``spellings``:
        the normalized spelling → content of each added token matched after normalization so far
        (None: no longer); the token's own is recorded in it (one lookup per token, however many
        were added)."""
        if token.content in specials and not token.special:
            raise ValueError(f"{token.content!r} is a special token; transformers would turn it into an "
                             "ordinary token matched after normalization, which minibert does not do")  # fmt: skip
        normalized = self.normalized(token.content)
        if not token.normalized:
            if spellings.get(normalized) == token.content:  # it was matched after normalization until now
                spellings[normalized] = None
            return
        if not normalized:
            raise ValueError(f"{token.content!r} is empty once normalized ({self._emptied_by(token)}), so "
                             "it would match between every two characters")  # fmt: skip
        other = spellings.get(normalized)
        if other is None:
            spellings[normalized] = other = token.content
        if other != token.content:
            raise ValueError(f"{token.content!r} and the added token {other!r} are both "
                             f"{normalized!r} once normalized: which id such text gets is not defined "
                             "(transformers picks one at random per process)")  # fmt: skip

    def check_readdable(self, previous: AddedToken, token: AddedToken) -> None:
        """Refuse re-adding a token with other options where transformers' tokenizer then disagrees
        with its own saved copy (what minibert's state is): ``tokenizers`` never takes a token out of
        its set of special ones, which decode's ``skip_special_tokens`` looks the shown spelling up
        in, and goes on showing a token first matched after normalization in its normalized spelling
        (``convert_ids_to_tokens``, ``decode``) — until the tokenizer is saved and reloaded."""
        spelling = self.normalized(token.content)
        respelled = token.normalized and spelling != token.content  # shown as `spelling`: no longer skipped
        if previous.special and not token.special and not respelled:
            raise ValueError(f"{token.content!r} was added as a special token; re-added as an ordinary "
                             "one, transformers goes on skipping it in decode(skip_special_tokens=True) but saves "
                             "it as ordinary, which minibert does not reproduce")  # fmt: skip
        if previous.normalized and not token.normalized and spelling != token.content:
            raise ValueError(f"{token.content!r} was added to be matched after normalization; re-added "
                             f"to be matched as typed, transformers goes on showing and decoding it as {spelling!r} "
                             "until it is saved and reloaded, which minibert does not reproduce")  # fmt: skip

    def _emptied_by(self, token: AddedToken) -> str:
        """Which step of normalization leaves nothing of ``token`` (for the refusal's message)."""
        if not self.basic.clean(token.content):
            return "cleaning removes control and format characters"
        return "stripping accents removes nonspacing marks (Unicode category Mn), such as U+0301"

    def add(self, tokens: list[AddedToken], specials: set[str], caller: str = "add_tokens") -> int:
        """``add_tokens``: every token checked first (a refused call adds nothing), then each new
        or changed one registered (the next id, or the vocabulary's). Returns how many, as
        transformers counts them (the matchers are built again when next needed). A refusal's
        ValueError begins with ``caller``, the method the user called."""
        try:
            accepted = self._accepted(tokens, specials)
        except ValueError as error:
            raise ValueError(f"{caller}: {error}") from None
        if any(token.content not in self.vocab for token in accepted):
            self.check_new_ids(self.vocab_file)
        for token in accepted:
            index = self.vocab.get(token.content)
            self.register(token, self.next_id if index is None else index)
        return len(accepted)  # (a special one is matched as typed, but is not an additional special token)

    def _accepted(self, tokens: list[AddedToken], specials: set[str]) -> list[AddedToken]:
        """The tokens of one call that are new or changed, each checked (ValueError: refused)."""
        spellings = ChainMap({}, self.by_spelling)  # this call's changes over the tokens' (not copied)
        specials = {*specials, *self.roles}
        accepted: list[AddedToken] = []
        pending: dict[str, AddedToken] = {}  # content → the token accepted last for it in this call
        for token in tokens:
            previous = pending.get(token.content, self.tokens.get(token.content))
            if not token.content or previous == token:
                continue  # as transformers: empty, or already added alike; not counted
            if token.special and token.content in self.roles:
                continue
            if previous is not None:
                self.check_readdable(previous, token)
            self.check_addable(token, specials, spellings)
            accepted.append(token)
            pending[token.content] = token
        return accepted

    def set_roles(self, roles: list[str]) -> None:
        """The roles the tokenizer is made with ([UNK], [SEP], [PAD], [CLS], [MASK]: pieces of the
        vocabulary): matched as typed and skipped by decode for good, as ``tokenizers`` holds them
        from the start; a role assigned later (``tokenizer.pad_token = ...``) is not, until saved
        and loaded again, as in transformers."""
        self.roles, self._matchers = tuple(roles), None

    as_typed = property(lambda self: self._built()[0])  # a Matcher (built when first needed: _built)
    after_normalization = property(lambda self: self._built()[1])  # a Matcher
    skipped_when_decoding = property(lambda self: self._built()[2])  # frozenset of ids

    def _built(self) -> tuple[Matcher, Matcher, frozenset[int]]:
        """What is cut out of a text before the basic tokenizer: the roles ([CLS], [SEP], ...) and
        the added tokens matched as typed, then the added tokens matched after normalization (a
        token a file gives as normalized stays so, even if it is also named special). decode's
        ``skip_special_tokens`` skips, as ``tokenizers`` does (which transformers 5 decodes with),
        each token whose shown piece is a special token's content — a role or a token added as
        special: so also an ordinary token shown in the spelling of a special one (``"NewWord"``,
        shown ``newword``, once ``"newword"`` is added as special)."""
        if self._matchers is not None:
            return self._matchers
        roles = self.roles
        as_typed = {token: self.vocab[token] for token in roles if token not in self.tokens}
        normalized: dict[str, int] = {}
        for content, token in self.tokens.items():
            index = self.vocab[content]
            if token.normalized:
                normalized[self.spellings[index]] = index
            else:
                as_typed[content] = index
        special = set(roles) | {content for content, token in self.tokens.items() if token.special}
        shown = {index: self.spellings.get(index, self.ids_to_tokens[index])
                 for index in (self.vocab[token] for token in (*roles, *self.tokens))}  # fmt: skip
        skipped = frozenset(index for index, piece in shown.items() if piece in special)
        self._matchers = (Matcher(as_typed), Matcher(normalized), skipped)
        return self._matchers

    def none_in(self, text: str) -> bool:
        """No added or special token can occur in ``text`` (the tokenizer's fast path)."""
        return not self.after_normalization and not self.as_typed.may_occur_in(text)

    def units(self, text: str, track: bool, words) -> list[Unit]:
        """The text's words with the added tokens cut out first: each special token or token matched
        as typed, then (in the normalized rest) each token matched after normalization. ``words``:
        the tokenizer's stage 1 for the parts in between, as ``words(part, start, track)``."""
        units: list[Unit] = []
        for index, part, start in self._segments(text):
            if index is not None:
                units.append((index, part, list(range(start, start + len(part))) if track else None))
            elif self._matched_after_normalization(part):
                units.extend(self._cut_normalized(part, start))
            else:
                units.extend(words(part, start, track))
        return units

    def cleaned_and_normalized(self, text: str, basic_tokenize: bool) -> tuple[str, str]:
        """``text`` cleaned, then normalized, part by part as ``units`` treats it (what
        ``encode_and_show_work`` shows): a special token, or a token matched as typed, stays as
        typed; the parts between are cleaned and normalized where the basic tokenizer runs
        (``basic_tokenize``) or where added tokens are matched after normalization in them, and
        otherwise stay as typed (``do_basic_tokenize=False``: words are what whitespace separates).

            "A[E1]B" with [E1] added as special  →  ("A[E1]B", "a[E1]b")"""
        cleaned, normalized = [], []
        for index, part, _ in self._segments(text):
            if index is None and (basic_tokenize or self._matched_after_normalization(part)):
                cleaned.append(self.basic.clean(part))
                normalized.append(self.basic.normalize(cleaned[-1]))
            else:
                cleaned.append(part)
                normalized.append(part)
        return "".join(cleaned), "".join(normalized)

    def _matched_after_normalization(self, part: str) -> bool:
        """Whether a token added with ``normalized=True`` occurs in ``part`` once it is normalized."""
        return bool(self.after_normalization) and self.after_normalization.occurs_in(self.normalized(part))

    def _segments(self, text: str):
        """(the id of a token matched as typed or None, part, where it starts), left to right."""
        position = 0
        for start, end, index in self.as_typed.finditer(text):
            if start > position:
                yield None, text[position:start], position
            yield index, text[start:end], start
            position = end
        if position < len(text):
            yield None, text[position:], position

    def _cut_normalized(self, part: str, start: int) -> list[Unit]:
        """Added tokens matched in the normalized text, the rest split into words there."""
        characters = self.basic.normalized_with_origins(part, start)
        normalized = "".join(character for character, _ in characters)
        units: list[Unit] = []
        position = 0
        for begin, end, index in self.after_normalization.finditer(normalized):
            units.extend((None, word, origins) for word, origins in self.basic.split_words(characters[position:begin]))
            units.append((index, normalized[begin:end], [origin for _, origin in characters[begin:end]]))
            position = end
        units.extend((None, word, origins) for word, origins in self.basic.split_words(characters[position:]))
        return units
