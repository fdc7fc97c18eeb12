"""What the explorer says about its own page: what --truncate cut (to which limit, which text,
which end, the [MASK]s lost), what an int8 model computed in, the saved page's folder when it is
a file, and the name of a model given as ``.``. Each was said wrongly with exit 0: "the text was
cut to the model's length" of a cut to max_length, "float32" and "within 7.6e-6 of the exact
value" of an int8 model, "does not exist" of a file, and a page named "." whose exports were
hidden files. The references: transformers' fast tokenizer (what its truncation cuts, and which
[MASK]s it loses) and the int8 model's own modules (docs/int8.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import minibert
from explore_reference import random_masked_lm
from helpers import run_minibert
from test_explore_browser import OpenPage, browser  # noqa: F401  (the module's Chromium, a fixture)

transformers = pytest.importorskip("transformers")

LONG = "word " * 30 + "[MASK]"  # 32 pieces with [CLS] and [SEP]: the [MASK] is the last piece of the text
PAIR = ("the [MASK] sat .", " ".join(f"w{i}" for i in range(80)))


@pytest.fixture(scope="module")
def masked_lm(tmp_path_factory, vocab_file) -> Path:
    """A random-weight BertForMaskedLM (2 layers, 4 heads, 64 positions, MiniLM's vocabulary)."""
    directory = tmp_path_factory.mktemp("explore-reports") / "masked-lm"
    random_masked_lm(directory, Path(vocab_file).read_text(encoding="utf-8").splitlines())
    return directory


@pytest.fixture(scope="module")
def left(masked_lm, tmp_path_factory) -> Path:
    """The same model whose tokenizer cuts the start of a text (``truncation_side: "left"``)."""
    import shutil

    directory = shutil.copytree(masked_lm, tmp_path_factory.mktemp("explore-reports") / "left")
    (directory / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "truncation_side": "left"}))
    return directory


def _page_data(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8").split('id="minibert-data">', 1)[1].split("</script>", 1)[0])


def _what_transformers_cuts(directory: Path, text: str, pair: str | None, limit: int) -> tuple[list, int, int, int]:
    """transformers' ids cut to ``limit``, the pieces the text and the pair lost and the [MASK]s lost."""
    reference = transformers.AutoTokenizer.from_pretrained(str(directory))
    whole, cut = reference(text, pair), reference(text, pair, truncation=True, max_length=limit)

    def lost(sequence: int) -> int:
        return whole.sequence_ids().count(sequence) - cut.sequence_ids().count(sequence)

    masks = whole["input_ids"].count(reference.mask_token_id) - cut["input_ids"].count(reference.mask_token_id)
    return cut["input_ids"], lost(0), lost(1), masks


@pytest.mark.parametrize("case", ["text, max_length 20", "pair cut at its start"])
def test_truncate_says_the_limit_the_text_and_the_end_it_cut_and_the_masks_lost(masked_lm, left, tmp_path, case):
    """The warning said "the text was cut to N tokens" of a pair's cut too, never which end was lost;
    the page said "cut to the model's length" of a cut to max_length; a [MASK] the cut lost went
    unsaid. Each now names the limit, the text or pair, its end (its start where the tokenizer cuts
    there) and the pieces lost, as transformers' truncation loses them, and the [MASK]s among them."""
    directory, text, pair, max_length = (masked_lm, LONG, None, 20) if case.startswith("text") else (left, *PAIR, None)
    limit = max_length or 64
    ids, text_lost, pair_lost, masks = _what_transformers_cuts(directory, text, pair, limit)
    assert (text_lost, pair_lost, masks) == ((13, 0, 1) if pair is None else (0, pair_lost, 0)) and pair_lost >= 0
    output = tmp_path / "page.html"
    flags = ["--max-length", str(max_length)] if max_length else []
    done = run_minibert("explore", text, *([pair] if pair else []), "--model", str(directory), "-o", str(output),
                        "--truncate", *flags)  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = _page_data(output)
    assert data["inputIds"] == ids
    if pair is None:
        said = "cut to max_length 20: the text lost its last 13 pieces, 1 [MASK] among them"
        warned = "minibert: warning: cut to --max-length 20: the text lost its last 13 pieces, 1 [MASK] among them"
        assert data["maskPositions"] == []  # the [MASK] is gone, and the page says so
    else:
        said = f"cut to the model's 64 positions: the pair lost its first {pair_lost} pieces"
        warned = f"minibert: warning: {said}"
    assert data["truncated"] is True and data["cut"]["said"] == said
    assert data["cut"] == {"limit": limit, "limitName": "max_length" if max_length else "the model's positions",
                           "lost": "end" if pair is None else "start", "textPieces": text_lost,
                           "pairPieces": pair_lost, "masks": masks, "said": said}  # fmt: skip
    assert done.stderr.splitlines()[0] == f"{warned} (--truncate)", done.stderr
    exploration = minibert.explore(directory, text, pair, truncate=True, max_length=max_length)
    assert exploration.data.cut.describe() == said and exploration.payload["cut"]["said"] == said
    assert minibert.explore(directory, "a short text").data.cut is None


def test_a_truncated_page_and_an_int8_pages_summary_in_chromium(browser, masked_lm, tmp_path):  # noqa: F811
    """The summary names the cut; an int8 model's page (its parameters float32, its products int8)
    said "float32", with no "approximate numbers", and its footer called the attention "within
    7.6e-6 of the exact value": it now says int8, approximate, and of what the int8 model computed."""
    cut = minibert.explore(masked_lm, LONG, truncate=True, max_length=20).save(tmp_path / "cut.html")
    page = OpenPage(browser, cut)
    summary = page.page.locator("#summary").inner_text()
    assert "(cut to max_length 20: the text lost its last 13 pieces, 1 [MASK] among them)" in summary, summary
    assert "the model's length" not in summary
    page.close()
    narrow = tmp_path / "narrow"  # BERT's own 0.02: the wide test model's int8 vectors are refused (docs/int8.md)
    random_masked_lm(narrow, (masked_lm / "vocab.txt").read_text(encoding="utf-8").splitlines(), std=0.02)
    model = minibert.BertForMaskedLM.from_pretrained(narrow, dtype="int8")
    from minibert.speed.int8 import is_int8

    assert is_int8(model) and next(model.parameters()).dtype.is_floating_point  # int8 products, float parameters
    exploration = minibert.explore(model, "Paris is the [MASK] of France.")
    assert exploration.data.dtype == "int8" and exploration.payload["dtype"] == "int8"
    page = OpenPage(browser, exploration.save(tmp_path / "int8.html"))
    assert ", computed in int8 (approximate numbers), masked-LM head" in page.page.locator("#summary").inner_text()
    footer = " ".join(page.page.locator("footer").inner_text().split())
    assert "exact value" not in footer and "of what this int8 model computed, itself approximate" in footer, footer
    page.close()


def test_save_into_a_file_says_it_is_a_file(masked_lm, tmp_path):
    """Exploration.save("afile/x.html") said "the output directory afile does not exist"."""
    exploration = minibert.explore(masked_lm, "a [MASK] b")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(NotADirectoryError, match="the output directory .*afile is a file, not a directory"):
        exploration.save(tmp_path / "afile" / "x.html")
    with pytest.raises(FileNotFoundError, match="the output directory .*missing does not exist"):
        exploration.save(tmp_path / "missing" / "x.html")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile"]


def test_model_dot_is_named_by_its_folder_and_its_exports_are_not_hidden_files(browser, masked_lm, tmp_path,  # noqa: F811
                                                                               monkeypatch):  # fmt: skip
    """``--model .`` named the page "." (its title "minibert explore: ."), and its exports
    ".-layer1-head0.png", which Chromium saved as "-layer1-head0.png". The folder's name is used, and
    a name that gives no file name ("." itself) is exported as "minibert-..."."""
    monkeypatch.chdir(masked_lm)
    output = tmp_path / "dot.html"
    done = run_minibert("explore", "a [MASK] b", "--model", ".", "-o", str(output))
    assert done.returncode == 0, done.stderr
    expected = "/".join(os.path.abspath(masked_lm).split(os.sep)[-2:])
    assert _page_data(output)["model"] == expected and f"<title>minibert explore: {expected}</title>" in \
        output.read_text(encoding="utf-8")  # fmt: skip
    page = OpenPage(browser, output)
    names = []
    for model in (None, ".", "..."):
        if model is not None:
            page.evaluate("(name) => { window.minibert.model = name; }", model)
        with page.page.expect_download() as download:
            page.page.locator("#export-json").click()
        names.append(download.value.suggested_filename)
    page.close()
    assert names == [f"{expected.replace('/', '_')}-layer1-head0.json"] + ["minibert-layer1-head0.json"] * 2, names
