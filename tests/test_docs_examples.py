"""Every fenced Python and shell example in README.md and docs/*.md runs, as a reader would paste it.

The examples name hub checkpoints (``sentence-transformers/all-MiniLM-L6-v2``, ``dslim/bert-base-NER``,
...) and placeholders (``DIR``, ``CE_DIR``, ``texts.txt``): they run against the test fixtures. A
loopback hub (tests/hub_server.py) serves each hub id from a small checkpoint of the same kind (the
real all-MiniLM-L6-v2, tiny random classifiers, the QA reference), and the working directory holds
the placeholders (each a link to such a checkpoint, or a small input file). A Python example runs in
a fresh process with the names its page takes as already made (``texts``, ``tokenizer``, ...: the
PRELUDES below); in the default run that process is forked from one that has imported torch once
(fork_server.py: the example's own process, as ``python -c`` would make it, less ~3 s of imports). A
shell example runs in bash with ``set -e``, so each of its commands must exit 0. A ``minibert serve``
line starts the server in the background on a free port (for 8080), waits until it answers /health,
and keeps it for the page's next examples (curl, the OpenAI client). A shell example's plain ``minibert``
lines (no pipe, redirection, ``;``/``&``, command substitution) are recorded as bash reads them and run
in one Python process with ``cli.main`` (one_process.py's runner: each announced, the first failure
named), right before the example's next other line and at its end, so the page's order stands, instead
of paying ~3 s of imports each; an example with a compound command, heredoc or multi-line quote runs as
it was, every command its own process.

An example that cannot run says why in its page, in an HTML comment right before the fence
(``<!-- not run: installs packages -->``); NOT_RUN lists them, and the two must agree. Pages with a
test of their own are EXCLUDED (commented). What is checked is that every example runs without an
error, not the values in its comments (the fixtures are not the named checkpoints).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import one_process
import pytest
from fork_server import ForkServer

import minibert
from conftest import make_google_checkpoint
from hub_server import HubServer
from random_instances import random_instances, write_instances
from task_checkpoints import QA_REFERENCE, ner_model

# unique lines with the special tokens (pretraining-data refuses a vocabulary that repeats a line)
PRETRAINING_VOCAB = Path(__file__).parent / "data" / "qa_reference" / "vocab.txt"

ROOT = Path(__file__).resolve().parents[1]
# Pages run by a test of their own, written with the page.
EXCLUDED = {
    "docs/walkthrough.md": "tests/test_docs_walkthrough.py runs it as doctests, printed values included",
    "docs/pretraining.md": "its own test, written with the page (the pre-training round)",
    "docs/explore.md": "its own test, written with the page (the explorer round)",
    "docs/migrating.md": "tests/test_docs_migrating.py runs it as doctests, printed values included",
    "docs/finetuning.md": "tests/test_docs_finetuning.py runs it at small sizes, with the files it needs",
}
# How many examples each page leaves unrun, each marked before its fence with the reason
# (<!-- not run: installs packages -->): a new unrun example is a decision made here, not by accident.
NOT_RUN = {"README.md": 2, "docs/CONTRIBUTING.md": 1, "docs/performance.md": 2, "docs/embedder.md": 1,
           "docs/checkpoints.md": 1, "docs/gpu.md": 3}  # fmt: skip
PAGES = [p.relative_to(ROOT).as_posix() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]]
PAGES = [page for page in PAGES if page not in EXCLUDED]

TEXTS = ["A man is eating food.", "A man eats.", "Berlin has 3.9 million people.", ""]
DOCUMENTS = ["Berlin has 3.9 million people.", "Cats sleep a lot.", "Berlin is the capital of Germany."]
# The names a page's Python examples take as made before them (a reader's own data and objects).
PRELUDES = {
    "docs/embedder.md": f"texts = {TEXTS!r}",
    "docs/tasks.md": f"documents = {DOCUMENTS!r}\nnli_model = 'NLI_DIR'\npath = 'DIR'",
    "docs/tokenizer.md": "from minibert import BertModel, BertTokenizer\n"
    "tokenizer = BertTokenizer.from_pretrained('sentence-transformers/all-MiniLM-L6-v2')\n"
    "model = BertModel.from_pretrained('sentence-transformers/all-MiniLM-L6-v2')\n"
    "question, context = 'Where do I live?', 'My name is Wolfgang and I live in Berlin. ' * 40\n"
    f"words = ['Ada', 'Lovelace', 'was', 'born', 'in', 'London']\ntexts = {TEXTS!r}",
}
LANGUAGES = {"python": "python", "bash": "shell", "sh": "shell", "shell": "shell"}


def examples(page: str) -> list[tuple[str, str, str | None]]:
    """(language, code, the not-run reason or None) of each fenced example, in page order."""
    text = (ROOT / page).read_text(encoding="utf-8")
    pattern = r"(?:<!--\s*not run:\s*(.*?)\s*-->\n)?^```(python|bash|sh|shell)\n(.*?)^```"
    return [(LANGUAGES[language], code, reason) for reason, language, code in re.findall(pattern, text, re.S | re.M)]


def test_the_pages_and_the_not_run_list_agree():
    marked = {page: sum(1 for _, _, reason in examples(page) if reason) for page in PAGES}
    assert {page: count for page, count in marked.items() if count} == NOT_RUN
    assert sum(len(examples(page)) for page in PAGES) >= 20


def test_the_excluded_pages_have_their_own_test():
    tests = " ".join(path.read_text(encoding="utf-8") for path in (ROOT / "tests").glob("test_*.py"))
    for page in EXCLUDED:
        if (ROOT / page).exists():
            assert Path(page).name in tests.replace(Path(__file__).read_text(encoding="utf-8"), ""), page


def test_only_plain_minibert_lines_are_recorded():
    """The shell examples' lines run in one process are those whose order and streams recording keeps."""
    assert _recordable("minibert verify --model x              # per-layer max |Δ| vs transformers")
    assert _recordable('minibert classify --model DIR "a | b > c; d & e" --top-k all')
    assert _recordable("minibert answer --question 'Where?' --context \\#1  # {\"question\"} lines")
    for line in ['echo "a" | minibert embed', "minibert embed x | head -1", "minibert embed x > out.jsonl",
                 "minibert embed --input - < texts.txt", "minibert embed x && echo done", "minibert embed x; ls",
                 'minibert embed "$(cat texts.txt)"', "minibert embed `cat texts.txt`", "minibert serve --port 1",
                 "minibert embed x &", "MODEL=x minibert embed y", "  python -m minibert embed x"]:  # fmt: skip
        assert not _recordable(line), line
    assert _simple_lines(["minibert embed x", 'MODEL=$(python -c "print(1)")', "curl -s 'a' -d '{\"b\": 1}'"])
    unsplit = [["minibert embed x <<EOF", "y", "EOF"], ['minibert embed "x', 'y"'], ["MODEL=$(python -c 1"]]
    compound = [["for f in a b", "do", "  minibert embed --input $f", "done"], ["if true; then", "minibert x", "fi"]]
    for lines in unsplit + compound:
        assert not _simple_lines(lines), lines
    block = "minibert embed a\nminibert embed b  # b\nls\nminibert embed c | head\nminibert embed d\n"
    assert _shell_script(block, 1).endswith(
        "_minibert_record embed a\n_minibert_record embed b  # b\n_minibert_run\n"
        "ls\nminibert embed c | head\n_minibert_record embed d\n_minibert_run\n"
    )
    assert "_minibert_record" not in _shell_script("for f in a b; do\n  minibert embed $f\ndone\n", 1)


# ----------------------------------------------------------------------------- the fixtures' world


@pytest.fixture(scope="module")
def world(tmp_path_factory, make, minilm_dir, vocab_file):
    """The hub ids and placeholders of the examples, as local checkpoints."""
    google = tmp_path_factory.mktemp("bert-base-uncased")  # 4 layers: `--layers -1,-2,-3,-4` exist
    make_google_checkpoint(google, vocab_file, layers=4, hidden=128, heads=2, intermediate=512, seed=5)
    classifier = make("BertForSequenceClassification", scale=5.0, id2label={0: "NEGATIVE", 1: "POSITIVE"},
                      label2id={"NEGATIVE": 0, "POSITIVE": 1})  # fmt: skip
    nli = make("BertForSequenceClassification", scale=5.0, num_labels=3)
    cross_encoder = make("BertForSequenceClassification", scale=5.0, num_labels=1)
    hub_ids = {
        "sentence-transformers/all-MiniLM-L6-v2": minilm_dir,
        "intfloat/e5-small-v2": minilm_dir,
        "google-bert/bert-base-uncased": google,
        "nlptown/bert-base-multilingual-uncased-sentiment": classifier,
        "dslim/bert-base-NER": ner_model(make),
        "deepset/bert-base-cased-squad2": QA_REFERENCE,
        "cross-encoder/ms-marco-MiniLM-L6-v2": cross_encoder,
    }
    placeholders = {
        "DIR": classifier,
        "NLI_DIR": nli,
        "NER_DIR": hub_ids["dslim/bert-base-NER"],
        "SQUAD_DIR": QA_REFERENCE,
        "CE_DIR": cross_encoder,
        "uncased_L-12_H-768_A-12": ROOT / "tests" / "data" / "uncased_L-2_H-32_A-2",  # Google's TF layout
        "path/to/a/fine-tuned/classifier": classifier,
        "path/to/ms-marco-MiniLM-L6-v2": cross_encoder,
    }
    lines = "\n".join(TEXTS[:3]) + "\n"
    records = "".join(f'{{"text": "{text}"}}\n' for text in TEXTS[:3])
    files = {
        "texts.txt": lines,
        "docs.txt": lines,
        "documents.txt": "\n".join(DOCUMENTS) + "\n",
        "docs.jsonl": records,
        "pairs.jsonl": '{"text": "A man sleeps.", "text_pair": "A person rests."}\n',
        "questions.jsonl": '{"question": "Where do I live?", "context": "I live in Berlin."}\n',
        # `minibert finetune`'s labelled examples (README): a text and its label per row
        "train.csv": "text,label\n" + 10 * ("A man eats.,short\nIt rains.,short\n"
                                            "A man is eating food in the kitchen tonight.,long\n"
                                            "Berlin has 3.9 million people and many lakes.,long\n"),  # 40 rows
        "dev.csv": "text,label\nA short one.,short\nA sentence that is rather longer than forty characters.,long\n",
        # the pre-training examples: a corpus (a sentence a line, a blank line between documents), a
        # vocabulary with its special tokens, a small model's config, and instances made for them
        "corpus.txt": "\n\n".join("\n".join(DOCUMENTS[i : i + 3]) for i in range(0, len(DOCUMENTS), 3)) + "\n",
        "vocab.txt": PRETRAINING_VOCAB.read_text(encoding="utf-8"),
        "config.json": json.dumps(
            {
                "vocab_size": len(PRETRAINING_VOCAB.read_text().splitlines()),
                "hidden_size": 32,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "intermediate_size": 64,
                "max_position_embeddings": 64,
            }
        ),  # fmt: skip
    }
    instances = tmp_path_factory.mktemp("instances") / "instances.tfrecord"
    write_instances(instances, random_instances(64, len(PRETRAINING_VOCAB.read_text().splitlines()), seq_len=32))
    placeholders["instances.tfrecord"] = instances
    shims = tmp_path_factory.mktemp("bin")  # `minibert` and `python`: this interpreter, this minibert
    for name, command in {"minibert": f'"{sys.executable}" -m minibert', "python": f'"{sys.executable}"'}.items():
        (shims / name).write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        (shims / name).chmod(0o755)
    with HubServer(hub_ids) as hub:
        yield {"hub": hub, "placeholders": placeholders, "files": files, "shims": shims,
               "hf_home": tmp_path_factory.mktemp("hf")}  # fmt: skip


def _workdir(world, tmp_path: Path) -> Path:
    for name, target in world["placeholders"].items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).symlink_to(Path(target).resolve(), target_is_directory=Path(target).is_dir())
    # (no my-bert/: README's `minibert vocab --output my-bert/` needs its `mkdir -p` first, as a reader's would)
    for name, content in world["files"].items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    return tmp_path


def _environment(world) -> dict:
    source = str(Path(minibert.__file__).resolve().parents[1])  # the minibert under test
    environment = {key: value for key, value in os.environ.items() if key != "MINIBERT_API_KEY"}
    python_path = os.pathsep.join([source, environment.get("PYTHONPATH", "")])
    return {**environment, "HF_ENDPOINT": world["hub"].url, "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_XET": "1",
            "HF_HOME": str(world["hf_home"]), "PYTHONPATH": python_path, "TOKENIZERS_PARALLELISM": "false",
            "PATH": f"{world['shims']}{os.pathsep}{environment['PATH']}"}  # fmt: skip


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# ----------------------------------------------------------------------------- running the examples


SHELL_PRELUDE = r"""set -euo pipefail
wait_for_server() {  # port, pid: until /health answers 200 (the model loaded), or the server died
    for _ in $(seq 1200); do
        curl -sf "127.0.0.1:$1/health" >/dev/null && return 0
        kill -0 "$2" 2>/dev/null || { echo "the server exited" >&2; cat server.log >&2; return 1; }
        sleep 0.1
    done
    echo "the server did not get ready" >&2; cat server.log >&2; return 1
}
stop_server() {
    [ -e server.pid ] && { kill "$(cat server.pid)" 2>/dev/null || true; rm -f server.pid; sleep 0.5; }; true
}
"""


# Recorded ``minibert`` lines (_shell_script): each line's argv, NUL-separated, one file a command; run in
# order, in one process, by one_process.RUNNER before the example's next other line and at its end.
RECORDING = r"""_minibert_commands=$(mktemp -d)
trap 'rm -rf "$_minibert_commands"' EXIT
_minibert_count=0
_minibert_record() {
    _minibert_count=$((_minibert_count + 1))
    printf '%s\0' "$@" > "$_minibert_commands/$_minibert_count"
}
_minibert_run() {
    if [ "$_minibert_count" -gt 0 ]; then
        _minibert_count=0
        PYTHON -c RUNNER "$_minibert_commands" || return
        rm -f "$_minibert_commands"/*
    fi
}
"""
# A line that starts one of these is part of a compound command: no line of its example is recorded.
RESERVED = {"if", "then", "elif", "else", "fi", "case", "esac", "for", "select", "while", "until", "do", "done",
            "function", "time", "coproc", "{", "}", "!", "[["}  # fmt: skip


def _shell_line(line: str) -> tuple[str, str] | None:
    """(``line`` less its comment, the same with quoted and escaped characters blanked), or None where a
    quote stays open at the line's end (a multi-line string)."""
    kept, plain, quote, index = [], [], None, 0
    while index < len(line):
        char = line[index]
        if quote is None and char == "#" and (index == 0 or line[index - 1].isspace()):
            break  # a comment: `#` starting a word
        if char == "\\" and quote != "'" and index + 1 < len(line):
            kept.append(line[index : index + 2])
            plain.append("  ")
            index += 2
            continue
        if char == quote:
            quote = None
        elif quote is None and char in "'\"":
            quote = char
        kept.append(char)
        plain.append(char if quote is None and char not in "'\"" else " ")
        index += 1
    return None if quote else ("".join(kept), "".join(plain))


def _recordable(line: str) -> bool:
    """A plain ``minibert`` command: not serve (its server runs on), no pipe, redirection, ``;``, ``&``,
    or command substitution (which would run before the earlier recorded commands)."""
    kept, plain = _shell_line(line) or ("", "")
    return (plain.strip().startswith("minibert ") and not re.match(r"\s*minibert serve\b", plain)
            and not re.search(r"[|<>;&]", plain) and not re.search(r"`|\$\(", kept))  # fmt: skip


def _simple_lines(lines: list[str]) -> bool:
    """Each line a whole simple command or list: no multi-line quote, heredoc, open parenthesis or
    compound command (where a recorded line's run would land inside or between its parts)."""
    for line in lines:
        split = _shell_line(line)
        if split is None:
            return False
        words = split[1].split()
        if "<<" in split[1] or split[1].count("(") != split[1].count(")") or (words and words[0] in RESERVED):
            return False
    return True


def _shell_script(code: str, port: int) -> str:
    """The example as a bash script; a ``minibert serve`` line starts its server in the background, and
    the plain ``minibert`` lines run in one process (RECORDING), where the example is simple lines."""
    lines = []
    joined = re.sub(r"\\\n\s*", " ", code).splitlines()
    simple, waiting, recorded = _simple_lines(joined), False, False  # waiting: recorded, not yet run
    for line in joined:
        line = line.replace("8080", str(port))
        if simple and _recordable(line):
            lines.append(line.replace("minibert", "_minibert_record", 1))
            waiting = recorded = True
            continue
        if waiting and (_shell_line(line) or ("", ""))[0].strip():  # a command: the recorded ones first
            lines.append("_minibert_run")
            waiting = False
        if re.match(r"\s*minibert serve\b", line):
            line = re.sub(r"\s+#.*$", "", line)
            # (its output to a file: a pipe it held open would keep the example "running")
            started = f'echo $! > server.pid\nwait_for_server {port} "$(cat server.pid)"'
            line = f"stop_server\n{line} > server.log 2>&1 &\n{started}"
        lines.append(line)
    if waiting:
        lines.append("_minibert_run")
    runner = RECORDING.replace("PYTHON", f'"{sys.executable}"').replace("RUNNER", shlex.quote(one_process.RUNNER))
    return SHELL_PRELUDE + (runner if recorded else "") + "\n".join(lines) + "\n"


def _needs_server(language: str, code: str) -> bool:
    return language == "python" and "8080" in code  # a client of the server a shell example started


def _run_page(page: str, world, tmp_path: Path, chosen, forks: ForkServer | None = None) -> None:
    """Run the page's examples that ``chosen(language, code)`` picks, in page order (the Python
    examples forked by ``forks`` where given, else each by ``python -c``)."""
    workdir, environment, port = _workdir(world, tmp_path), _environment(world), _free_port()
    ran = 0
    try:
        for number, (language, code, reason) in enumerate(examples(page), start=1):
            if reason or not chosen(language, code):
                continue
            where = f"{page}, example {number} ({language}): {code.splitlines()[0]}"
            if language == "python":
                source = PRELUDES.get(page, "") + "\n" + code.replace("8080", str(port))
                command = [sys.executable, "-c", source]
            else:
                command = ["bash", "-c", _shell_script(code, port)]
            if forks is not None and language == "python":
                result = forks.run(source, workdir, timeout=600)
            else:
                result = subprocess.run(command, cwd=workdir, env=environment, capture_output=True, text=True,
                                        timeout=600)  # fmt: skip
            output = f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
            if (workdir / "server.log").exists():
                output += "\nthe server's output:\n" + (workdir / "server.log").read_text(errors="replace")[-3000:]
            assert result.returncode == 0, f"{where}\nexit {result.returncode}\n{output}"
            ran += 1
    finally:
        pid_file = workdir / "server.pid"
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
            time.sleep(0.5)
    assert ran, f"{page}: no example ran"


def _pages_with(wanted) -> list[str]:
    return [page for page in PAGES if any(wanted(lang, code) for lang, code, reason in examples(page) if not reason)]


def _python_alone(language: str, code: str) -> bool:
    return language == "python" and not _needs_server(language, code)


def _shell_or_client(language: str, code: str) -> bool:
    return language == "shell" or _needs_server(language, code)


@pytest.fixture(scope="module")
def forks(world):
    """One process with torch imported, started with the examples' environment, forking each example."""
    server = ForkServer(_environment(world))
    yield server
    server.close()


@pytest.mark.parametrize("page", _pages_with(_python_alone))
def test_the_python_examples_run(page, world, tmp_path, forks):
    """The pages' Python examples (but the clients of a server, run with the shell examples)."""
    _run_page(page, world, tmp_path, _python_alone, forks)


@pytest.mark.slow
@pytest.mark.parametrize("page", _pages_with(_shell_or_client))
def test_the_shell_examples_run(page, world, tmp_path):
    """Every command of the pages' shell examples (each loads a model: slow; the plain ``minibert`` lines
    of an example in one process, see _shell_script), and the Python clients of the server a shell
    example started, while it is up."""
    _run_page(page, world, tmp_path, _shell_or_client)
