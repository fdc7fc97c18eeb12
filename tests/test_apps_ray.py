"""minibert.ray.EmbedBatch on a local Ray cluster (ray.init(num_cpus=2)): every row's vector is
Embedder.embed's, no row is lost or duplicated, other columns pass through, and an actor killed
mid-job is replaced with every row still there exactly once.

Every map_batches starts actors of its own, each a new process that imports torch and loads the
model: the inputs are as small as still give each job several blocks and several calls, some of
them part-full (each test's docstring says why its size still catches its bug)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import corpus
from minibert import Embedder

ray = pytest.importorskip("ray")
pytest.importorskip("pyarrow")
pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def rows():
    """120 real texts, 1 to 427 characters long (so a batch's texts have different lengths: vectors
    handed back in the Embedder's length-sorted order, not the batch's, would land on other rows)."""
    texts = [" ".join(text.split()) for text in corpus.all_texts()[:120]]
    texts = list(dict.fromkeys(texts))  # distinct texts: a row's vector identifies its text
    assert len(texts) == 120
    return [{"id": index, "text": text, "source": f"doc-{index % 7}"} for index, text in enumerate(texts)]


@pytest.fixture(scope="module")
def expected(minilm_dir, rows):
    return Embedder.from_pretrained(minilm_dir).embed([row["text"] for row in rows], progress=False)


def _check(output: list[dict], rows: list[dict], expected: np.ndarray, label: str) -> None:
    ids = sorted(row["id"] for row in output)
    assert ids == list(range(len(rows))), f"{label}: rows lost or duplicated ({len(output)} rows out of {len(rows)})"
    by_id = {row["id"]: row for row in output}
    for index, row in enumerate(rows):
        assert by_id[index]["text"] == row["text"] and by_id[index]["source"] == row["source"]  # passed through
    vectors = np.stack([np.asarray(by_id[index]["embedding"], dtype=np.float64) for index in range(len(rows))])
    assert vectors.shape == expected.shape
    cosine = (vectors * expected).sum(1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(expected, axis=1)
    assert cosine.min() >= 0.99999, f"{label}: min cosine {cosine.min():.7f}"
    print(f"\n{label}: {len(output)} rows, min cosine {cosine.min():.8f}, "
          f"max |Δ| {np.abs(vectors - expected).max():.1e}")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("batch_format", ["numpy", "pandas", "pyarrow"])
def test_every_row_gets_embedders_vector(cluster, minilm_dir, rows, expected, batch_format):
    """Each batch format is its own branch of EmbedBatch.__call__ (a dict of arrays, an Arrow table,
    a DataFrame). 120 rows in 8 blocks of 15, at most 32 a call: Ray Data makes that calls of 32,
    13, 32, 13 and 30 rows, some joining blocks, some part-full, where a lost, doubled or shifted
    row would show. One actor each: rows shared between two actors, each there exactly once, are
    the killed-actor test's (two actors, every row checked), so a second actor here would only
    start another torch process."""
    from minibert.ray import EmbedBatch

    dataset = ray.data.from_items(rows, override_num_blocks=8)
    output = dataset.map_batches(
        EmbedBatch,
        fn_constructor_kwargs={"model": str(minilm_dir)},
        compute=ray.data.ActorPoolStrategy(size=1),
        batch_size=32,
        batch_format=batch_format,
    ).take_all()
    _check(output, rows, expected, f"{batch_format}, 1 actor")
    if batch_format == "pyarrow":  # fixed-size float32 vectors in the schema
        schema = ray.data.from_items(output[:4]).schema()
        assert "embedding" in schema.names


@pytest.mark.slow
def test_options_and_columns(cluster, minilm_dir, rows):
    """text_column, output_column, pooling and normalize reach the actor's Embedder: 12 rows in 3
    calls (CLS pooling unnormalised is nothing like the recipe's normalised mean, so options dropped
    on the way fail on every row); a batch without the text column is refused with its message."""
    from minibert.ray import EmbedBatch

    dataset = ray.data.from_items([{"body": row["text"], "id": row["id"]} for row in rows[:12]])
    output = dataset.map_batches(
        EmbedBatch,
        fn_constructor_kwargs={
            "model": str(minilm_dir),
            "text_column": "body",
            "output_column": "vector",
            "pooling": "cls",
            "normalize": False,
        },  # fmt: skip
        compute=ray.data.ActorPoolStrategy(size=1),
        batch_size=4,
    ).take_all()
    assert len(output) == 12
    expected = Embedder.from_pretrained(minilm_dir).embed([row["text"] for row in rows[:12]], pooling="cls",
                                                          normalize=False)  # fmt: skip
    actual = np.stack([np.asarray(row["vector"]) for row in sorted(output, key=lambda row: row["id"])])
    assert np.abs(actual - expected).max() <= 1e-5
    with pytest.raises(Exception, match="no column 'text' in this batch"):
        dataset.map_batches(EmbedBatch, fn_constructor_kwargs={"model": str(minilm_dir)},
                            compute=ray.data.ActorPoolStrategy(size=1)).take_all()  # fmt: skip


def test_every_option_is_checked_once_in_the_constructor(minilm_dir):
    """Options are refused when the actor starts, not batch after batch: a prompt this model lacks,
    both prompt spellings, a column that is not a name, an output column that would replace the
    texts; num_threads is checked before torch's thread count (the whole process's) is touched, and
    an option the model refuses leaves it as it was. No Ray cluster: the class is called directly."""
    import pandas as pd
    import torch

    from minibert.ray import EmbedBatch

    model = str(minilm_dir)
    with pytest.raises(ValueError, match="prompt_name 'passage' is not one of this model's prompts"):
        EmbedBatch(model, prompt_name="passage")
    with pytest.raises(ValueError, match="pass prompt or prompt_name, not both"):
        EmbedBatch(model, prompt="q: ", prompt_name="query")
    with pytest.raises(TypeError, match="EmbedBatch: text_column must be a column name .* got 5"):
        EmbedBatch(model, text_column=5)
    with pytest.raises(ValueError, match="output_column and text_column are both 'text'"):
        EmbedBatch(model, output_column="text")
    threads = torch.get_num_threads()
    for bad in (0, -3, 1.5, True):
        with pytest.raises(ValueError, match=f"EmbedBatch: num_threads must be a positive int, got {bad!r}"):
            EmbedBatch(model, num_threads=bad)
    with pytest.raises(ValueError, match="layer 9 does not exist"):
        EmbedBatch(model, num_threads=threads + 1, layers=9)
    assert torch.get_num_threads() == threads
    embed = EmbedBatch(model)
    assert embed(pd.DataFrame({"text": ["a"]}))["embedding"][0].shape == (384,)


def test_an_output_column_already_in_the_batch_is_refused_in_every_format(minilm_dir):
    """pandas and numpy replaced an existing 'embedding' column, pyarrow added a second one of the
    same name: every format now refuses it, naming the column, before embedding."""
    import pandas as pd
    import pyarrow as pa

    from minibert.ray import EmbedBatch

    embed = EmbedBatch(str(minilm_dir))
    batches = [  # pandas, pyarrow, numpy
        pd.DataFrame({"text": ["a"], "embedding": [1]}),
        pa.table({"text": ["a"], "embedding": [1]}),
        {"text": np.array(["a"]), "embedding": np.array([1])},
    ]
    for batch in batches:
        with pytest.raises(ValueError, match="this batch already has a column 'embedding'; set output_column="):
            embed(batch)


def test_a_bad_row_is_named_by_its_place_in_the_batch_and_its_other_columns(minilm_dir):
    """Ray Data numbers a batch's rows from 0, so "row 5" alone named a row of the batch as if it
    were the dataset's (row 37 was bad, row 5 was fine), and a missing text was "NAType" or
    "float" (pandas stores None as NaN). The row's other columns (an id) tell which it is; a batch
    of the text alone gives the texts around it."""
    import pandas as pd
    import pyarrow as pa

    from minibert.ray import EmbedBatch

    embed = EmbedBatch(str(minilm_dir))
    texts, ids = ["text 34", "text 35", None, "text 37"], [34, 35, 36, 37]
    batches = {
        "pandas": pd.DataFrame({"text": texts, "id": ids}, index=[9, 8, 7, 6]),
        "pandas NA": pd.DataFrame({"text": pd.array(texts, dtype="string"), "id": ids}),
        "pyarrow": pa.table({"text": texts, "id": ids}),
        "numpy": {"text": np.array(texts, dtype=object), "id": np.array(ids)},
    }  # fmt: skip
    for label, batch in batches.items():
        with pytest.raises(TypeError) as caught:
            embed(batch)
        assert str(caught.value) == ("EmbedBatch: column 'text' row 2 of this batch of 4 is missing (None/NaN), not "
                                     "text; its other columns: {'id': 36}"), label  # fmt: skip
    with pytest.raises(TypeError, match=r"row 1 of this batch of 3 is float 5\.0, not text; the batch has no other "
                                        r"column: the rows before and after it are 'a' and 'c'$"):  # fmt: skip
        embed(pd.DataFrame({"text": ["a", 5.0, "c"]}))


@pytest.mark.slow
def test_a_refused_option_reaches_the_driver_as_minibert_raised_it(cluster, minilm_dir):
    """TaskArgumentError (a prompt_name, a max_length or a layer the model lacks) could not be
    pickled, and Ray raised its own UnserializableException ("Failed to deserialize exception") in
    its place. A Ray task now raises the TaskArgumentError, a ValueError, with its data; Ray Data
    reports an actor refused at its start as Ray's ActorDiedError, whose message ends with the
    error's own line. One task and one actor, on two rows."""
    from minibert.errors import TaskArgumentError
    from minibert.ray import EmbedBatch

    model = str(minilm_dir)

    @ray.remote
    def start(**options) -> None:
        EmbedBatch(model, **options)

    with pytest.raises(TaskArgumentError, match="max_length must be an int from 3 to max_position_embeddings=512, "
                                                "got 100000") as caught:  # fmt: skip
        ray.get(start.remote(max_length=100000))
    assert isinstance(caught.value, ValueError) and caught.value.parameter == "max_length"
    dataset = ray.data.from_items([{"text": "a"}, {"text": "b"}])
    with pytest.raises(ray.exceptions.RayError) as caught:
        dataset.map_batches(EmbedBatch, fn_constructor_kwargs={"model": model, "prompt_name": "nope"},
                            compute=ray.data.ActorPoolStrategy(size=1)).take_all()  # fmt: skip
    last = str(caught.value).strip().splitlines()[-1]
    assert last == ("minibert.errors.TaskArgumentError: prompt_name 'nope' is not one of this model's prompts "
                    "('query', 'document')")  # fmt: skip


def _embedding_actor_pids() -> list[int]:
    """Processes of EmbedBatch actors: Ray titles them 'ray::MapWorker(MapBatches(EmbedBatch))'."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if command.startswith("ray::") and "EmbedBatch" in command:
                pids.append(int(entry.name))
    return pids


@pytest.mark.slow
def test_an_actor_killed_mid_job_is_replaced_and_no_row_is_lost(cluster, minilm_dir, rows, expected):
    """Two actors; one is killed when the first 16 rows reach this process. 3 × the rows (360 rows
    in 24 blocks, 24 calls of 14 or 16 rows for the two) leave nearly all of the job to do then,
    the killed actor's calls in flight among it: Ray restarts the actor and runs them again, and
    every row must still arrive exactly once."""
    from minibert.ray import EmbedBatch

    many = rows * 3  # 3 × the rows, ids made unique below: a job long enough to kill an actor in
    many = [{**row, "id": index} for index, row in enumerate(many)]
    dataset = ray.data.from_items(many, override_num_blocks=24).map_batches(
        EmbedBatch,
        fn_constructor_kwargs={"model": str(minilm_dir)},
        compute=ray.data.ActorPoolStrategy(size=2),
        batch_size=16,
    )
    output, killed = [], None
    for batch in dataset.iter_batches(batch_size=16, batch_format="pandas"):
        output.extend(batch.to_dict("records"))
        if killed is None:
            pids = _embedding_actor_pids()
            assert pids, "no EmbedBatch actor found"
            killed = pids[0]
            os.kill(killed, signal.SIGKILL)
    assert killed is not None and killed not in _embedding_actor_pids()
    assert len(output) < 2 * len(many)
    _check(output, many, np.concatenate([expected] * 3), "actor killed mid-job")


def test_import_minibert_never_imports_ray():
    code = "import minibert, minibert.embedding.embedder, minibert.apps.cli, sys; print('ray' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr


@pytest.mark.slow
def test_corpus_script_scaling_names_the_cpu(minilm_dir):
    """docs/embedder.md quotes ``embed_corpus_ray.py --scaling``: the CPU is printed before its figures."""
    from minibert.speed.cpu import cpu_name

    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "embed_corpus_ray.py")
    result = subprocess.run([sys.executable, script, "--scaling", "--scaling-texts", "40", "--model", str(minilm_dir)],
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith(cpu_name()) and len(lines) == 7, result.stdout


@pytest.mark.slow
def test_corpus_script_reads_embeds_and_writes_parquet(minilm_dir, tmp_path):
    import pyarrow.parquet as pq

    texts = [" ".join(text.split()) for text in corpus.all_texts()[:120]]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("\n".join(texts[:60]) + "\n", encoding="utf-8")
    lines = [json.dumps({"text": text}) for text in ["plain one", "plain two"]]
    (tmp_path / "in" / "b.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    import pyarrow as pa

    pq.write_table(pa.table({"text": ["from parquet", "also parquet"], "n": [1, 2]}), tmp_path / "in" / "c.parquet")
    started = time.perf_counter()
    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "embed_corpus_ray.py")
    result = subprocess.run(
        [sys.executable, script, str(tmp_path / "in"), str(tmp_path / "out"), "--model", str(minilm_dir),
         "--num-cpus", "2"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    # The default actor count leaves a core for reading and writing (actors on every core made this
    # wait forever), and Ray's INFO lines stay out of the user's terminal.
    assert result.returncode == 0, result.stderr[-2000:]
    assert "with 1 actor(s)" in result.stdout
    assert not [line for line in result.stderr.splitlines() if " INFO " in line], result.stderr[-2000:]
    assert "Progress bars disabled" not in result.stderr
    table = pq.read_table(tmp_path / "out")
    assert table.num_rows == 64 and "embedding" in table.column_names
    got = dict(zip(table.column("text").to_pylist(), table.column("embedding").to_pylist()))
    expected = Embedder.from_pretrained(minilm_dir).embed(["plain one", texts[0], "from parquet"])
    for text, vector in zip(["plain one", texts[0], "from parquet"], expected):
        assert np.abs(np.asarray(got[text]) - vector).max() <= 1e-5, text
    assert "embed_corpus_ray: note: the inputs mix .txt, .jsonl, .parquet files: their rows keep the text column " \
        "alone" in result.stderr  # fmt: skip
    assert [path.name for path in tmp_path.iterdir()] == ["in", "out"] or sorted(p.name for p in tmp_path.iterdir()) \
        == ["in", "out"]  # written beside and renamed into place: no partial folder left  # fmt: skip
    print(f"\nscript: {table.num_rows} rows in {time.perf_counter() - started:.1f} s")


@pytest.mark.parametrize(
    "arguments, said",
    [(["{tmp}/in", "{tmp}/full"], "the output directory {tmp}/full is not empty: give a new or empty one"),
     (["{tmp}/in", "{tmp}/in/a.txt"], "the output {tmp}/in/a.txt exists and is not a directory"),
     (["{tmp}/nowhere", "{tmp}/out"], "no such file or directory: {tmp}/nowhere"),
     (["{tmp}/full", "{tmp}/out"], "no .txt, .jsonl, .parquet files in {tmp}/full"),
     (["{tmp}/in", "{tmp}/out", "--actors", "0"], "argument --actors: must be a whole number of at least 1, got 0"),
     (["{tmp}/in", "{tmp}/out", "--batch-size", "-4"], "argument --batch-size: must be a whole number of at least"),
     (["{tmp}/in", "{tmp}/out", "--pooling", "bogus"], "pooling must be one of"),
     (["{tmp}/in", "{tmp}/out", "--model", "{tmp}/nowhere"], "--model {tmp}/nowhere: no such directory"),
     (["{tmp}/in", "{tmp}/out", "--num-cpus", "2", "--threads", "2"],
      "1 actor(s) of --threads 2 hold 2 of this Ray's 2 cores, leaving none for reading and writing")],
)  # fmt: skip
def test_corpus_script_refuses_in_one_line_before_ray_starts(minilm_dir, tmp_path, arguments, said):
    """The script added its Parquet files to a folder that held another job's (read back as one
    table with them), wrote over a file named as the output, took --actors 0 (Ray's own error, deep
    inside) and wrote its files in place (a stopped job left half an output). Each bad start is now
    one line before Ray starts, and the output is written beside and renamed into place. A bad
    --model or --pooling was ~145 lines of an actor's traceback; --threads holding every core of the
    Ray (checked once it started) waited forever."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("one\n", encoding="utf-8")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "part-0.bin").write_bytes(b"another job's")
    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "embed_corpus_ray.py")
    argv = [word.replace("{tmp}", str(tmp_path)) for word in arguments]
    model = [] if "--model" in argv else ["--model", str(minilm_dir)]
    result = subprocess.run([sys.executable, script, *argv, *model], capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    usage = arguments[-2] in ("--actors", "--batch-size")  # a flag's value: argparse's usage, then its line, exit 2
    assert result.returncode == (2 if usage else 1), result.stderr
    lines = result.stderr.strip().splitlines()
    ours = [line for line in lines if not line.lstrip()[:4].isdigit()]  # (Ray's own dated log lines left out)
    assert said.replace("{tmp}", str(tmp_path)) in lines[-1] and (usage or len(ours) == 1), result.stderr
    assert (tmp_path / "full" / "part-0.bin").read_bytes() == b"another job's" and not (tmp_path / "out").exists()
