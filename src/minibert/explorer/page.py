"""One self-contained HTML page: the template, its CSS and JavaScript, and the data, all inline.

The page's source is kept as real files beside this module (assets/explorer.html, explorer.css,
explorer-data.js, explorer-panels.js, explorer-hidden.js, explorer-export.js); this module only fills
the template's four slots. Nothing is loaded from the network (no CDN, no font, no image), so the
page opens from ``file://`` offline.

Text from the user and the vocabulary is data, never markup: the JSON is written with ``<``, ``>``
and ``&`` escaped (so ``</script>`` in a text cannot end the data's element), the title is
HTML-escaped, and the scripts write strings into the page as text only. A Content-Security-Policy
allows exactly the page's own script (by its SHA-256), so even markup that got into the page
could not run a script of its own.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from functools import lru_cache
from importlib import resources

# one <script>, in this order: the data and window.minibert, the panels, the hidden states, the exports and the start
SCRIPTS = ("explorer-data.js", "explorer-panels.js", "explorer-hidden.js", "explorer-export.js")
ASSETS = ("explorer.html", "explorer.css", *SCRIPTS)


@lru_cache(maxsize=1)
def _assets() -> dict[str, str]:
    folder = resources.files(__package__).joinpath("assets")
    return {name: folder.joinpath(name).read_text(encoding="utf-8") for name in ASSETS}


def json_for_script(value) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&``
    appears literally (they are ``\\u003c`` and so on, which JSON.parse reads back unchanged).

    >>> json_for_script({"text": "</script><b>"})
    '{"text": "\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e"}'
    """
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(payload: dict, title: str) -> str:
    """The page for ``payload`` (payload.page_payload) as one HTML string."""
    assets = _assets()
    script = "\n" + "\n".join(assets[name] for name in SCRIPTS) + "\n"
    assert "</script" not in script.lower(), "a script of the page would end its own element"
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    policy = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
              "img-src data: blob:; connect-src data: blob:; base-uri 'none'; form-action 'none'")  # fmt: skip
    slots = {
        "$CONTENT_SECURITY_POLICY": policy,
        "$TITLE": html.escape(title),
        "$STYLE": assets["explorer.css"],
        "$DATA": json_for_script(payload),
        "$SCRIPT": script,
    }
    page = assets["explorer.html"]
    for slot in ("$CONTENT_SECURITY_POLICY", "$TITLE", "$STYLE"):  # trusted text first; the data last,
        page = page.replace(slot, slots[slot], 1)  # so nothing in the data is ever taken for a slot
    before, after = page.split("$DATA", 1)
    head, tail = after.split("$SCRIPT", 1)
    return before + slots["$DATA"] + head + slots["$SCRIPT"] + tail
