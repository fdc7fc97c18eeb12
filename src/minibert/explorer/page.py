"""One self-contained HTML page: the template, its CSS and JavaScript, and the data, all inline.

The page's source is kept as real files beside this module (assets/explorer.html, explorer.css,
explorer-data.js, explorer-panels.js, explorer-hidden.js, explorer-export.js); this module only fills
the template's five slots, in one pass (``fill``). Nothing is loaded from the network (no CDN, no
font, no image), so the page opens from ``file://`` offline.

Text from the user and the vocabulary is data, never markup: the JSON is written with ``<``, ``>``
and ``&`` escaped (so ``</script>`` in a text cannot end the data's element), the title (the
model's folder: the user's text too) is HTML-escaped, and the scripts write strings into the page
as text only. A Content-Security-Policy allows exactly the page's own script (by its SHA-256), so
even markup that got into the page could not run a script of its own.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
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
        "CONTENT_SECURITY_POLICY": policy,
        "TITLE": html.escape(title),  # the model's name: the user's folder, which may hold "$DATA"
        "STYLE": assets["explorer.css"],
        "DATA": json_for_script(payload),
        "SCRIPT": script,
    }
    return fill(assets["explorer.html"], slots)


SLOT = re.compile(r"\$([A-Z_]+)\b")


def fill(template: str, slots: dict[str, str]) -> str:
    """``template`` with each ``$NAME`` replaced by ``slots[NAME]``, in one pass over the template:
    what is put in is never searched again, so a title or a text that holds "$DATA" stays text
    (filling the slots one after another put the data inside a title that held "$DATA").

    >>> fill("<title>$TITLE</title><p>$DATA</p>", {"TITLE": "runs/$DATA", "DATA": "{}"})
    '<title>runs/$DATA</title><p>{}</p>'
    """
    found = SLOT.findall(template)
    assert sorted(found) == sorted(slots), f"the template's slots {found} are not {sorted(slots)}"
    return SLOT.sub(lambda match: slots[match[1]], template)
