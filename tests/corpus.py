"""Real text that no one here wrote, from packages the dev extra installs, for parity tests and
benchmarks.

* Django's translation catalogues: the admin's messages translated by people into ~100 languages
  (Latin with accents, Cyrillic, Greek, Arabic, Hebrew, CJK, Korean, Thai, ...).
* The ``emoji`` package's names of every emoji in a dozen languages, each followed by the emoji.
* Docstrings of Python's standard library: English prose of every length, with code in it.

Texts are returned in a fixed order, so a run is reproducible.
"""

from __future__ import annotations

import ast
import functools
import importlib
import sys
from pathlib import Path


def _po_strings(path: Path) -> list[str]:
    """The msgstr texts of one gettext .po file."""
    texts, current, in_msgstr = [], [], False
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("msgstr"):
            if current:
                texts.append("".join(current))
            current, in_msgstr = [], True
            line = line.split(" ", 1)[1] if " " in line else '""'
        elif line.startswith('"') and in_msgstr:
            pass
        else:
            if in_msgstr and current:
                texts.append("".join(current))
            current, in_msgstr = [], False
            continue
        try:
            current.append(ast.literal_eval(line.strip()))
        except (ValueError, SyntaxError):
            pass
    if current:
        texts.append("".join(current))
    return [text for text in texts if text.strip()]


@functools.cache
def translations() -> tuple[str, ...]:
    import django

    root = Path(django.__file__).parent
    texts: list[str] = []
    for path in sorted(root.glob("**/locale/*/LC_MESSAGES/*.po")):
        texts.extend(_po_strings(path))
    return tuple(texts)


@functools.cache
def emoji_names() -> tuple[str, ...]:
    import emoji

    languages = ("en", "es", "fr", "de", "it", "pt", "ru", "ja", "ko", "zh", "ar", "fa", "tr")
    for language in languages:
        emoji.config.load_language(language)
    texts = []
    for char, data in sorted(emoji.EMOJI_DATA.items()):
        for language in languages:
            name = data.get(language)
            if name:
                texts.append(f"{name.strip(':').replace('_', ' ')} {char}")
    return tuple(texts)


@functools.cache
def docstrings(limit: int = 20_000) -> tuple[str, ...]:
    """Docstrings of the standard library and numpy (numpy's are long, structured English),
    collected in a fresh interpreter: a module's namespace holds more once other code has imported
    its submodules or patched it (transformers, ray, ... do), so collected in-process the texts
    depended on what had run before (the int8 accuracy test saw other texts in a full run)."""
    import json
    import subprocess

    script = ("import json, sys, warnings; sys.path.insert(0, sys.argv[1]); import corpus; "
              "warnings.simplefilter('ignore'); print(json.dumps(corpus._docstrings(int(sys.argv[2]))))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", script, str(Path(__file__).resolve().parent), str(limit)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return tuple(json.loads(out.stdout.splitlines()[-1]))


def _docstrings(limit: int) -> tuple[str, ...]:
    texts = []
    for module_name in [*sorted(sys.stdlib_module_names), "numpy", "numpy.linalg", "numpy.fft", "numpy.random"]:
        if module_name.startswith("_") or module_name in {"antigravity", "this", "idlelib", "tkinter", "turtledemo"}:
            continue
        try:
            module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001 — platform modules that do not import here
            continue
        objects = [module, *vars(module).values()]
        for obj in objects:
            doc = getattr(obj, "__doc__", None)
            if isinstance(doc, str) and len(doc) > 40 and getattr(obj, "__module__", module_name) == module_name:
                texts.append(doc.strip())
        if len(texts) >= limit:
            break
    return tuple(dict.fromkeys(texts))[:limit]


def all_texts() -> list[str]:
    return [*translations(), *emoji_names(), *docstrings()]


def benchmark_texts(count: int = 3000) -> list[str]:
    """A few thousand real texts of varied length and script for the speed benchmarks:
    docstrings (long English), translations (short, many scripts) and emoji names, interleaved."""
    long_texts = [text for text in docstrings() if len(text) > 200]
    short_texts = [text for text in translations() if len(text) > 20]
    picked = []
    step_long = max(1, len(long_texts) // (count // 2))
    step_short = max(1, len(short_texts) // (count // 2))
    for index in range(count // 2):
        picked.append(long_texts[(index * step_long) % len(long_texts)])
        picked.append(short_texts[(index * step_short) % len(short_texts)])
    return picked


if __name__ == "__main__":
    for name, texts in (("translations", translations()), ("emoji", emoji_names()), ("docstrings", docstrings())):
        print(f"{name}: {len(texts)} texts, mean {sum(map(len, texts)) / len(texts):.0f} chars")
