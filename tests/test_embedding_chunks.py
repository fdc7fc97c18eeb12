"""A long list embedded in chunks (embedding/chunks.py): the same vectors as sentence-transformers,
what happened to the texts counted over every chunk, the next chunk tokenized between this chunk's
batches where the model computes while the CPU works (a GPU; forced here on the CPU), and memory
that follows a chunk, not the list."""

from __future__ import annotations

import dataclasses
import tracemalloc
import warnings

import numpy as np
import pytest
import torch

import corpus
from helpers import assert_close
from minibert import Embedder, EmbedOptions
from minibert.embedding import chunks


@pytest.fixture(scope="module")
def embedder(minilm_dir):
    return Embedder.from_pretrained(minilm_dir)


@pytest.fixture(scope="module")
def texts():
    """60 real texts of many lengths and scripts, and two longer than all-MiniLM-L6-v2's 256 tokens."""
    pool = corpus.all_texts()
    sample = [pool[i] for i in range(0, len(pool), len(pool) // 60)][:60]
    long = " ".join(" ".join(corpus.docstrings()[:40]).split()[:400])  # 400 words: over 256 tokens
    return sample[:20] + [long] + sample[20:45] + [long + " again"] + sample[45:]


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 4, 8, 16, 16 ... texts (ahead) or 16 (not): a few dozen texts make several."""
    monkeypatch.setattr(chunks, "FIRST_CHUNK", 4)
    monkeypatch.setattr(chunks, "MAX_CHUNK", 16)


@pytest.fixture
def ahead_on_the_cpu(monkeypatch):
    """The GPU's plan (the next chunk tokenized between this chunk's batches), on the CPU."""
    monkeypatch.setattr(chunks, "tokenizes_ahead", lambda device: True)


@pytest.mark.parametrize("count", [0, 1, 255, 256, 257, 8192, 8193, 100_000])
@pytest.mark.parametrize("ahead", [True, False])
def test_the_chunks_cover_the_texts_once_growing_to_the_cap(count, ahead):
    sizes = chunks.chunk_sizes(count, ahead)
    assert sum(sizes) == count and all(size > 0 for size in sizes)
    assert all(size <= chunks.MAX_CHUNK for size in sizes)
    whole = sizes[:-1]  # every chunk but the last is as long as the plan says
    if ahead:
        assert whole == [min(chunks.FIRST_CHUNK * 2**number, chunks.MAX_CHUNK) for number in range(len(whole))]
    else:
        assert whole == [chunks.MAX_CHUNK] * len(whole)


def test_only_a_gpu_tokenizes_ahead():
    assert chunks.tokenizes_ahead(torch.device("cuda", 1))
    assert not chunks.tokenizes_ahead(torch.device("cpu"))
    assert not chunks.tokenizes_ahead(torch.device("meta"))


@pytest.mark.parametrize("plan", ["one after another", "ahead"])
def test_chunked_vectors_are_sentence_transformers(embedder, minilm_dir, texts, small_chunks, monkeypatch, plan):
    """Each chunk's texts are batched among themselves; sentence-transformers pads each batch of 4
    to its longest. Padding is masked out, so only float32 rounding differs: at unit-length vectors,
    a few hundred products of 384 terms deep in six layers stay well within 1e-5."""
    if plan == "ahead":
        monkeypatch.setattr(chunks, "tokenizes_ahead", lambda device: True)
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(minilm_dir), device="cpu")
    expected = reference.encode(texts, normalize_embeddings=True, batch_size=4)
    calls = []
    embed_pieces = Embedder._embed_pieces
    monkeypatch.setattr(Embedder, "_embed_pieces", lambda self, pieces, *args: calls.append(len(pieces)) or
                        embed_pieces(self, pieces, *args))  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = embedder.embed_with_report(texts, EmbedOptions(normalize=True))
    assert calls == chunks.chunk_sizes(len(texts), plan == "ahead") and len(calls) >= 4  # the run was chunked
    assert_close(result.vectors, expected, f"{len(texts)} texts in chunks ({plan}) vs sentence-transformers", 1e-5)
    assert result.truncated == 2 and result.max_length == 256  # the two long texts, in different chunks
    assert not caught  # embed_with_report reports; embed warns


def test_the_warning_counts_the_cut_texts_of_every_chunk(embedder, texts, small_chunks):
    with pytest.warns(UserWarning, match=rf"^2 of {len(texts)} texts are longer than max_length=256"):
        embedder.embed(texts)


def test_windows_and_a_prompt_apply_in_every_chunk(embedder, texts, small_chunks):
    """A text's vector does not depend on its chunk: each text embedded alone gives the chunked row
    (windows put back together across a chunk's batches; the prompt's skip in every chunk)."""
    leaving_the_prompt_out = Embedder(embedder.model, embedder.tokenizer,
                                      recipe=dataclasses.replace(embedder.recipe, include_prompt=False))  # fmt: skip
    options = {"long_text": "window", "prompt": "query: "}
    chunked = leaving_the_prompt_out.embed(texts, **options)
    alone = np.stack([leaving_the_prompt_out.embed(text, **options) for text in texts])
    assert_close(chunked, alone, "chunked rows vs each text alone (windows, a skipped prompt)", 1e-5)


def test_the_next_chunk_is_tokenized_between_this_chunks_batches(embedder, texts, small_chunks, ahead_on_the_cpu,
                                                                monkeypatch):  # fmt: skip
    """The order of work, as the GPU's plan runs it (here on the CPU, one stream): the first chunk
    tokenized alone; each next chunk's texts spread over the current chunk's forward passes (begun
    after its first, some passes between its first text and its last), and whole before its own."""
    texts = [f"{number}: {text}" for number, text in enumerate(texts)]  # no two rows alike (cased twins)
    events = []  # ("tokens", text index) or ("pass", the chunks its rows are from)
    sizes = chunks.chunk_sizes(len(texts), ahead=True)
    chunk_of = np.repeat(np.arange(len(sizes)), sizes)
    rows = {}  # a row's ids ([CLS] pieces [SEP], cut at 256) → its text's chunk
    piece_ids, cls, sep = embedder.tokenizer.piece_ids, embedder.tokenizer.cls_token_id, embedder.tokenizer.sep_token_id

    def tokenize(text):
        pieces = piece_ids(text)
        index = texts.index(text)
        events.append(("tokens", index))
        rows[(cls, *pieces[:254], sep)] = int(chunk_of[index])
        return pieces

    def forward(module, args):
        input_ids, mask = args[0], args[1]
        events.append(("pass", {rows[tuple(ids[: int(real.sum())].tolist())] for ids, real in zip(input_ids, mask)}))

    monkeypatch.setattr(embedder.tokenizer, "piece_ids", tokenize)
    hook = embedder.model.register_forward_pre_hook(forward)
    try:
        embedder.embed(texts, batch_size=1, streams=False)  # batches of 64 tokens: several a chunk
    finally:
        hook.remove()
    assert [index for kind, index in events if kind == "tokens"] == list(range(len(texts)))  # each once, in order
    tokens = [[position for position, (kind, index) in enumerate(events) if kind == "tokens" and chunk_of[index] == n]
              for n in range(len(sizes))]  # fmt: skip
    passes = [[position for position, (kind, held) in enumerate(events) if kind == "pass" and held == {n}]
              for n in range(len(sizes))]  # fmt: skip
    assert sum(map(len, passes)) == sum(kind == "pass" for kind, _ in events)  # every pass holds one chunk's rows
    for number in range(len(sizes)):
        assert len(passes[number]) >= 2, f"chunk {number}: {len(passes[number])} pass (batch_size=1 makes several)"
        assert tokens[number][-1] < passes[number][0], f"chunk {number} ran before all of it was tokenized"
        if number:
            previous = passes[number - 1]
            assert previous[-1] < passes[number][0]  # the chunks run in order
            assert tokens[number][0] > previous[0], f"chunk {number} was tokenized before chunk {number - 1} ran"
            spread = [position for position in previous if tokens[number][0] < position < tokens[number][-1]]
            assert spread, f"chunk {number} was tokenized in one go, not between chunk {number - 1}'s passes"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_memory_follows_a_chunk_not_the_list(small_chunks, device):
    """Python's allocations (tracemalloc) at their peak, less the (N, dim) vectors returned: 400
    texts of 1,000 pieces each (36 kB of piece ids) and 2,000-wide vectors (8 kB). Neither the whole
    list's pieces (14 MB) nor its chunks' vectors (3.2 MB, beside the output) are ever held at once:
    this chunk's and the next one's pieces at most (2 × 16 texts, 1.2 MB), and one chunk's vectors
    until they are copied out. (all-MiniLM-L6-v2 on 16,384 real texts held 22 MiB beyond its 24 MiB
    of vectors in one pass, about 1.4 kB a text; in chunks, 23 MiB whatever the list's length.)"""
    from minibert.embedding.embedded import Embedded

    texts, width = [f"text {number}" for number in range(400)], 2000
    seen = []

    def embed_chunk(pieces, between, progress):
        for batch in range(3):  # three batches a chunk: the next chunk tokenized between them (cuda)
            if between is not None:
                between(batch, 3)
        seen.append(len(pieces))
        return Embedded(np.full((len(pieces), width), len(seen), np.float32), 1, 256)

    tracemalloc.start()
    try:
        result = chunks.embed_in_chunks(texts, lambda text: list(range(1000, 2000)), embed_chunk,
                                        torch.device(device), progress=False)  # fmt: skip
        peak = tracemalloc.get_traced_memory()[1] - result.vectors.nbytes
    finally:
        tracemalloc.stop()
    sizes = chunks.chunk_sizes(len(texts), device == "cuda")
    assert seen == sizes and result.truncated == len(sizes) and result.max_length == 256
    assert np.array_equal(result.vectors, np.repeat(np.arange(1, len(sizes) + 1, dtype=np.float32), sizes)[:, None]
                          .repeat(width, 1))  # fmt: skip
    per_text = 1000 * (8 + 28) + width * 4  # a list's pointer and an int object per piece; its vector
    print(f"\npeak beyond the vectors: {peak / 2**20:.2f} MiB (all pieces: {400 * per_text / 2**20:.1f} MiB)")
    assert peak < 3 * max(sizes) * per_text  # two chunks' pieces and change, not 400 texts' (25 chunks')


def test_a_long_lists_progress_bar_counts_texts(embedder, texts, small_chunks, capsys):
    embedder.embed(texts, progress=True)
    bar = capsys.readouterr().err
    assert "embedding" in bar and f"{len(texts)}/{len(texts)}" in bar and "text" in bar
    embedder.embed(texts)  # stderr is not a terminal under pytest: no bar
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_bar_moves_batch_by_batch_within_a_chunk(small_chunks, monkeypatch, device):
    """A chunk is 8,192 texts on a CPU (minutes for bert-base): the bar moves on by each batch's
    share of its chunk, not once a chunk."""
    from minibert.embedding.embedded import Embedded

    class Bar:
        n, shown = 0, []

        def update(self, count):
            self.n += count
            self.shown.append(self.n)

        def close(self):
            pass

    bar = Bar()
    monkeypatch.setattr(chunks, "_bar", lambda progress, total: bar)

    def embed_chunk(pieces, between, progress):
        assert between is not None and progress is False  # the chunk's own bar (of batches) is off
        for batch in range(4):
            between(batch, 4)
        return Embedded(np.zeros((len(pieces), 2), np.float32), 0, 8)

    texts = [f"text {number}" for number in range(40)]
    chunks.embed_in_chunks(texts, lambda text: [1], embed_chunk, torch.device(device), progress=True)
    sizes = chunks.chunk_sizes(len(texts), device == "cuda")
    starts = np.cumsum([0, *sizes])
    expected = [int(start + size * (batch + 1) // 4) for start, size in zip(starts, sizes) for batch in range(4)]
    assert sorted(set(bar.shown)) == expected and bar.n == len(texts)
