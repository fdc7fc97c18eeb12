"""Embedder, fill_mask and next_sentence against sentence-transformers and transformers."""

from __future__ import annotations

import os
import re
import threading
import warnings

import numpy as np
import pytest
import torch

import corpus
from helpers import assert_close
from minibert import BertForPreTraining, BertModel, BertTokenizer, Embedder, fill_mask, next_sentence
from tiny_hub import TINY

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def embedder(minilm_dir):
    return Embedder.from_pretrained(minilm_dir)


@pytest.fixture(scope="module")
def reference_model(minilm_dir):
    return transformers.BertModel.from_pretrained(str(minilm_dir)).eval()


@pytest.fixture(scope="module")
def st_minilm(minilm_dir):
    """sentence-transformers' SentenceTransformer of the same folder, loaded once (the tests only encode)."""
    st = pytest.importorskip("sentence_transformers")
    return st.SentenceTransformer(str(minilm_dir), device="cpu")


# sentence-transformers pads each batch (texts sorted by length) to its longest: 4 a batch pads less than 16
# (1.4x the arithmetic); padding is masked out, so only rounding differs (≤ 2e-7 measured; 1e-5 compared).
REFERENCE_BATCH = 4


@pytest.fixture(scope="module")
def texts():
    """Real texts of many lengths and scripts."""
    pool = corpus.all_texts()
    return [pool[i] for i in range(0, len(pool), len(pool) // 150)][:150]


def reference_states(reference_model, ids: list[int]) -> list[torch.Tensor]:
    """transformers' hidden states (L + 1 tensors of (T, H)) for one framed sequence, no padding."""
    with torch.no_grad():
        out = reference_model(torch.tensor([ids]), output_hidden_states=True)
    return [state[0] for state in out.hidden_states], out.pooler_output[0]


def test_matches_sentence_transformers(embedder, st_minilm, texts):
    expected = st_minilm.encode(texts, normalize_embeddings=True, batch_size=REFERENCE_BATCH)
    actual = embedder.embed(texts, normalize=True, batch_size=16)
    cosine = (expected * actual).sum(1) / np.linalg.norm(expected, axis=1) / np.linalg.norm(actual, axis=1)
    assert cosine.min() >= 0.99999, f"min cosine {cosine.min():.7f} (text {texts[int(cosine.argmin())][:60]!r})"
    assert_close(actual, expected, "normalized mean embeddings vs sentence-transformers", 1e-5)


def test_an_embedder_of_a_loaded_model_follows_its_folder_s_recipe(minilm_dir, st_minilm, texts):
    """``Embedder(model, tokenizer)`` of all-MiniLM-L6-v2 mean-pooled at 512 tokens, unnormalized (norms
    5.4, a long text's cosine 0.77 to ``SentenceTransformer(m).encode``): it ignored the folder's
    recipe, which from_pretrained (and rerank given a loaded model) read. It reads it now; a model
    built from a config has no folder, and is mean-pooled."""
    long = "word " * 400
    wrapped = Embedder(BertModel.from_pretrained(minilm_dir), BertTokenizer.from_pretrained(minilm_dir))
    assert wrapped.max_length == 256 and wrapped.recipe == Embedder.from_pretrained(minilm_dir).recipe
    expected = st_minilm.encode([*texts[:8], long], batch_size=REFERENCE_BATCH)  # (normalized by its recipe)
    assert_close(wrapped.embed([*texts[:8], long]), expected, "Embedder(model, tokenizer) vs sentence-transformers",
                 1e-5)  # fmt: skip
    built = BertModel(BertModel.from_pretrained(minilm_dir).config)
    assert Embedder(built, BertTokenizer.from_pretrained(minilm_dir)).recipe.normalize is False


def test_an_embedder_of_a_model_whose_folder_is_gone_says_so_and_mean_pools(minilm_dir, tmp_path, caplog):
    """The folder a model was loaded from, removed since (or a hub no longer reachable): its recipe
    cannot be read, which is said in one warning, and the Embedder mean-pools (recipe= chooses)."""
    import shutil

    folder = shutil.copytree(minilm_dir, tmp_path / "copy")
    model, tokenizer = BertModel.from_pretrained(folder), BertTokenizer.from_pretrained(folder)
    shutil.rmtree(folder)
    with caplog.at_level("WARNING", logger="minibert"):
        embedder = Embedder(model, tokenizer)
    assert embedder.recipe.normalize is False and embedder.max_length == 512
    assert any(f"the recipe of {folder} cannot be read now" in record.getMessage() for record in caplog.records)


@pytest.fixture(scope="module")
def sample_states(embedder, reference_model, texts) -> list:
    """transformers' hidden states and pooler output for each of 24 real texts, computed once: the
    30 poolings × layer choices below read them (the reference does not depend on the choice)."""
    return [reference_states(reference_model, embedder.tokenizer(text, truncation=True, max_length=256)["input_ids"])
            for text in texts[:24]]  # fmt: skip


@pytest.mark.parametrize("pooling", ["mean", "cls", "pooler", "max", "mean_max"])
@pytest.mark.parametrize(
    "layers,combine", [(-1, "concat"), (-2, "concat"), (0, "concat"), ([-1, -2, -3, -4], "concat"),
                       ([-1, -2, -3, -4], "sum"), ([-1, -4], "mean")]
)  # fmt: skip
def test_pooling_and_layers_match_reference(embedder, sample_states, texts, pooling, layers, combine):
    if pooling == "pooler" and layers != -1:
        with pytest.raises(ValueError, match="pooler"):
            embedder.embed(texts[:2], pooling=pooling, layers=layers)
        return
    sample = texts[: len(sample_states)]
    actual = embedder.embed(sample, pooling=pooling, layers=layers, layer_combine=combine, batch_size=7)
    chosen = [layers] if isinstance(layers, int) else layers
    for text, vector, (states, pooler) in zip(sample, actual, sample_states):
        picked = [states[layer] for layer in chosen]
        tokens = torch.cat(picked, -1) if combine == "concat" else torch.stack(picked).sum(0)
        if combine == "mean":
            tokens = tokens / len(picked)
        expected = {
            "mean": tokens.mean(0),
            "cls": tokens[0],
            "pooler": pooler,
            "max": tokens.max(0).values,
            "mean_max": torch.cat([tokens.mean(0), tokens.max(0).values]),
        }[pooling]
        # Each layer is within 1e-5 of transformers' (the model's parity bound); a sum of n layers adds
        # n such errors (up to 4.3e-6 a layer, 1.29e-5 summed, on an AVX-512 Xeon), a mean or max does not.
        tolerance = 1e-5 * (len(picked) if combine == "sum" else 1)
        assert_close(vector, expected, f"{pooling} layers={layers} {combine}: {text[:40]!r}", tolerance)


@pytest.mark.parametrize("merge", ["mean", "sum", "first", "last"])
def test_word_vectors_match_reference(embedder, reference_model, minilm_dir, merge):
    text = "The embeddings are unbelievably useful; MachineLearning engineers love them."
    words, vectors = embedder.word_vectors(text, merge=merge, layers=[-1, -2, -3, -4], layer_combine="sum")
    fast = transformers.BertTokenizerFast.from_pretrained(str(minilm_dir))
    encoding = fast(text)
    states, _ = reference_states(reference_model, encoding["input_ids"])
    summed = torch.stack(states[-4:]).sum(0)
    word_ids = encoding.word_ids()
    assert len(words) == max(i for i in word_ids if i is not None) + 1 == len(vectors)
    assert words[1] == "embeddings"
    for word in range(len(words)):
        rows = summed[[i for i, w in enumerate(word_ids) if w == word]]
        expected = {"mean": rows.mean(0), "sum": rows.sum(0), "first": rows[0], "last": rows[-1]}[merge]
        assert_close(vectors[word], expected, f"word {words[word]!r} ({merge})", 1e-4)


def test_embed_tokens_shapes(embedder):
    tokens, vectors = embedder.embed_tokens("I love Paris", layers=[-1, -2], layer_combine="concat")
    assert tokens == ["[CLS]", "i", "love", "paris", "[SEP]"]
    assert vectors.shape == (5, 768) and vectors.dtype == np.float32


def test_windows_take_each_token_from_the_window_with_most_context(embedder, reference_model):
    text = " ".join(corpus.docstrings()[3].split() * 3)
    ids = embedder.tokenizer.piece_ids(text)
    max_length = 64
    room = max_length - 2
    assert len(ids) > 3 * room
    tokens, vectors = embedder.embed_tokens(text, max_length=max_length)
    assert len(tokens) == len(ids) + 2 == len(vectors)
    step = room - room // 2
    starts = list(range(0, len(ids) - room + step, step))
    starts = [s for s in starts if s == 0 or s - step + room < len(ids)]
    window_states = {s: reference_states(reference_model, [101, *ids[s : s + room], 102])[0][-1] for s in starts}
    checked = 0
    for position in range(0, len(ids), 7):
        best = max(
            (s for s in starts if s <= position < s + room),
            key=lambda s: (min(position - s, min(s + room, len(ids)) - 1 - position), -s),
        )
        expected = window_states[best][position - best + 1]
        assert_close(vectors[position + 1], expected, f"token {position} from window {best}", 1e-5)
        checked += 1
    assert checked > 20
    pooled = embedder.embed([text], max_length=max_length, long_text="window", pooling="mean")[0]
    assert_close(pooled, vectors.mean(0), "mean pooling over assembled windows", 1e-5)
    recipe = embedder.embed([text], max_length=max_length, long_text="window")[0]  # MiniLM: mean, then Normalize
    assert_close(recipe, vectors.mean(0) / np.linalg.norm(vectors.mean(0)), "the recipe over assembled windows", 1e-5)


def test_truncation_is_never_silent(embedder):
    long_text = "word " * 600
    with pytest.warns(UserWarning, match="2 of 3 texts are longer than max_length=128 tokens and were truncated"):
        embedder.embed([long_text, "short", long_text], max_length=128)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        embedder.embed([long_text], max_length=128, long_text="window")


def test_embed_pieces_checks_its_input_and_says_when_it_truncates(embedder):
    """embed_pieces is embed's second half for callers that tokenize themselves: float, bool or
    out-of-vocabulary ids, a str and a skip that leaves nothing to pool are refused, naming the
    place, before the forward pass; a cut text is warned about as embed warns."""
    with pytest.warns(UserWarning, match="1 of 1 texts are longer than max_length=256 tokens and were truncated"):
        assert embedder.embed_pieces([[2000] * 600]).shape == (1, 384)
    with pytest.raises(TypeError, match=r"pieces\[0\]\[1\] is 1.7 \(float\): piece ids must be ints"):
        embedder.embed_pieces([[2000, 1.7]])
    with pytest.raises(TypeError, match=r"pieces\[1\]\[0\] is True \(bool\)"):
        embedder.embed_pieces([[2000], [True]])
    with pytest.raises(TypeError, match="pieces must be a list of texts' piece ids .* got str"):
        embedder.embed_pieces("abc")
    with pytest.raises(TypeError, match=r"pieces\[0\] must be a list of piece ids .* got str"):
        embedder.embed_pieces(["abc"])
    with pytest.raises(ValueError, match=r"pieces\[0\]\[0\] is 30522, outside the vocabulary \[0, 30522\)"):
        embedder.embed_pieces([[30522]])
    pieces, _ = embedder.pieces_for_embedding(["a man is eating some food today"])  # 7 pieces
    with pytest.raises(ValueError, match="skip .* must be 0 or more, got -1"):
        embedder.embed_pieces(pieces, skip=-1)
    with pytest.raises(ValueError, match="text 0 is 9 tokens with .CLS. and .SEP.: skip=9 leaves none of them"):
        embedder.embed_pieces(pieces, skip=9)
    with pytest.raises(ValueError, match="skip must be from 0 to 6"):
        embedder.embed_pieces([[2000] * 20], skip=7, max_length=8)
    vectors = embedder.embed_pieces(pieces, skip=8)  # [SEP] alone is left: allowed, as pieces_for_embedding can ask
    assert np.isfinite(vectors).all() and np.linalg.norm(vectors) > 0.5


def test_default_max_length_follows_sentence_transformers_config(embedder):
    assert embedder.max_length == 256  # all-MiniLM-L6-v2's max_seq_length


def test_bfloat16_is_close_to_float32(minilm_dir, texts):
    fp32 = Embedder.from_pretrained(minilm_dir).embed(texts[:40], normalize=True)
    bf16 = Embedder.from_pretrained(minilm_dir, dtype="bfloat16").embed(texts[:40], normalize=True)
    cosine = (fp32 * bf16).sum(1)
    assert cosine.min() >= 0.999, f"min cosine bf16 vs fp32 {cosine.min():.5f}"


# ----------------------------------------------------------------------------- batch invariance


def test_embedding_does_not_depend_on_batching(embedder, texts):
    sample = texts[:60]
    alone = np.stack([embedder.embed([text])[0] for text in sample])
    for batch_size in (1, 5, 32, 64):
        assert_close(embedder.embed(sample, batch_size=batch_size), alone, f"batch_size={batch_size}", 1e-5)
    order = np.random.default_rng(0).permutation(len(sample))
    shuffled = embedder.embed([sample[i] for i in order], batch_size=16)
    assert_close(shuffled, alone[order], "shuffled order", 1e-5)
    assert np.array_equal(embedder.embed(sample), embedder.embed(sample)), "repeated calls must be deterministic"


def test_concurrent_threads_match_sequential(embedder, texts):
    sample = texts[:40]
    expected = embedder.embed(sample, batch_size=8)
    results, errors = {}, []

    def work(index):
        try:
            results[index] = embedder.embed(sample, batch_size=8)
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for index in range(4):
        assert_close(results[index], expected, f"thread {index}", 1e-5)


def test_bad_arguments(embedder):
    with pytest.raises(ValueError, match="pooling must be one of"):
        embedder.embed(["x"], pooling="median")
    with pytest.raises(ValueError, match="layer 9 does not exist"):
        embedder.embed(["x"], layers=9)
    with pytest.raises(ValueError, match="max_length must be an int from 3 to max_position_embeddings=512"):
        embedder.embed(["x"], max_length=1000)
    with pytest.raises(TypeError, match="texts must be a str or a sequence of str"):
        embedder.embed([1, 2])
    assert embedder.embed([]).shape == (0, 384)
    assert embedder.embed("one text").shape == (384,)


def test_sentence_transformers_spellings_are_answered_with_minibert_s(embedder, minilm_dir, st_minilm, texts):
    """sentence-transformers' quickstart with the import changed met Python's bare errors
    (Embedder(path): "missing 1 required positional argument: 'tokenizer'"; encode; "unknown embedding
    option(s) normalize_embeddings"): each now names minibert's spelling, which computes what theirs does."""
    import copy

    from minibert.errors import InputTypeError

    for path in (minilm_dir, str(minilm_dir)):
        with pytest.raises(InputTypeError, match=r"as SentenceTransformer\(.*\) does: Embedder.from_pretrained\("):
            Embedder(path)
    for name, ours in [("encode", "embed(texts)"), ("get_sentence_embedding_dimension", "dimension()"),
                       ("max_seq_length", "max_length")]:  # fmt: skip
        with pytest.raises(AttributeError, match=rf"'{name}' \(sentence-transformers' name\): minibert's is "
                                                 rf"embedder.{re.escape(ours)}"):  # fmt: skip
            getattr(embedder, name)
    with pytest.raises(AttributeError, match="minibert's is embedder.max_length"):
        embedder.max_seq_length = 64  # (it would change nothing)
    for keyword, ours in [("normalize_embeddings", "normalize=True"), ("show_progress_bar", "progress=True/False")]:
        with pytest.raises(TypeError, match=rf"{keyword} is sentence-transformers' name: minibert's is {ours}"):
            embedder.embed(["a"], **{keyword: True})
    assert copy.copy(embedder).max_length == embedder.max_length  # (copying builds an Embedder without a path)
    reference = st_minilm
    assert (embedder.dimension(), embedder.max_length) == (reference.get_embedding_dimension(),
                                                           reference.max_seq_length)  # fmt: skip
    expected = reference.encode(texts[:20], normalize_embeddings=True, show_progress_bar=False,
                                batch_size=REFERENCE_BATCH)  # fmt: skip
    assert_close(embedder.embed(texts[:20], normalize=True, progress=False), expected, "the spellings named", 1e-5)


# ----------------------------------------------------------------------------- pre-training heads


@pytest.fixture(scope="module")
def heads_model(google_base):
    directory, reference = google_base
    return BertForPreTraining.from_pretrained(directory), BertTokenizer.from_pretrained(directory), reference


def test_fill_mask_matches_transformers(heads_model):
    model, tokenizer, reference = heads_model
    text = "Hello I'm a [MASK] model."
    answers = fill_mask(text, model=(model, tokenizer), top_k=5)
    batch = tokenizer(text, return_tensors="pt")
    position = batch["input_ids"][0].tolist().index(tokenizer.mask_token_id)
    with torch.no_grad():
        probabilities = reference(**batch).prediction_logits[0, position].softmax(-1)
    scores, ids = probabilities.topk(5)
    assert [answer["token"] for answer in answers] == ids.tolist()
    assert_close([answer["score"] for answer in answers], scores, "fill-mask scores", 1e-6)
    assert answers[0]["token_str"] == tokenizer.convert_ids_to_tokens(ids[0].item())
    two = fill_mask("[MASK] is the [MASK] of France.", model=(model, tokenizer), top_k=3)
    assert len(two) == 2 and len(two[0]) == 3
    with pytest.raises(ValueError, match="has no \\[MASK\\] token"):
        fill_mask("no mask here", model=(model, tokenizer))


def test_next_sentence_matches_transformers(heads_model):
    model, tokenizer, reference = heads_model
    probability = next_sentence("I was thirsty!", "I drank water :D", model=(model, tokenizer))
    batch = tokenizer("I was thirsty!", "I drank water :D", return_tensors="pt")
    with torch.no_grad():
        expected = reference(**batch).seq_relationship_logits[0].softmax(-1)[0]
    assert_close(probability, expected, "next-sentence probability", 1e-6)


def test_a_model_in_training_mode_is_run_without_dropout_and_left_in_training_mode(
    minilm_dir, st_minilm, heads_model, texts
):
    """A model just fine-tuned is still in training mode (dropout on): Embedder, fill_mask and
    next_sentence gave other numbers on each call. They run it in eval mode, as sentence-transformers'
    encode does (and transformers' eval-mode model), and leave it in training mode."""
    embedder = Embedder.from_pretrained(minilm_dir)
    embedder.model.train()
    expected = st_minilm.encode(texts[:24], normalize_embeddings=True, batch_size=REFERENCE_BATCH)
    assert_close(embedder.embed(texts[:24], normalize=True), expected, "Embedder of a model in training mode", 1e-5)
    assert embedder.model.training and embedder.model.layers[0].training
    model, tokenizer, reference = heads_model
    text, first, second = "Hello I'm a [MASK] model.", "I was thirsty!", "I drank water :D"
    batch, pair = tokenizer(text, return_tensors="pt"), tokenizer(first, second, return_tensors="pt")
    with torch.no_grad():
        position = batch["input_ids"][0].tolist().index(tokenizer.mask_token_id)
        expected_scores = reference(**batch).prediction_logits[0, position].softmax(-1).topk(5).values
        expected_probability = reference(**pair).seq_relationship_logits[0].softmax(-1)[0]
    try:
        model.train()
        scores = [answer["score"] for answer in fill_mask(text, model=(model, tokenizer), top_k=5)]
        probability = next_sentence(first, second, model=(model, tokenizer))
        assert model.training and model.bert.layers[0].training
    finally:
        model.eval()  # the fixture is shared
    assert_close(scores, expected_scores, "fill-mask scores of a model in training mode", 1e-6)
    assert_close(probability, expected_probability, "next-sentence probability of a model in training mode", 1e-6)


def test_models_named_by_path_are_loaded_once(google_base):
    directory, _ = google_base
    from minibert import BertForMaskedLM
    from minibert.tasks import loading as tasks

    tasks._load_cached.cache_clear()
    fill_mask("a [MASK] b", model=str(directory))
    fill_mask("c [MASK] d", model=f"{directory}//", device="cpu")  # one folder, one device: one model
    fill_mask("c [MASK] d", model=os.path.relpath(directory))
    next_sentence("a", "b", model=str(directory))
    # once per head class: fill_mask loads BertForMaskedLM, next_sentence BertForNextSentencePrediction
    assert tasks._load_cached.cache_info().misses == 2
    key = os.path.realpath(directory)
    files = tasks.folder_files(key)  # the folder's files as they are: part of the key
    loaded, _ = tasks._load_cached(key, BertForMaskedLM, None, None, "cpu", files, None)  # fill_mask's (a hit)
    assert tasks._load_cached.cache_info().misses == 2
    assert fill_mask("a [MASK] b", model=loaded)  # a loaded model finds its tokenizer


def test_progress_bar_only_when_asked_or_on_a_terminal(embedder, capsys):
    embedder.embed(["a text"] * 3, progress=True)
    assert "embedding" in capsys.readouterr().err
    embedder.embed(["a text"] * 3)  # stderr is not a terminal under pytest: no bar
    assert capsys.readouterr().err == ""


def test_fill_mask_with_a_vocabulary_without_mask_says_so(tmp_path):
    import shutil

    directory = tmp_path / "model"
    shutil.copytree(TINY, directory)
    vocab = directory / "vocab.txt"
    vocab.write_text(vocab.read_text(encoding="utf-8").replace("[MASK]\n", "[unused0]\n"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"cannot fill a mask: the vocabulary vocab.txt has no \[MASK\] piece"):
        fill_mask("i [MASK] paris", model=directory)


def test_the_embedder_leaves_the_callers_tokenizer_as_it_was(minilm_dir):
    """A recipe that lowercases (sentence-transformers' do_lower_case) applies to the Embedder's own
    copy of the tokenizer: the tokenizer the caller passed in keeps its casing."""
    from minibert.embedding.recipe import SentenceRecipe

    cased = BertTokenizer(minilm_dir / "vocab.txt", do_lower_case=False)
    embedder = Embedder(BertModel.from_pretrained(minilm_dir), cased, recipe=SentenceRecipe(do_lower_case=True))
    assert cased.tokenize("Paris") != ["paris"]  # the caller's tokenizer: still cased
    assert not cased.basic.do_lower_case
    assert embedder.tokenizer.tokenize("Paris") == ["paris"]  # the Embedder's: lowercased, accents kept
    assert embedder.tokenizer.tokenize("Crème") == BertTokenizer(
        minilm_dir / "vocab.txt", do_lower_case=True, strip_accents=False
    ).tokenize("Crème")


def test_the_public_spellings_from_before_embed_options_still_work(embedder):
    """EmbedOptions is one value, but the calls users wrote before it keep working unchanged:
    keywords to embed/embed_pieces (arrays back), and dimension(pooling, layers, layer_combine)."""
    from minibert import EmbedOptions

    texts = ["a first text", "and a second, longer one"]
    pieces, skip = embedder.pieces_for_embedding(texts)
    by_keywords = embedder.embed_pieces(pieces, skip=skip, pooling="mean", normalize=True)
    by_value = embedder.embed_pieces(pieces, EmbedOptions(pooling="mean", normalize=True), skip=skip)
    assert isinstance(by_keywords, np.ndarray) and by_keywords.shape == (2, 384)
    assert np.array_equal(by_keywords, by_value)
    assert np.array_equal(by_keywords, embedder.embed(texts, pooling="mean", normalize=True))
    assert embedder.dimension("mean") == 384
    assert embedder.dimension(["cls", "mean"], [-1, -2], "concat") == 4 * 384
    assert embedder.dimension(pooling="mean_max", layers=[-1, -2], layer_combine="sum") == 2 * 384
    with pytest.raises(TypeError, match="must be an EmbedOptions"):
        embedder.embed_with_report(texts, {"pooling": "mean"})


@pytest.fixture(scope="module")
def long_model(tmp_path_factory, vocab_file):
    """A random BERT of 1024 positions saved by transformers, with a vocab.txt and no
    tokenizer_config.json: its tokenizer has transformers' "no limit" (model_max_length int(1e30))."""
    folder = tmp_path_factory.mktemp("long1024")
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
                                     max_position_embeddings=1024)  # fmt: skip
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(folder)
    (folder / "vocab.txt").write_bytes(vocab_file.read_bytes())
    return folder


def test_a_tokenizer_without_a_length_reads_past_512_as_transformers(long_model):
    """truncation=True cut such a text at 512 (minibert's old default) where transformers does not
    cut: other ids and another pooled vector, without a word."""
    text = "word " * 800
    mine = BertTokenizer.from_pretrained(long_model)(text, truncation=True, return_tensors="pt")
    theirs = transformers.BertTokenizerFast.from_pretrained(str(long_model))(text, truncation=True, return_tensors="pt")
    assert mine["input_ids"].shape == theirs["input_ids"].shape == (1, 802)
    assert torch.equal(mine["input_ids"], theirs["input_ids"])
    with torch.no_grad():
        got = BertModel.from_pretrained(long_model)(**mine)
        want = transformers.BertModel.from_pretrained(str(long_model)).eval()(**theirs)
    assert_close(got.last_hidden_state, want.last_hidden_state, "last_hidden_state, 802 tokens", 1e-5)
    assert_close(got.pooler_output, want.pooler_output, "pooler_output, 802 tokens", 1e-5)


def test_an_embedder_without_a_tokenizer_length_reads_the_models_positions_as_sentence_transformers(long_model):
    """sentence-transformers caps the tokenizer's length at max_position_embeddings: 1024 here (the
    Embedder took the tokenizer's 512, and nothing like a 1e30-token allocation now)."""
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(long_model), device="cpu")
    embedder = Embedder.from_pretrained(long_model)
    assert embedder.max_length == reference.max_seq_length == 1024
    texts = ["word " * 1100, "word " * 700, "a short text"]
    with pytest.warns(UserWarning, match="1 of 3 texts are longer than max_length=1024 tokens and were truncated"):
        got = embedder.embed(texts)
    assert_close(got, reference.encode(texts), "mean embeddings, texts past 512 tokens", 1e-5)


def test_a_batch_is_padded_on_the_right_with_its_mask(embedder):
    """hidden_states' rows to tensors in one pass: each row's ids in its first positions, the pad id
    after them (not 0: [PAD] is 0 in BERT's vocabulary, and a wrong fill would hide), the mask 1
    exactly where an id was given, whichever row is longest; the same as transformers pads them."""
    from minibert.embedding.hidden_states import _padded

    rows = [[101, 7, 8, 102], [101, 102], [101, 9, 10, 11, 12, 102], [101, 5, 102]]
    input_ids, mask = _padded(rows, pad=77)
    assert input_ids.dtype == mask.dtype == torch.int64 and input_ids.shape == mask.shape == (4, 6)
    assert input_ids.tolist() == [row + [77] * (6 - len(row)) for row in rows]
    assert mask.tolist() == [[1] * len(row) + [0] * (6 - len(row)) for row in rows]
    reference = transformers.BertTokenizerFast(str(embedder.tokenizer.vocab_file))
    padded = reference.pad({"input_ids": rows}, return_tensors="pt")
    assert torch.equal(_padded(rows, reference.pad_token_id)[0], padded["input_ids"])
    assert torch.equal(mask, padded["attention_mask"])


def test_max_length_is_checked_when_set(minilm_dir):
    """``embedder.max_length = 2`` (or 513, 8.0, True, "8", None) was taken and failed at the next
    embed(); CrossEncoder.max_length is checked when set, as sentence-transformers' max_seq_length
    users expect. Now each is refused there and then, and a good value is an int that embed() follows."""
    from minibert.errors import TaskArgumentError

    embedder = Embedder.from_pretrained(minilm_dir)
    for bad in (2, 513, 8.0, True, "8", None):
        with pytest.raises(TaskArgumentError, match=rf"max_length must be an int from 3 to "
                                                    rf"max_position_embeddings=512, got {re.escape(repr(bad))}$"):
            embedder.max_length = bad
    assert embedder.max_length == 256
    embedder.max_length = np.int64(4)
    report = embedder.embed_with_report(["one two three four"])  # (6 tokens with [CLS] and [SEP]: cut to 4)
    assert type(embedder.max_length) is int and report.max_length == 4 and report.truncated == 1
