"""What README.md and docs/*.md name exists: files, minibert's modules and attributes, and every
``minibert COMMAND --flag`` (a flag of that very command).

The pages are read as a newcomer reads them: every `inline code` span and every line of a fenced
example. Names that belong to other projects (Google's scripts, transformers' test files, pip's and
the scripts' own flags) are listed below with where they come from.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
from pathlib import Path

import pytest

import minibert
from minibert.apps import cli
from tiny_hub import TINY

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "minibert"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Files of other projects that the pages name as such (the references' own scripts and tests).
OTHER_PROJECTS_FILES = {
    "run_classifier.py", "run_squad.py", "tokenization.py", "tokenization_test.py",  # google-research/bert
    "test_modeling_bert.py", "test_tokenization_bert.py", "test_tokenization_common.py",  # transformers
    "test_bert_wordpiece.py", "test_encoding.py",  # tokenizers
    "create_pretraining_data.py", "run_pretraining.py", "optimization.py", "modeling.py",  # google-research/bert
    "train.py",  # nanoGPT's training loop
    "download_glue_data.py",  # nyu-mll/GLUE-baselines: GLUE's data
    "run_glue.py", "run_glue_no_trainer.py",  # transformers' examples/pytorch/text-classification
}  # fmt: skip
# Flags of Google's scripts (create_pretraining_data.py, run_pretraining.py), named beside minibert's.
GOOGLE_FLAGS = {"--do_lower_case", "--do_whole_word_mask", "--random_seed", "--dupe_factor", "--max_seq_length",
                "--max_predictions_per_seq", "--masked_lm_prob", "--short_seq_prob", "--input_file", "--output_file",
                "--vocab_file", "--preserve_unused_tokens", "--output_dir", "--init_checkpoint"}  # fmt: skip
# Names of other libraries that the pages name as such: transformers' module and method names (which
# minibert answers with a TransformersNameError that says its own name), playwright's Page.
OTHER_LIBRARIES_NAMES = {"model.encoder.layer", "tokenizer.encode_plus", "page.wait_for_selector",
                         "model.gradient_checkpointing_enable", "model.config.output_hidden_states",
                         # sentence-transformers' SentenceTransformer (docs/migrating.md's table of its names)
                         "embedder.encode", "model.get_embedding_dimension", "model.max_seq_length",
                         "model.similarity", "model.encode_query", "model.encode_document",
                         "model.similarity_fn_name", "model.truncate_dim", "model.prompts", "model.default_prompt_name",
                         "model.similarity_pairwise", "model.truncate_embeddings"}  # fmt: skip
# Flags that are not minibert's: pip's (the set-up lines).
PIP_FLAGS = {"--index-url", "--no-deps", "--dry-run"}
# Flags of huggingface_hub's `hf download`, which the pages (and the errors) give for a cache of one's own.
HF_CLI_FLAGS = {"--cache-dir", "--force-download"}
# Heads of dotted names that are another package, though minibert has a module of that name.
OTHER_PACKAGES = {"ray"}  # Ray itself (ray.data...); minibert's adapter is named minibert.ray


def _instances() -> dict[str, list]:
    """Where a bare `name.attribute` names an object the page has made (``tokenizer.pad``,
    ``model.use_fast_path``): instances to look the attribute up on, made from the tiny checkpoint."""
    heads = minibert.BertForSequenceClassification.from_pretrained(TINY, new_heads=True, num_labels=2)
    return {
        "tokenizer": [minibert.BertTokenizer.from_pretrained(TINY)],
        "model": [minibert.BertModel.from_pretrained(TINY), heads,
                  minibert.BertModel.from_pretrained(TINY, dtype="int8")],  # docs/int8.md: model.int8_library
        "embedder": [minibert.Embedder.from_pretrained(TINY)],
        "config": [minibert.BertModel.from_pretrained(TINY).config],
        "page": [minibert.explore(TINY, "the river bank")],  # docs/explore.md's Exploration
    }


def code_spans(text: str) -> list[str]:
    """Every `inline code` span, and every line of every fenced block."""
    fenced = re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)
    outside = re.sub(r"^```[a-z]*\n.*?^```", "", text, flags=re.S | re.M)
    return re.findall(r"`([^`\n]+)`", outside) + [line for block in fenced for line in block.splitlines()]


def shell_lines(text: str) -> list[str]:
    """The lines of the fenced shell examples (bash, sh, shell), and the `inline` spans that are a
    command line (they start with ``minibert`` or ``python``)."""
    fenced = re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", text, flags=re.S | re.M)
    outside = re.sub(r"^```[a-z]*\n.*?^```", "", text, flags=re.S | re.M)
    inline = [span for span in re.findall(r"`([^`\n]+)`", outside) if span.startswith(("minibert ", "python "))]
    return inline + [line for block in fenced for line in block.splitlines()]


SPANS = {page.relative_to(ROOT).as_posix(): code_spans(page.read_text(encoding="utf-8")) for page in PAGES}
INSTANCES: dict[str, list] = {}
SHELL = {page.relative_to(ROOT).as_posix(): shell_lines(page.read_text(encoding="utf-8")) for page in PAGES}


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    return dict(choices)


COMMANDS = _commands()
TOP_FLAGS = {option for action in cli.build_parser()._actions for option in action.option_strings}


def flags_of(command: str) -> set[str]:
    return {option for action in COMMANDS[command]._actions for option in action.option_strings} | TOP_FLAGS


def script_flags() -> set[str]:
    return {
        flag for path in (ROOT / "scripts").glob("*.py") for flag in re.findall(r'"(--[a-z][\w-]*)"', path.read_text())
    }


@pytest.mark.parametrize("page", SPANS)
def test_named_files_exist(page):
    missing = []
    for span in SPANS[page]:
        for name in re.findall(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|md))\b", span):
            if name in OTHER_PROJECTS_FILES or name.startswith(("http", "www.")):
                continue
            places = [ROOT / name, PACKAGE / name, ROOT / "docs" / name, ROOT / "tests" / name]
            if "/" not in name:  # a bare module name: anywhere in the package (tokenizer.md says `files.py`)
                places += list(PACKAGE.rglob(name)) + list((ROOT / "scripts").glob(name))
            if not any(place.exists() for place in places):
                missing.append(name)
    assert not missing, f"{page} names files that do not exist: {sorted(set(missing))}"


def _resolve(dotted: str) -> bool:
    """``minibert.a.B.c`` or ``B.c`` (a public name of minibert, or a module of the package)."""
    parts = dotted.removesuffix("()").split(".")
    if parts[0] == "minibert":
        parts = parts[1:]
        value, index = minibert, 0
        while index < len(parts):  # modules first, then attributes
            try:
                value = importlib.import_module(f"{value.__name__}.{parts[index]}")
            except (ImportError, AttributeError, TypeError):
                break
            index += 1
        rest = parts[index:]
    elif parts[0] in OTHER_PACKAGES:
        return True
    elif parts[0] in INSTANCES:
        return any(_has_chain(instance, parts[1:]) for instance in INSTANCES[parts[0]])
    else:
        head = parts[0]
        modules = {path.stem: path for path in PACKAGE.rglob("*.py")}
        if head in minibert.__all__:
            value = getattr(minibert, head)
        elif head in modules and head != "__init__":
            value = importlib.import_module(
                "minibert." + ".".join(modules[head].relative_to(PACKAGE).with_suffix("").parts)
            )
        elif hasattr(importlib.import_module("minibert.model"), head):
            value = getattr(importlib.import_module("minibert.model"), head)
        else:
            return True  # not minibert's (nn.Linear, str.lower, ...)
        rest = parts[1:]
    return _has_chain(value, rest)


def _has_chain(value, attributes: list[str]) -> bool:
    for attribute in attributes:
        if not hasattr(value, attribute):
            return False
        value = getattr(value, attribute)
    return True


@pytest.mark.parametrize("page", SPANS)
def test_named_modules_and_attributes_exist(page):
    global INSTANCES
    INSTANCES = INSTANCES or _instances()
    names = [
        name
        for span in SPANS[page]
        if not span.lstrip().startswith(("#", "minibert ", "python ", "pip "))
        for name in re.findall(r"(?<![\w.\"'/-])((?:minibert|[A-Za-z_]\w*)(?:\.[A-Za-z_]\w*)+)(?![\w/-]*\.\w)", span)
        if not re.search(r"\.(py|md|json|txt|bin|index|safetensors|npy|jsonl|ckpt)$", name)
    ]
    broken = sorted({name for name in names if name not in OTHER_LIBRARIES_NAMES and not _resolve(name)})
    assert not broken, f"{page} names modules or attributes that do not exist: {broken}"


def _commands_in(line: str) -> list[list[str]]:
    """Each ``minibert COMMAND ...`` of a shell line, as words."""
    found = []
    for match in re.finditer(r"(?:^|[;&|]\s*|\$\(\s*|-m )minibert\s+([^;&|`#)]*)", line.strip()):
        try:
            words = shlex.split(match.group(1))
        except ValueError:
            words = match.group(1).split()
        if words:
            found.append(words)
    return found


@pytest.mark.parametrize("page", SPANS)
def test_named_commands_and_flags_exist(page):
    wrong = []
    for line in SHELL[page]:
        for words in _commands_in(line):
            command = next((word for word in words if not word.startswith("-")), None)
            flags = [word.split("=")[0] for word in words if word.startswith("--")]
            if command is None or command not in COMMANDS:
                unknown = [flag for flag in flags if flag not in TOP_FLAGS]
                if command is not None and command not in COMMANDS and re.fullmatch(r"[a-z-]+", command):
                    if words.index(command) == 0 or not words[words.index(command) - 1].startswith("--"):
                        wrong.append(f"minibert {command}: no such command")
                wrong += [f"minibert {flag}: no such flag" for flag in unknown]
                continue
            wrong += [f"minibert {command} {flag}: no such flag" for flag in flags if flag not in flags_of(command)]
    assert not wrong, f"{page}: {wrong}"


def test_every_flag_named_alone_belongs_to_something():
    """A bare `--flag` in the prose is a flag of some minibert command, of a script, of pip or of
    `hf download`."""
    known = {flag for command in COMMANDS for flag in flags_of(command)}
    known |= script_flags() | PIP_FLAGS | GOOGLE_FLAGS | HF_CLI_FLAGS
    bare = {
        (page, span.split()[0].split("=")[0])
        for page, spans in SPANS.items()
        for span in spans
        if re.match(r"--[a-z]", span)
    }
    unknown = sorted((page, flag) for page, flag in bare if flag not in known)
    assert not unknown, f"flags named in the pages that nothing has: {unknown}"


def undocumented_flags(pages_text: str) -> list[str]:
    """Each ``minibert COMMAND --flag`` that no user page (README.md, docs/ but CONTRIBUTING.md) names."""
    flags = [(command, flag) for command, parser in COMMANDS.items() for action in parser._actions
             for flag in action.option_strings if flag.startswith("--") and flag != "--help"]  # fmt: skip
    return [f"{command} {flag}" for command, flag in flags if not re.search(re.escape(flag) + r"(?![\w-])", pages_text)]


def test_every_flag_of_every_command_is_named_in_the_pages():
    """The other way round: a flag `--help` lists is named in a page a user reads, where its keyword and
    default are said (`answer --impossible` is `handle_impossible_answer`, which no one guesses)."""
    pages = "\n".join(page.read_text(encoding="utf-8") for page in PAGES if page.name != "CONTRIBUTING.md")
    assert not undocumented_flags(pages), f"flags no page names: {undocumented_flags(pages)}"
    assert "answer --impossible" in undocumented_flags(pages.replace("--impossible", ""))  # (the check can fail)


def test_the_docstrings_name_files_that_exist():
    """The package's docstrings and comments point at files too (``see resumable.py``)."""
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in re.findall(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.py)\b", path.read_text(encoding="utf-8")):
            if name in OTHER_PROJECTS_FILES or name == "setup.py":
                continue
            places = [ROOT / name, PACKAGE / name, path.parent / name, *PACKAGE.rglob(Path(name).name)]
            if not any(place.exists() and place.as_posix().endswith(name) for place in places):
                missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, missing


def test_the_checks_can_fail():
    """The checkers above, given names that do not exist, say so."""
    assert not _resolve("minibert.tokenizer.NoSuchName") and not _resolve("Embedder.no_such_method")
    assert _resolve("minibert.tokenizer.AddedToken") and _resolve("SelfAttention.forward")
    assert _commands_in("cat x | minibert embed --input - --no-such-flag 3") == [
        ["embed", "--input", "-", "--no-such-flag", "3"]
    ]
    assert "--no-such-flag" not in flags_of("embed") and "--input" in flags_of("embed")
