"""The Embedder's answers to what sentence-transformers code does around ``encode``, each compared
with sentence-transformers 6 on one model it saved (all-MiniLM-L6-v2's weights, weighted-mean
pooling that leaves its prompts out, Normalize, a default prompt):

* texts it cannot read in order (a dict, a set) or at all (None, bytes, a number, a 0-d array) are
  an error, a ValueError as sentence-transformers raises and a TypeError (``TextsError``);
* SentenceTransformer's settable attributes (``similarity_fn_name``, ``truncate_dim``, ``prompts``,
  ``default_prompt_name``) change the Embedder's recipe as they change the model; the ones it has not
  (``device``, ``similarity_pairwise`` ...) name minibert's spelling, read or set;
* ``prompt=`` with ``prompt_name=``: the prompt, with a warning, as ``encode`` does;
* numpy's integers (``np.int64(8)``) are taken where an int is, bools are not.
"""

from __future__ import annotations

import json
import logging
import re
import warnings

import numpy as np
import pytest

from helpers import assert_close
from minibert import Embedder, EmbedOptions
from minibert.errors import TextsError, TransformersNameError

st = pytest.importorskip("sentence_transformers")
from sentence_transformers.base.modules import Normalize  # noqa: E402
from sentence_transformers.base.modules.transformer import Transformer  # noqa: E402
from sentence_transformers.sentence_transformer.modules import Pooling  # noqa: E402

TEXTS = ["A man is eating food.", "A man is riding a horse.", "The new movie is awesome.", "hello"]
PROMPTS = {"query": "query: ", "passage": "passage: "}


@pytest.fixture(scope="module")
def folder(tmp_path_factory, minilm_dir):
    """A sentence-transformers model saved by sentence-transformers itself, with prompts."""
    modules = [Transformer(str(minilm_dir), max_seq_length=128),
               Pooling(384, pooling_mode="weightedmean", include_prompt=False), Normalize()]  # fmt: skip
    model = st.SentenceTransformer(modules=modules, device="cpu", prompts=PROMPTS, default_prompt_name="query")
    directory = tmp_path_factory.mktemp("prompted")
    model.save(str(directory))
    return directory


def both(folder):
    return st.SentenceTransformer(str(folder), device="cpu"), Embedder.from_pretrained(folder)


def test_a_dict_or_a_set_is_refused_and_says_what_to_pass(folder):
    """A dict used to give the vectors of its keys (the word "text": cosine 0.06 to the right vector),
    a set its rows in hash order. sentence-transformers reads {"text": ...} as one text and refuses a
    set; minibert refuses both, naming row["text"], which gives sentence-transformers' vector."""
    theirs, ours = both(folder)
    row = {"text": "A man is eating food."}
    with pytest.raises(TextsError, match=r'a dict is sentence-transformers. multimodal input .*row\["text"\]'):
        ours.embed(row)
    with pytest.raises(TextsError, match=r'item 1 is a dict \(a dict: pass its text, row\["text"\]\)'):
        ours.embed(["a", row])
    assert_close(ours.embed(row["text"]), theirs.encode(row), "embed(row['text']) vs encode(row)", 1e-5)
    for unordered in ({"b", "a", "c"}, frozenset({"a", "b"}), {"a": 1, "b": 2}.keys()):
        with pytest.raises(ValueError, match="Unsupported input type"):
            theirs.encode(unordered)
        with pytest.raises(TextsError, match="which has no order: the rows could not be matched back"):
            ours.embed(unordered)
    assert ours.embed({1: "a", 2: "b"}.values()).shape == (2, 384)  # a dict's values are in order


@pytest.mark.parametrize("texts", [None, 123, ["a", None], b"abc", np.array("hello")],
                         ids=["None", "int", "list-with-None", "bytes", "0-d-array"])  # fmt: skip
def test_texts_that_are_not_texts_raise_a_value_error_as_in_sentence_transformers(folder, texts):
    theirs, ours = both(folder)
    with pytest.raises(ValueError, match="Unsupported"):
        theirs.encode(texts)
    with pytest.raises(TextsError, match="texts must be a str or a sequence of str") as caught:
        ours.embed(texts)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)
    if isinstance(texts, np.ndarray):
        assert "a 0-d array: pass [str(texts)]" in str(caught.value)


SETTINGS = [("similarity_fn_name", "dot"), ("similarity_fn_name", "euclidean"), ("truncate_dim", 8),
            ("default_prompt_name", "passage"), ("default_prompt_name", None),
            ("prompts", {"query": "zzz: ", "document": ""}), ("prompts", {"other": "x: "})]  # fmt: skip


@pytest.mark.parametrize(("name", "value"), SETTINGS)
def test_setting_their_attributes_changes_what_the_embedder_computes(folder, name, value):
    """Each assignment used to make an attribute nothing read (similarity 0.68 where
    sentence-transformers gives 11.64 with "dot"; 32 values where it keeps 8)."""
    theirs, ours = both(folder)
    if name == "prompts" and "query" not in value:
        theirs.default_prompt_name = ours.default_prompt_name = None  # the default prompt named would be gone
    setattr(theirs, name, value)
    setattr(ours, name, value)
    assert getattr(ours, name) == getattr(theirs, name) and getattr(ours.recipe, name) == getattr(theirs, name)
    expected, vectors = theirs.encode(TEXTS), ours.embed(TEXTS)
    assert vectors.shape == expected.shape
    assert_close(vectors, expected, f"{name}={value!r}", 1e-5)
    assert_close(ours.similarity(vectors, vectors), theirs.similarity(expected, expected).numpy(), "similarity", 1e-4)
    assert ours.dimension() == expected.shape[1]
    if name == "prompts":  # the names are the ones given, as sentence-transformers keeps them
        assert_close(ours.embed(TEXTS, prompt_name=next(iter(value))),
                     theirs.encode(TEXTS, prompt_name=next(iter(value))), "prompt_name", 1e-5)  # fmt: skip


def test_a_setting_sentence_transformers_refuses_or_ignores_is_refused(folder):
    theirs, ours = both(folder)
    for bad in ("maxsim", "cos"):
        with pytest.raises(ValueError, match="similarity_fn_name"):
            theirs.similarity_fn_name = bad
        with pytest.raises(ValueError, match=r"similarity_fn_name must be one of \('cosine', 'dot'"):
            ours.similarity_fn_name = bad
    ours.similarity_fn_name = st.SimilarityFunction.MANHATTAN  # their enum, as their setter takes it
    assert ours.similarity_fn_name == "manhattan"
    ours.similarity_fn_name = None  # theirs: unset, read back as cosine
    assert ours.similarity_fn_name == "cosine"
    # sentence-transformers takes an unknown default prompt name, then puts no prompt: said here
    with pytest.raises(ValueError, match="default_prompt_name must be None or one of this model's prompts"):
        ours.default_prompt_name = "nope"
    for bad in (0, True, 2.5):
        with pytest.raises(ValueError, match="truncate_dim must be a positive int or None"):
            ours.truncate_dim = bad
    with pytest.raises(TypeError, match="prompts must be a dict of names to str"):
        ours.prompts = {"query": None}
    assert ours.recipe.similarity_fn_name == "cosine" and ours.default_prompt_name == "query"


@pytest.mark.parametrize(("name", "spelling"), [
    ("device", "embedder.model.device"), ("similarity_pairwise", "embedder.similarity(a, b).diagonal()"),
    ("truncate_embeddings", "embedder.embed(texts, truncate_dim=N)"), ("get_max_seq_length", "embedder.max_length"),
])  # fmt: skip
def test_their_attributes_the_embedder_has_not_name_its_spelling_read_or_set(folder, name, spelling):
    ours = Embedder.from_pretrained(folder)
    with pytest.raises(TransformersNameError, match=re.escape(f"minibert's is {spelling}")):
        getattr(ours, name)
    with pytest.raises(TransformersNameError, match=name):
        setattr(ours, name, "cpu")
    assert name not in vars(ours)


def test_prompt_and_prompt_name_together_use_the_prompt_with_a_warning(folder, caplog):
    """sentence-transformers logs "Ignoring the `prompt_name` in favor of `prompt`" and encodes with
    the prompt; minibert raised ValueError("pass prompt or prompt_name, not both")."""
    theirs, ours = both(folder)
    with caplog.at_level(logging.WARNING):
        expected = theirs.encode(TEXTS, prompt="Represent this: ", prompt_name="passage")
    assert "Ignoring the `prompt_name` in favor of `prompt`" in caplog.text
    with pytest.warns(UserWarning, match="prompt_name is ignored in favor of prompt, as sentence-transformers does"):
        vectors = ours.embed(TEXTS, prompt="Represent this: ", prompt_name="passage")
    assert_close(vectors, expected, "prompt and prompt_name", 1e-5)
    with pytest.warns(UserWarning, match="prompt_name is ignored"):  # an unknown name is ignored too, as there
        assert_close(ours.embed(TEXTS, prompt="", prompt_name="nope"), theirs.encode(TEXTS, prompt=""), "''", 1e-5)


def test_numpy_integers_are_taken_where_an_int_is_and_bools_are_not(folder):
    """np.int64(8) was refused: "batch_size must be a positive int, got np.int64(8)"."""
    theirs, ours = both(folder)
    numpy_ints = {"batch_size": np.int64(2), "truncate_dim": np.int64(6)}
    assert_close(ours.embed(TEXTS, **numpy_ints), theirs.encode(TEXTS, **numpy_ints), "numpy ints", 1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the long text is cut, with minibert's warning
        short = ours.embed(TEXTS + ["word " * 40], max_length=np.int32(16), layers=np.int64(-1))
        assert_close(short, ours.embed(TEXTS + ["word " * 40], max_length=16), "max_length=np.int32(16)", 0)
    options = EmbedOptions(batch_size=np.int64(8), truncate_dim=np.uint8(6), max_length=np.int64(64),
                           layers=[np.int64(-1), -2])  # fmt: skip
    assert json.loads(json.dumps(options.as_dict()))["batch_size"] == 8  # a run's fingerprint stays JSON
    assert all(type(value) is int for value in (options.batch_size, options.truncate_dim, options.max_length,
                                                *options.layers))  # fmt: skip
    assert Embedder.from_pretrained(folder, truncate_dim=np.int64(6)).recipe.truncate_dim == 6
    for name, bad in (("batch_size", True), ("truncate_dim", np.True_), ("batch_size", np.float64(8))):
        with pytest.raises(ValueError, match=f"{name} must be a positive int"):
            ours.embed(TEXTS, **{name: bad})
    with pytest.raises(ValueError, match="max_length must be an int from 3"):
        ours.embed(TEXTS, max_length=True)
