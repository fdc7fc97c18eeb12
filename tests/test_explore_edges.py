"""The explorer at the edges of what it is given: a model folder named like a slot of the page's
template ("$DATA") or with a name that is not UTF-8, a top_k past what the page holds, a model whose
outputs are NaN or infinite, and --whitespace-words on an uncased model. Each was a page written
broken or wrong with exit 0, or an error after the forward pass that named nothing.

The references: transformers' attention (which layer and head is NaN first) and transformers'
slow tokenizer with ``do_basic_tokenize=False`` (what --whitespace-words reads).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import minibert
from explore_reference import check_guesses, random_masked_lm, reference_outputs, unpack
from helpers import run_minibert
from minibert.errors import ExplorerInputError

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def masked_lm(tmp_path_factory, vocab_file) -> tuple[Path, object]:
    """A random-weight BertForMaskedLM (2 layers, 4 heads, MiniLM's vocabulary) saved as transformers saves it."""
    directory = tmp_path_factory.mktemp("explore-edges") / "masked-lm"
    lines = Path(vocab_file).read_text(encoding="utf-8").splitlines()
    return directory, random_masked_lm(directory, lines)


def page_parts(page: str) -> tuple[str, dict, str]:
    """The page's title, its data (the JSON element, parsed) and its style sheet."""
    title = re.search(r"<title>(.*?)</title>", page, re.S)[1]
    data = json.loads(page.split('<script type="application/json" id="minibert-data">', 1)[1].split("</script>", 1)[0])
    return title, data, page.split("<style>\n", 1)[1].split("</style>", 1)[0]


# ---------------------------------------------------------------- the model's folder in the page


@pytest.mark.parametrize("folder", ["$DATA", "$STYLE", "$TITLE and $SCRIPT"])
def test_a_model_folder_named_like_a_slot_of_the_template_gives_a_working_page(masked_lm, tmp_path, folder):
    """The template's slots were filled one after another, the title (the model's folder) before the
    style and the data: a folder named "$DATA" got the JSON spliced into <title> and left the data
    element holding "$DATA" (the page said "could not be drawn"), "$STYLE" lost the style sheet; exit 0."""
    from minibert.explorer.page import _assets

    directory = tmp_path / folder
    shutil.copytree(masked_lm[0], directory)
    output = tmp_path / "page.html"
    done = run_minibert("explore", "a [MASK] b", "--model", str(directory), "--output", str(output))
    assert done.returncode == 0, done.stderr
    title, data, style = page_parts(output.read_text(encoding="utf-8"))
    assert title == f"minibert explore: {tmp_path.name}/{folder}"
    assert data["model"] == f"{tmp_path.name}/{folder}" and data["tokens"] == ["[CLS]", "a", "[MASK]", "b", "[SEP]"]
    assert style == _assets()["explorer.css"] + "\n"


def test_a_model_folder_whose_name_is_not_utf8_gets_a_page(masked_lm, tmp_path):
    """A Linux folder named b"bad\\xe9dir" is read by Python as "bad\\udce9dir": the lone surrogate in
    the model's name failed the page's UTF-8 encoding after the model had run ("'utf-8' codec can't
    encode character '\\udce9'", exit 1; .save() a bare UnicodeEncodeError). Its byte is now shown as \\xe9."""
    directory = tmp_path / os.fsdecode(b"bad\xe9dir")
    try:
        shutil.copytree(masked_lm[0], directory)
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system takes only UTF-8 names")
    shown = f"{tmp_path.name}/bad\\xe9dir"
    output = tmp_path / "page.html"
    done = run_minibert("explore", "a [MASK] b", "--model", str(directory), "--output", str(output))
    assert done.returncode == 0, done.stderr
    title, data, _ = page_parts(output.read_text(encoding="utf-8"))
    assert title == f"minibert explore: {shown}" and data["model"] == shown
    exploration = minibert.explore(directory, "a [MASK] b")
    assert exploration.data.model_name == shown and repr(shown) in repr(exploration)
    assert exploration.save(tmp_path / "from-python.html").read_text(encoding="utf-8") == output.read_text("utf-8")


# ---------------------------------------------------------------- top_k: what the page holds


def test_top_k_is_refused_past_what_the_page_holds_and_taken_up_to_it(masked_lm, tmp_path):
    """top_k ran up to the vocabulary's size: the page stores every guess of every position and layer
    (10.7 bytes each), so --top-k 30522 wrote 61 MB for 62 tokens of a 2-layer model, and bert-base at
    512 tokens would have been 2.2 GB. It is capped at 100 (docs/explore.md), in Python before the model
    is loaded and on the command line as a usage error; at the cap the guesses are transformers'."""
    from minibert.apps import explore_command
    from minibert.explorer import data

    assert explore_command.MAX_TOP_K == data.MAX_TOP_K == 100  # the parser cannot import data.py (torch)
    directory, reference_model = masked_lm
    for top_k in (101, 30522, 0, 5.0):
        with pytest.raises(ExplorerInputError, match=rf"top_k must be an int from 1 to 100 .*, got {top_k!r}$"):
            minibert.explore(str(tmp_path / "no-such-model"), "a b", top_k=top_k)
    done = run_minibert("explore", "a b", "--model", str(directory), "--output", str(tmp_path / "p.html"),
                        "--top-k", "101")  # fmt: skip
    assert done.returncode == 2 and "argument --top-k: must be a whole number from 1 to 100, got 101" in done.stderr
    assert list(tmp_path.iterdir()) == []
    exploration = minibert.explore(directory, "a [MASK] b", top_k=100)
    reference = reference_outputs(reference_model, exploration.data.input_ids, exploration.data.token_type_ids)
    tokenizer = minibert.BertTokenizer.from_pretrained(directory)
    pieces = [piece for piece, _ in sorted(tokenizer.vocab.items(), key=lambda item: item[1])]
    for layer in range(exploration.data.layers + 1):
        guesses = exploration.data.predictions(layer)
        assert {len(row) for row in guesses} == {100}
        check_guesses(guesses, reference["probabilities"][layer], pieces, f"top 100, layer {layer}")
        for position, row in enumerate(reference["probabilities"][layer]):  # (V,): no piece left out beats one kept
            kept = np.zeros(len(row), dtype=bool)
            kept[[tokenizer.vocab[piece] for piece, _ in guesses[position]]] = True
            # two pieces closer than the passes' disagreement (~1e-6, the module's check_guesses) may swap
            assert row[~kept].max() <= row[kept].min() + 1e-5, f"layer {layer}, position {position}"
    packed = exploration.payload["predictions"]  # the page's copy: each guess an index into its pieces
    on_page = [[[packed["pieces"][i] for i in row] for row in layer] for layer in unpack(packed["guesses"])]
    in_data = [[[piece for piece, _ in row] for row in exploration.data.predictions(layer)]
               for layer in range(exploration.data.layers + 1)]  # fmt: skip
    assert on_page == in_data


# ---------------------------------------------------------------- outputs that are not numbers


def _with_weight(source: Path, destination: Path, name: str, index: tuple, value: float) -> Path:
    """A copy of the checkpoint in ``source`` with one element of tensor ``name`` set to ``value``."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, destination)
    state = load_file(source / "model.safetensors")
    state[name][index] = value
    save_file(state, destination / "model.safetensors", metadata={"format": "pt"})
    return destination


def _first_not_finite(reference_model_directory: Path) -> tuple[str, int, int | None]:
    """transformers' outputs for "a [MASK] b c": ("attention", layer, head) of the first head whose
    weights are not finite, or ("hidden", layer, None); layers counted as hidden_states counts them."""
    model = transformers.BertForMaskedLM.from_pretrained(reference_model_directory, attn_implementation="eager").eval()
    ids = transformers.BertTokenizerFast.from_pretrained(reference_model_directory)("a [MASK] b c")
    outputs = reference_outputs(model, ids["input_ids"], ids["token_type_ids"])
    for layer, state in enumerate(outputs["hidden_states"]):
        if layer > 0:
            finite = np.isfinite(outputs["attention"][layer - 1]).reshape(outputs["attention"].shape[1], -1).all(-1)
            if not finite.all():
                return "attention", layer, int(np.flatnonzero(~finite)[0])
        if not np.isfinite(state).all():
            return "hidden", layer, None
    raise AssertionError("every output of the reference is finite")


@pytest.mark.filterwarnings("ignore:.*NaN or infinite weights:UserWarning")  # the loader's warning, which is right
@pytest.mark.parametrize(
    "tensor, index, value, message",
    [
        ("bert.encoder.layer.1.attention.self.query.weight", (0, 0), float("nan"),
         "layer {layer}, head {head}: the attention weights are NaN"),
        ("bert.encoder.layer.0.output.dense.bias", (3,), float("inf"), "layer {layer}: the hidden states are NaN"),
    ],
    ids=["a NaN query weight", "an infinite bias"],
)  # fmt: skip
def test_outputs_that_are_not_finite_are_refused_naming_where_they_start(masked_lm, tmp_path, tensor, index, value,
                                                                          message):  # fmt: skip
    """The page stores attention and cosines as integers; the cast made NaN a 0, so a NaN weight was
    drawn as 0.0 and a NaN cosine as -1 ("two different positions range from -1.00 to -1.00"), exit 0,
    with numpy's "invalid value encountered in cast" on stderr. Now an ExplorerInputError names the
    first layer (and head) that transformers' outputs say is not finite; nothing is written."""
    broken = _with_weight(masked_lm[0], tmp_path / "broken", tensor, index, value)
    kind, layer, head = _first_not_finite(broken)
    assert kind == ("attention" if head is not None else "hidden")
    expected = message.format(layer=layer, head=head)
    with pytest.raises(ExplorerInputError, match=re.escape(expected) + r" \(a weight it reads is NaN or infinite"):
        minibert.explore(broken, "a [MASK] b c")
    output = tmp_path / "page.html"
    done = run_minibert("explore", "a [MASK] b c", "--model", str(broken), "--output", str(output))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and lines[-1].startswith(f"minibert: error: {expected} "), done.stderr
    # before it, at most the loader's warning (shown once a process), never numpy's "invalid value encountered"
    assert all("NaN or infinite weights" in line for line in lines[:-1]), done.stderr
    assert not output.exists()


def test_the_page_never_quantizes_nan():
    from minibert.explorer.payload import pack_quantized

    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="must be finite"):
            pack_quantized(np.array([0.5, bad]), low=0.0, high=1.0, bits=8)


# ---------------------------------------------------------------- --whitespace-words reads words as typed


def test_whitespace_words_reads_words_as_typed_as_transformers_does_and_says_so(minilm_dir, tmp_path):
    """--whitespace-words (do_basic_tokenize=False) skips the basic tokenizer: no punctuation splitting,
    and no lower-casing or accent stripping either, as in transformers' slow tokenizer. The help and the
    docs said only "without splitting punctuation", so on uncased MiniLM "Paris" and "France." became
    [UNK] unannounced. The help says it now, and a run on a tokenizer that lower-cases names the words
    it reads as typed (not the [MASK], a special token, never lowered)."""
    text = "Paris is in France. [MASK] café"
    reference = transformers.BertTokenizerLegacy.from_pretrained(str(minilm_dir), do_basic_tokenize=False)
    output = tmp_path / "page.html"
    done = run_minibert("explore", text, "--whitespace-words", "--model", str(minilm_dir), "--output", str(output))
    assert done.returncode == 0, done.stderr
    _, data, _ = page_parts(output.read_text(encoding="utf-8"))
    assert data["inputIds"] == reference(text)["input_ids"] and data["tokens"][1] == "[UNK]"
    warnings = [line for line in done.stderr.splitlines() if line.startswith("minibert: warning:")]
    assert warnings == ["minibert: warning: --whitespace-words also skips lower-casing and accent stripping (as "
                        "transformers does), which this model's tokenizer config asks for: 'Paris', 'France.', "
                        "'café' reach its vocabulary as typed"], done.stderr  # fmt: skip
    for quiet in (["--cased"], []):  # said to be meant, or nothing to lower
        words = text if quiet else "paris is in france. [MASK]"
        done = run_minibert("explore", words, "--whitespace-words", *quiet, "--model", str(minilm_dir),
                            "--output", str(output))  # fmt: skip
        assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    helped = " ".join(run_minibert("explore", "--help").stdout.split())
    assert "no lower-casing or accent stripping either" in helped and "implies --cased" in helped
    # a vocab.txt folder's [MASK] is a special token but no added one: it was named as lowered, and a
    # word was named once per occurrence
    for words, said in (("[MASK] is nice", None), ("[MASK] Nice nice Nice", "'Nice' reach")):
        done = run_minibert("explore", words, "--whitespace-words", "--model", "minibert/fortunes-mini",
                            "--output", str(output))  # fmt: skip
        warnings = [line for line in done.stderr.splitlines() if line.startswith("minibert: warning:")]
        assert done.returncode == 0 and (warnings == [] if said is None else len(warnings) == 1), done.stderr
        assert said is None or warnings[0].endswith(f"asks for: {said} its vocabulary as typed"), warnings


def test_cased_keeps_accents_on_a_folder_saved_by_transformers_5_as_transformers_does(minilm_dir, tmp_path):
    """transformers 5 saves tokenizer.json (its normalizer's strip_accents null) and no vocab.txt.
    minibert resolved that null to the lowercase flag (True) and --cased then turned off only the
    lowercasing, so accents were still stripped: "naïve" became "naive", the added "Ünïcödé" was
    shown as "Unicode" and the forward pass ran on other ids. transformers' do_lower_case=False keeps
    the accents (null follows do_lower_case); the page's ids are now transformers'."""
    reference = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    reference.add_tokens(["Ünïcödé"])
    directory = tmp_path / "saved-by-transformers-5"
    random_masked_lm(directory, ["[PAD]"] * len(reference))  # the weights: only the vocabulary's size matters
    (directory / "vocab.txt").unlink()
    reference.save_pretrained(directory)
    assert not (directory / "vocab.txt").exists()
    text = "Café naïve Ünïcödé résumé cafe"
    output = tmp_path / "page.html"
    done = run_minibert("explore", text, "--model", str(directory), "--cased", "--output", str(output))
    assert done.returncode == 0, done.stderr
    _, data, _ = page_parts(output.read_text(encoding="utf-8"))
    cased = transformers.AutoTokenizer.from_pretrained(str(directory), do_lower_case=False)
    expected = cased(text)["input_ids"]
    assert data["inputIds"] == expected, (data["tokens"], cased.convert_ids_to_tokens(expected))
    assert "Ünïcödé" in data["tokens"] and "naive" not in data["tokens"]


def test_an_output_that_is_not_html_is_a_usage_error(tmp_path):
    """``-o attention.json`` wrote the HTML page under that name, exit 0 (a user expecting the page's
    JSON export got HTML); every other command refuses a suffix it does not write."""
    for name in ("attention.json", "page", "page.svg"):
        done = run_minibert("explore", "a [MASK]", "--model", "minibert/fortunes-mini", "-o", str(tmp_path / name))
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == f"minibert: error: --output must end in .html (the page is HTML), got {name}"
        assert not (tmp_path / name).exists()
    done = run_minibert("explore", "a [MASK]", "--model", "minibert/fortunes-mini", "-o", str(tmp_path / "P.HTM"))
    assert done.returncode == 0 and (tmp_path / "P.HTM").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_a_page_s_attention_is_bounded_by_its_weights_not_only_by_the_positions(monkeypatch):
    """A page stores layers × heads × T² attention weights: a model of 4,096 positions took a 40 MB
    page for one head, and bert-base's shape at 2,048 would be ~600 M weights (a page of hundreds of
    MB). Beyond MAX_ATTENTION_WEIGHTS the input is refused before the forward pass, naming the
    longest that fits; that many tokens, cut with truncate=True, make a page."""
    from minibert.explorer import data

    text = "the cat sat on the mat and the dog ate my homework today"  # 17 tokens with [CLS] and [SEP]
    monkeypatch.setattr(data, "MAX_ATTENTION_WEIGHTS", 4 * 4 * 11 * 11 + 5)  # fortunes-mini: 4 layers × 4 heads
    with pytest.raises(ExplorerInputError) as refused:
        minibert.explore("minibert/fortunes-mini", text)
    assert str(refused.value) == ("17 tokens make 4,624 attention weights (4 layers × 4 heads × 17²), more than the "
                                  "1,941 one page holds (its size grows as the square of the tokens); explore the "
                                  "first 11 with --max-length 11 --truncate (max_length=11, "
                                  "truncate=True)")  # fmt: skip
    page = minibert.explore("minibert/fortunes-mini", text, max_length=11, truncate=True)
    assert page.data.attention.shape == (4, 4, 11, 11)
    with pytest.raises(ExplorerInputError, match="12 tokens make 2,304 attention weights"):
        minibert.explore("minibert/fortunes-mini", text, max_length=12, truncate=True)


def test_a_pair_on_a_model_of_one_segment_is_refused_as_an_input_error(tmp_path):
    """type_vocab_size 1 (RoBERTa-style BERTs): a pair's segment 1 has no embedding row; the forward
    pass raised a ValueError about token_type_ids after the model loaded."""
    config = transformers.BertConfig(vocab_size=200, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=8, type_vocab_size=1)  # fmt: skip
    transformers.BertModel(config).save_pretrained(tmp_path)
    shutil.copy(Path(__file__).parent / "data" / "tiny_hub" / "vocab.txt", tmp_path)
    with pytest.raises(ExplorerInputError, match=r"^this model takes no pair: it has 1 segment \(type_vocab_size\)"):
        minibert.explore(str(tmp_path), "a b", "c d")
    assert minibert.explore(str(tmp_path), "a b").data.attention.shape == (1, 2, 4, 4)
