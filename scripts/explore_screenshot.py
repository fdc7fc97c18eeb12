"""The screenshot in docs/explore.md: a real page (rxnfp's pre-trained masked LM on a reaction), as
headless Chromium draws it, with a head opened and a [MASK]'s guesses shown.

    python scripts/explore_screenshot.py docs/explore.png
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

import rxnfp
from PIL import Image
from playwright.sync_api import sync_playwright

import minibert

REACTION = "C C ( = [MASK] ) O . O C C >> C C ( = O ) O C C"  # ethanol + acetic acid → ethyl acetate


def main(output: str) -> None:
    directory = Path(rxnfp.__file__).parent / "models" / "transformers" / "bert_pretrained"
    tokenizer = minibert.BertTokenizer(directory / "vocab.txt", do_lower_case=False, do_basic_tokenize=False)
    page = minibert.explore(directory, REACTION, tokenizer=tokenizer, top_k=5)
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        path = page.save(Path(folder) / "rxnfp.html")
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        view = browser.new_page(viewport={"width": 1100, "height": 900}, device_scale_factor=1)
        view.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
        view.goto(path.resolve().as_uri())
        view.wait_for_selector("html[data-ready=true]", state="attached")
        view.locator('[data-layer="3"][data-head="1"]').click()
        view.locator("#lens tr").nth(6).locator("td").nth(5).click()  # layer 5 at the [MASK]
        png = view.screenshot(full_page=True)
        browser.close()
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=64)  # a third of the bytes, same look
    image.save(output, optimize=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/explore.png")
