"""The explorer's pages in a real browser: Debian's Chromium driven by playwright, every network
request refused. Each page must fill ``window.minibert`` with the numbers transformers computes
(attention within the page's quantization bound, guesses within 1e-3), draw one picture per head
(``data-layer``/``data-head``), open a head on a click with a picture that is not blank, log no
console error, and run no script that came from the text or the vocabulary.

Without Chromium or playwright the tests are skipped with a loud reason — and fail under CI=true,
where .ci/run installs both (a skip there would hide that nothing was tested).
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import minibert
from explore_reference import check_guesses, random_masked_lm, reference_outputs
from helpers import assert_close, child_environment

transformers = pytest.importorskip("transformers")

CHROMIUM = os.environ.get("MINIBERT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# (a selector, not wait_for_function: its polling evaluates strings, which the page's CSP forbids)
READY = "html[data-ready]"  # "true", or "failed" with the error on the page and the console


def _missing(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"THE EXPLORER'S BROWSER TESTS CANNOT RUN UNDER CI: {reason}", pytrace=False)
    pytest.skip(f"NOT TESTED IN A BROWSER (this is not a pass): {reason}; apt-get install chromium && "
                "pip install playwright")  # fmt: skip


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module (started once: a few hundred ms)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed")
    if not Path(CHROMIUM).is_file():
        _missing(f"no Chromium at {CHROMIUM}")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


class OpenPage:
    """A page loaded from file:// with every other request aborted, console errors collected."""

    def __init__(self, browser, path: Path):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        url = path.resolve().as_uri()
        self.page.on("console", lambda message: message.type == "error" and self.errors.append(message.text))
        self.page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        self.page.route("**/*", self._route)
        self.url = url
        self.page.goto(url)
        self.page.wait_for_selector(READY, state="attached", timeout=20_000)
        state = self.page.evaluate("document.documentElement.dataset.ready")
        assert state == "true", f"the page was not drawn: {self.errors}"

    def _route(self, route):
        if route.request.url == self.url:
            route.continue_()
        else:
            self.requests.append(route.request.url)
            route.abort()

    def evaluate(self, script: str, argument=None):
        return self.page.evaluate(script, argument)

    def close(self) -> None:
        assert not self.errors, f"console errors: {self.errors}"
        assert not self.requests, f"the page asked the network for {self.requests}"
        self.context.close()


def _not_blank(png: bytes) -> float:
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float64)
    return float(pixels.std())


def _all_attention(page: OpenPage) -> np.ndarray:
    rows = page.evaluate("""() => { const m = window.minibert, out = [];
        for (let l = 1; l <= m.layers; l++) { const row = [];
          for (let h = 0; h < m.heads; h++) row.push(Array.from(m.attention(l, h)));
          out.push(row); }
        return out; }""")
    return np.asarray(rows, dtype=np.float64)


def _check_page(browser, path: Path, exploration, reference: dict, label: str) -> OpenPage:
    page = OpenPage(browser, path)
    data = exploration.data
    T = len(data.tokens)
    assert page.evaluate("window.minibert.tokens") == data.tokens
    assert page.evaluate("[window.minibert.layers, window.minibert.heads]") == [data.layers, data.heads]
    attention = _all_attention(page).reshape(data.layers, data.heads, T, T)
    bound = 0.002 if page.evaluate("window.minibert.attentionBits") == 8 else 1 / 131070 + 1e-5
    worst = assert_close(attention, reference["attention"], f"{label} window.minibert.attention", atol=bound)
    pictures = page.page.locator("[data-layer][data-head]")
    assert pictures.count() == data.layers * data.heads
    cells = page.evaluate("Array.from(document.querySelectorAll('[data-layer][data-head]'), "
                          "e => [Number(e.dataset.layer), Number(e.dataset.head)])")  # fmt: skip
    # layers as hidden_states numbers them: 1 … L (0 is the embeddings, which have no attention)
    expected = [(layer, head) for layer in range(1, data.layers + 1) for head in range(data.heads)]
    assert sorted(map(tuple, cells)) == expected
    layer, head = data.layers, data.heads - 1
    page.page.locator(f'[data-layer="{layer}"][data-head="{head}"]').click()
    assert page.page.locator("#head-title").inner_text() == f"layer {layer}, head {head}"
    spread = _not_blank(page.page.locator("#head-canvas").screenshot())
    assert spread > 5, f"{label}: the open head's picture is blank (pixel std {spread:.2f})"
    print(f"\n{label}: window.minibert.attention max |Δ| {worst:.1e} (bound {bound:.2g}); picture std {spread:.0f}")
    return page


@pytest.fixture(scope="module")
def masked_lm(tmp_path_factory, vocab_file):
    directory = tmp_path_factory.mktemp("explore-browser") / "masked-lm"
    lines = Path(vocab_file).read_text(encoding="utf-8").splitlines()
    return directory, random_masked_lm(directory, lines, seed=1)


def test_a_masked_lm_page_equals_transformers_in_chromium(browser, masked_lm, tmp_path):
    directory, reference_model = masked_lm
    exploration = minibert.explore(directory, "Paris is the [MASK] of France.", "It has a [MASK] river.", top_k=3)
    path = exploration.save(tmp_path / "masked-lm.html")
    data = exploration.data
    reference = reference_outputs(reference_model, data.input_ids, data.token_type_ids)
    page = _check_page(browser, path, exploration, reference, "masked LM")
    vocabulary = [piece for piece, _ in sorted(minibert.BertTokenizer.from_pretrained(directory).vocab.items(),
                                                key=lambda item: item[1])]  # fmt: skip
    for layer in range(data.layers + 1):
        guesses = page.evaluate("(layer) => window.minibert.predictions(layer)", layer)
        assert len(guesses) == len(data.tokens) and all(len(row) >= 3 for row in guesses)
        check_guesses([[tuple(guess) for guess in row] for row in guesses], reference["probabilities"][layer],
                      vocabulary, f"window.minibert.predictions({layer})")  # fmt: skip
    assert page.page.locator("#lens td").count() == (data.layers + 1) * len(data.tokens)
    page.page.locator("#statistics th").nth(4).click()  # sort by attention to [SEP]; a row opens its head
    page.page.locator("#statistics tr").nth(1).click()
    assert page.page.locator("#head-title").inner_text().startswith("layer ")
    page.page.locator('input[name="head-mode"][value="matrix"]').check()
    assert _not_blank(page.page.locator("#head-canvas").screenshot()) > 5
    page.close()


def test_a_page_without_a_masked_lm_head_says_so_in_chromium(browser, minilm_dir, tmp_path):
    exploration = minibert.explore(minilm_dir, "The river bank was muddy.", "I went to the bank.")
    path = exploration.save(tmp_path / "minilm.html")
    data = exploration.data
    reference_model = transformers.BertModel.from_pretrained(str(minilm_dir), attn_implementation="eager").eval()
    reference = reference_outputs(reference_model, data.input_ids, data.token_type_ids)
    page = _check_page(browser, path, exploration, reference, "MiniLM")
    assert page.evaluate("[0, 6].map((layer) => window.minibert.predictions(layer))") == [None, None]
    notes = page.page.locator("#lens-summary .no-head")
    assert notes.count() == 1 and "no masked-LM head" in notes.inner_text()
    assert page.page.locator("#lens td").count() == 0
    page.close()


def test_rxnfps_real_masked_lm_page_in_chromium(browser, tmp_path):
    """rxnfp (12 layers × 4 heads, a real MLM head): SMILES pieces split on whitespace, cased."""
    module = pytest.importorskip("rxnfp")
    directory = Path(module.__file__).parent / "models" / "transformers" / "bert_pretrained"
    tokenizer = minibert.BertTokenizer(directory / "vocab.txt", do_lower_case=False, do_basic_tokenize=False)
    exploration = minibert.explore(directory, "C C ( = [MASK] ) O . O C C >> C C ( = O ) O C C", tokenizer=tokenizer)
    path = exploration.save(tmp_path / "rxnfp.html")
    data = exploration.data
    reference_model = transformers.BertForMaskedLM.from_pretrained(str(directory), attn_implementation="eager").eval()
    reference = reference_outputs(reference_model, data.input_ids, data.token_type_ids)
    page = _check_page(browser, path, exploration, reference, "rxnfp")
    vocabulary = [piece for piece, _ in sorted(tokenizer.vocab.items(), key=lambda item: item[1])]
    last = page.evaluate("(layer) => window.minibert.predictions(layer)", data.layers)
    last = [[tuple(guess) for guess in row] for row in last]
    check_guesses(last, reference["probabilities"][-1], vocabulary, "rxnfp")
    assert "[MASK] at position 5" in page.page.locator("#lens-summary").inner_text()
    page.close()


def test_the_explorer_and_plot_attention_name_the_same_head(browser, minilm_dir, tmp_path):
    """One way to count layers: the picture the page labels "layer 3, head 5" (its title, the head
    view's title, the table's row, the exported file's name and JSON) holds the matrix that
    ``plot_attention.py --layer 3 --head 5`` draws; layer 0 (the embeddings) has no attention."""
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import plot_attention

    text = "The cat sat on the mat because it was tired."
    tokenizer = minibert.BertTokenizer.from_pretrained(minilm_dir)
    with torch.inference_mode():
        out = minibert.BertModel.from_pretrained(minilm_dir)(**tokenizer(text, return_tensors="pt"),
                                                             output_attentions=True)  # fmt: skip
    drawn = plot_attention.attention_map(out, 3, 5).numpy()  # (T, T): what the script's picture shows
    exploration = minibert.explore(minilm_dir, text)
    assert_close(exploration.data.attention_map(3, 5), drawn, "page.data.attention_map(3, 5)", atol=1e-6)
    page = OpenPage(browser, exploration.save(tmp_path / "cat.html"))
    page.page.locator('canvas.thumb[title="layer 3, head 5"]').click()
    assert page.page.locator("#head-title").inner_text() == "layer 3, head 5"
    # 16 bits a weight (a small page): within 1/131070 of the exact weight, plus fp32 summation order
    bound = 1 / 131070 + 1e-6
    assert_close(np.asarray(page.evaluate("Array.from(window.minibert.attention(3, 5))")).reshape(drawn.shape),
                 drawn, "window.minibert.attention(3, 5)", atol=bound)  # fmt: skip
    with page.page.expect_download() as download:
        page.page.locator("#export-json").click()
    assert download.value.suggested_filename.endswith("-layer3-head5.json")
    exported = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))["openHead"]
    assert (exported["layer"], exported["head"]) == (3, 5)
    assert "0 = the embeddings" in json.loads(Path(download.value.path()).read_text(encoding="utf-8"))["layerNumbering"]
    assert_close(np.asarray(exported["attention"]), drawn, "the exported layer 3, head 5", atol=bound)
    statistics = page.evaluate("window.minibert.headStatistics()")
    row = statistics["layer"].index(3) + 5
    assert (statistics["layer"][row], statistics["head"][row]) == (3, 5)
    page.page.locator("#statistics tr").nth(row + 1).click()  # unsorted: row (3 - 1) · 12 + 5 after the header
    assert page.page.locator("#head-title").inner_text() == "layer 3, head 5"
    labels = page.evaluate("Array.from(document.querySelectorAll('#model-grid .label'), (e) => e.textContent)")
    assert "layer 1" in labels and "layer 6" in labels and "layer 0" not in labels
    message = page.evaluate("(() => { try { window.minibert.attention(0, 5); } catch (e) { return e.message; } })()")
    assert "from 1 to 6" in message and "layer 0 is the embeddings" in message
    page.close()


def _cosines(states: np.ndarray, i: int, j: int) -> np.ndarray:
    """cos(position i, position j) at every layer of hidden states (L + 1, T, H)."""
    a, b = states[:, i].astype(np.float64), states[:, j].astype(np.float64)
    return (a * b).sum(-1) / np.sqrt((a * a).sum(-1) * (b * b).sum(-1))


def test_the_hidden_states_panel_names_its_tokens_and_its_scale(browser, minilm_dir, tmp_path):
    """The two "bank"s lesson: the grid's axes name every token, the colour scale has its numbers,
    the norms are bars from zero with their values, hovering a cell reads its two tokens and clicking
    it follows the pair through the layers (numpy's cosines of page.data's hidden states: the page
    stores cosines in 8 bits, within 1/255, and prints 2 decimals, so within 0.0045 + 0.005)."""
    exploration = minibert.explore(minilm_dir, "The river bank was muddy.", "I deposited money at the bank.")
    data, tokens = exploration.data, exploration.data.tokens
    page = OpenPage(browser, exploration.save(tmp_path / "bank.html"))
    for axis in ("rows", "columns"):
        shown = page.evaluate(
            f"Array.from(document.querySelectorAll('#similarity-{axis} .axis-label'), (e) => e.textContent)"
        )
        assert shown == tokens, f"the grid's {axis} are not labelled with the tokens: {shown}"
    ticks = page.page.locator("#similarity-scale .ticks span").all_inner_texts()
    assert (
        ticks == ["−1", "−0.5", "0", "0.5", "1"]
        and "cosine similarity" in page.page.locator("#similarity-scale").inner_text()
    )
    assert _not_blank(page.page.locator("#similarity-scale-bar").screenshot()) > 5
    norms = np.linalg.norm(data.hidden_states[-1].astype(np.float64), axis=-1)  # the last layer's, shown first
    bars = page.evaluate(
        "Array.from(document.querySelectorAll('#norms .bar'), (e) => e.getBoundingClientRect().height)"
    )
    values = page.page.locator("#norms .value").all_inner_texts()
    assert values == [f"{norm:.2f}" for norm in norms]
    # from zero: each bar's height is its norm over the longest (to the pixel), not min-max scaled
    assert_close(np.asarray(bars), 90 * norms / norms.max(), "norm bars (px)", atol=0.51)
    assert page.page.locator("#norms-top").inner_text() == f"{norms.max():.2f}"
    bank, other = 3, tokens.index("bank", 4)
    box, cell = (
        page.page.locator("#similarity-canvas").bounding_box(),
        page.evaluate("document.getElementById('similarity-canvas').width") / len(tokens),
    )
    page.page.mouse.move(box["x"] + (other + 0.5) * cell, box["y"] + (bank + 0.5) * cell)
    readout = page.page.locator("#hidden-readout").inner_text()
    cosines = _cosines(data.hidden_states, bank, other)
    assert f"cos(“bank” #{bank}, “bank” #{other}) = " in readout and readout.startswith(f"layer {data.layers}:")
    hot = page.evaluate("Array.from(document.querySelectorAll('.axis-label.hot'), (e) => e.textContent)")
    assert hot == ["bank", "bank"]
    page.page.mouse.click(box["x"] + (other + 0.5) * cell, box["y"] + (bank + 0.5) * cell)
    pinned = page.page.locator("#hidden-pinned").inner_text()
    shown = np.asarray([float(value) for value in pinned.rsplit(": ", 1)[1].split(", ")])
    assert_close(shown, cosines, "the pinned pair's cosines by layer", atol=1 / 255 / 2 + 0.005)
    page.page.locator("#hidden-layer").fill("0")
    assert page.page.locator("#hidden-layer-value").inner_text() == "0 (the embeddings)"
    embeddings = np.linalg.norm(data.hidden_states[0].astype(np.float64), axis=-1)
    assert page.page.locator("#norms .value").all_inner_texts() == [f"{norm:.2f}" for norm in embeddings]
    page.close()


def test_a_long_texts_grid_names_one_token_in_k(browser, minilm_dir, tmp_path):
    """Beyond ~70 tokens the axes name one token in k (k · cell ≥ 11 px: names never overlap)."""
    text = " ".join(["The river bank was muddy and the fishermen sat on it all day long."] * 8)
    exploration = minibert.explore(minilm_dir, text)
    T = len(exploration.data.tokens)
    page = OpenPage(browser, exploration.save(tmp_path / "long.html"))
    cell = page.evaluate("document.getElementById('similarity-canvas').width") / T
    every = int(np.ceil(11 / cell))
    shown = page.evaluate("Array.from(document.querySelectorAll('#similarity-rows .axis-label'), (e) => e.textContent)")
    assert (
        T > 100 and every > 1 and shown == [t if i % every == 0 else "" for i, t in enumerate(exploration.data.tokens)]
    )
    assert f"one in {every} is named" in page.page.locator("#similarity-thinned").inner_text()
    page.close()


def test_the_head_table_fits_1280_px_and_keeps_layer_and_head_in_view(browser, tiny, tmp_path):
    """At 1280 px the table is not clipped; at 420 px, scrolled to its right end after sorting, the
    layer and head columns are still at its left edge (sticky). Matrix mode: no band above the matrix
    wider than the longest token, and no readout left over from the lines."""
    exploration = minibert.explore(tiny, "The river bank was muddy.")
    path = exploration.save(tmp_path / "table.html")
    page = OpenPage(browser, path)
    width = page.evaluate("(() => { const b = document.querySelector('#statistics-panel .table-box'); "
                          "return [b.scrollWidth, b.clientWidth]; })()")  # fmt: skip
    assert width[0] <= width[1], f"the head table is clipped at 1280 px: {width[0]} px in a {width[1]} px box"
    canvas = page.page.locator("#head-canvas").bounding_box()
    page.page.mouse.move(canvas["x"] + 20, canvas["y"] + 4 + 2.5 * 18)  # a token of the lines view
    assert page.page.locator("#head-readout").inner_text() != ""
    page.page.locator('input[name="head-mode"][value="matrix"]').check()
    assert page.page.locator("#head-readout").inner_text() == ""
    band = page.evaluate("""(() => {
        const c = document.getElementById('head-canvas'), T = window.minibert.tokens.length;
        const cell = Math.min(22, Math.floor(760 / T)); return c.height - 4 - T * cell; })()""")
    assert band < 100, f"{band} px above the matrix for tokens no longer than 'muddy'"
    page.close()
    narrow = browser.new_context(viewport={"width": 420, "height": 900}).new_page()
    narrow.goto(path.resolve().as_uri())
    narrow.wait_for_selector(READY, state="attached")
    narrow.locator("#statistics th").nth(8).click()  # sort by entropy
    narrow.evaluate("document.querySelector('#statistics-panel .table-box').scrollLeft = 10000")
    box = narrow.locator("#statistics-panel .table-box").bounding_box()
    first = narrow.locator("#statistics tr").nth(1).locator("td").nth(0).bounding_box()
    second = narrow.locator("#statistics tr").nth(1).locator("td").nth(1).bounding_box()
    assert second["x"] >= first["x"] + first["width"] - 1, "the head column covers the layer column"
    assert narrow.evaluate("document.querySelector('#statistics-panel .table-box').scrollLeft") > 0
    assert abs(first["x"] - box["x"]) < 2, "the layer column scrolled out of view"
    assert "▼" in narrow.locator("#statistics th").nth(8).inner_text()
    narrow.context.close()


# ----------------------------------------------------------------------------- hostile input

HOSTILE_TEXTS = {
    "script end": "</script><script>window.__pwned = 1</script>",
    "img onerror": '<img src=x onerror="window.__pwned = 2">',
    "svg onload": "<svg onload=window.__pwned=3><circle/></svg>",
    "iframe": "<iframe src=javascript:window.parent.__pwned=4></iframe>",
    "quotes and backslashes": "He said \"hi\" and 'bye' \\ \\\\ \\u003c \\n",
    "html comment": "<!-- a comment --> <![CDATA[ x ]]> --!>",
    "right to left override": "abc\u202edef\u202c and \u2067isolate\u2069",
    "hebrew and arabic": "שלום עולם مرحبا بالعالم",
    "zero width": "a\u200bb\u200dc\ufeffd\u2060e",
    "emoji": "👩‍👩‍👧 🇫🇷 🤖✨ and ❤️",
    "template slots": "$DATA $SCRIPT $TITLE $STYLE $CONTENT_SECURITY_POLICY",
    "entities": "&lt;script&gt;window.__pwned=5&lt;/script&gt; &amp; &#60;b&#62;",
    "javascript url": "javascript:window.__pwned=6 data:text/html,<b>x</b>",
    "template injection": "{{constructor.constructor('window.__pwned=7')()}} ${window.__pwned=8}",
    "line separators": "one\u2028two\u2029three",
    "controls": "nul\x00bell\x07escape\x1b[31m red",
    "style tag": "<style>body { display: none }</style>",
    "base and form": '<base href="https://example.com/"><form action=https://example.com><button>go',
    "meta refresh": '<meta http-equiv="refresh" content="0;url=https://example.com">',
    "a long word": "x" * 300,
    "mask in markup": "<b>[MASK]</b> and <i>[MASK]</i>",
    "unpaired surrogate escapes": '"\\ud800" and "\\udfff"',
}
# Elements the page itself makes: anything else in the body came from the input.
PAGE_ELEMENTS = {"header", "h1", "h2", "span", "p", "noscript", "section", "code", "div", "i", "label", "input",
                 "button", "canvas", "table", "tr", "th", "td", "footer", "script"}  # fmt: skip
HOSTILE_PIECES = [
    "</script><script>window.__pwned=9</script>",
    "<img/src=x/onerror=window.__pwned=10>",
    '"onmouseover="window.__pwned=11',
    "&amp;lt;",
    "$DATA",
    "\u202eevil",
    "##</script>",
    "<svg/onload=window.__pwned=12>",
]


def _check_no_script_ran(page: OpenPage, tokens: list[str]) -> None:
    assert page.evaluate("window.__pwned") is None, "a script from the input ran"
    assert page.evaluate("document.scripts.length") == 2
    tags = set(page.evaluate("Array.from(document.body.querySelectorAll('*'), (e) => e.localName)"))
    assert tags <= PAGE_ELEMENTS, f"elements from the input: {sorted(tags - PAGE_ELEMENTS)}"
    shown = page.evaluate("Array.from(document.querySelectorAll('#tokens .piece'), (e) => e.textContent)")
    assert shown == tokens, "the tokens are not shown as the text they are"
    assert page.evaluate("window.minibert.tokens") == tokens


@pytest.fixture(scope="module")
def tiny(masked_lm):
    directory, _ = masked_lm
    return minibert.BertForMaskedLM.from_pretrained(directory), minibert.BertTokenizer.from_pretrained(directory)


@pytest.mark.parametrize("name", list(HOSTILE_TEXTS))
def test_hostile_text_is_shown_as_text_and_never_run(browser, tiny, tmp_path, name):
    text = HOSTILE_TEXTS[name]
    exploration = minibert.explore(tiny, text, text[::-1] if name == "script end" else None)
    path = exploration.save(tmp_path / "hostile.html")
    assert "<script>window" not in path.read_text(encoding="utf-8")
    page = OpenPage(browser, path)
    _check_no_script_ran(page, exploration.data.tokens)
    page.page.locator('[data-layer="1"][data-head="0"]').click()
    page.page.locator("#lens td").first.click()  # the guesses' detail is drawn from the data too
    assert page.evaluate("window.__pwned") is None
    page.close()


@pytest.mark.parametrize(
    "shape",
    [dict(layers=1, heads=1, hidden=8), dict(layers=1, heads=48, hidden=48), dict(layers=2, heads=2, positions=3)],
    ids=["1 layer 1 head", "48 heads", "3 positions: one token of text"],
)
def test_hostile_vocabulary_and_extreme_shapes(browser, tmp_path, shape):
    """Pieces of a hostile vocabulary, as tokens and as guesses, with 1 head, 48 heads or one token."""
    lines = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *HOSTILE_PIECES, "a", "b"]
    random_masked_lm(tmp_path / "model", lines, **shape)
    tokenizer = minibert.BertTokenizer(tmp_path / "model" / "vocab.txt", do_lower_case=False, do_basic_tokenize=False)
    text = "a" if shape.get("positions") == 3 else " ".join(HOSTILE_PIECES[:6] + ["[MASK]", "a"])
    exploration = minibert.explore(tmp_path / "model", text, tokenizer=tokenizer, top_k=len(lines))
    assert set(exploration.data.tokens) >= ({"a"} if len(text) == 1 else set(HOSTILE_PIECES[:6]))
    page = OpenPage(browser, exploration.save(tmp_path / "page.html"))
    _check_no_script_ran(page, exploration.data.tokens)
    guesses = page.evaluate("window.minibert.predictions(window.minibert.layers)")
    assert {piece for row in guesses for piece, _ in row} >= set(HOSTILE_PIECES)  # every piece is shown as a guess
    assert page.page.locator("[data-layer][data-head]").count() == shape["layers"] * shape["heads"]
    page.page.locator("#lens td").last.click()
    shown = page.evaluate("Array.from(document.querySelectorAll('#lens-detail .piece'), (e) => e.textContent)")
    assert set(shown) == set(lines) - {"[PAD]"} or len(shown) == len(lines)
    assert page.evaluate("window.__pwned") is None
    page.close()


@pytest.mark.parametrize(("dtype", "says"), [
    (torch.float32, ", masked-LM head"), (torch.float64, ", computed in float64, masked-LM head"),
    (torch.bfloat16, ", computed in bfloat16 (approximate numbers), masked-LM head"),
    (torch.float16, ", computed in float16 (approximate numbers), masked-LM head"),
])  # fmt: skip
def test_the_summary_calls_only_less_precise_numbers_approximate(browser, masked_lm, tmp_path, dtype, says):
    """A float64 model's page said "computed in float64 (approximate numbers)": only a type with
    fewer bits than the float32 reference is approximate."""
    directory, _ = masked_lm
    model = minibert.BertForMaskedLM.from_pretrained(directory).to(dtype)
    path = minibert.explore(model, "Paris is the [MASK] of France.").save(tmp_path / "page.html")
    page = OpenPage(browser, path)
    summary = page.page.locator("#summary").inner_text()
    assert summary.startswith("2 layers × 4 heads, 9 tokens" + says), summary
    page.close()


def test_exports_and_a_chosen_token_in_chromium(browser, tiny, tmp_path):
    """Export PNG / SVG / JSON of the open head (the JSON's attention is window.minibert's; the SVG
    is well-formed XML with the tokens as text); clicking a token isolates its row."""
    import json
    from xml.etree import ElementTree

    text = 'Tom & "Jerry" <b>[MASK]</b>'
    exploration = minibert.explore(tiny, text)
    page = OpenPage(browser, exploration.save(tmp_path / "exports.html"))
    page.page.locator('[data-layer="1"][data-head="3"]').click()
    saved = {}
    for button in ("png", "svg", "json"):
        with page.page.expect_download() as download:
            page.page.locator(f"#export-{button}").click()
        saved[button] = Path(download.value.path()).read_bytes()
        assert download.value.suggested_filename.endswith(f"-layer1-head3.{button}")
    assert saved["png"].startswith(b"\x89PNG") and _not_blank(saved["png"]) > 5
    svg = ElementTree.fromstring(saved["svg"])
    texts = [element.text for element in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert set(texts) == set(exploration.data.tokens) and "<" in texts and "&" in texts
    exported = json.loads(saved["json"])
    assert exported["tokens"] == exploration.data.tokens and exported["openHead"]["layer"] == 1
    in_page = page.evaluate("Array.from(window.minibert.attention(1, 3))")
    assert np.asarray(exported["openHead"]["attention"]).ravel().tolist() == in_page
    assert len(exported["predictions"]) == exploration.data.layers + 1
    page.page.locator("#tokens .token").nth(2).click()
    assert page.page.locator("#tokens .token.chosen").count() == 1
    assert "the 5 best guesses" in page.page.locator("#lens-detail").inner_text()  # its last layer's guesses
    page.close()


@pytest.mark.slow
def test_the_benchmark_script_runs(browser):
    """scripts/bench_explore.py at 64 positions, one round (its figures at 512 are in docs/explore.md)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    environment = child_environment()
    done = subprocess.run([sys.executable, str(root / "scripts" / "bench_explore.py"), "--positions", "64",
                           "--rounds", "1", "--chromium", CHROMIUM], capture_output=True, text=True, timeout=900,
                          env=environment)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "CPU: " in done.stdout and "text: 64 tokens; 12 layers × 12 heads" in done.stdout
