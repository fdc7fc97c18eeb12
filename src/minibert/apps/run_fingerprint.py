"""What a resumable ``embed`` run is: everything that decides the bytes it writes (resumable.py).

A run killed and started again continues only if every chunk it adds is the chunk the first run
would have written: the same texts, through the same model, computed the same way. So the state
file records, and a resume compares:

* **input**: the input file's SHA-256 and its count of texts (its content, wherever it is);
* **model**: what was *loaded*, not how it was named. The folder, resolved (``./m``, ``/abs/m``
  and ``m/`` are one folder), or for a hub model its repository and the snapshot's commit; then one
  SHA-256 over every file the load read (loading/files_read.py): config.json, the tokenizer's
  files, the sentence-transformers recipe (modules.json, 1_Pooling/config.json, a Dense layer's
  config and weights, sentence_bert_config.json, config_sentence_transformers.json and its
  prompts), each hashed; a weights file over ``HASHED_BYTES`` is named by its hub blob (whose name
  is its content's hash) or, in a local folder, by its size and modification time, since hashing
  gigabytes at every start would cost more than the check is worth;
* **dtype**: the dtype the weights were given (``--dtype fastest`` is bfloat16 on one machine and
  float32 on another; ``auto`` is what config.json says), not the flag;
* **thread count**: torch's intra-op threads: MKL and oneDNN split a reduction by them (1e-7),
  and the streams (embedding/streams.py) share the batches out by them;
* **options**: every embedding option and ``--commit-every`` (the chunks: batching rounds too);
* **output format**, **GEMM library** (the library actually chosen: mkl and onednn round
  differently), **device** (with the CPU's name and the kernels torch chose for it: AVX2 and
  AVX-512 reduce in other orders; or the GPU's name), **torch version**, **minibert version** (an
  upgrade between the kill and the resume may compute other numbers: a pooling fix, say).

A difference in any of them is refused, never mixed in: resumable.py names each part that changed
with its old and new value, and each option that changed (the options are one JSON object).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..formats import line_files
from ..loading.devices import describe
from ..loading.hub_failures import blob_of, cached_file
from .resumable import file_digest

HASHED_BYTES = 64 << 20  # files up to this size are hashed whole (0.1 s); a larger one by its identity


def run_fingerprint(args, output: Path, embedder, files_read: dict[str, Path], options, dim: int, count: int) -> dict:
    """The fingerprint a resumable run's state records (see the module's docstring)."""
    import torch

    from .. import __version__

    model = embedder.model
    return {
        "input": f"sha256:{file_digest(Path(args.input))} ({count} texts)",
        "model": model_identity(model.name_or_path, files_read),
        "dtype": str(model.dtype).removeprefix("torch."),
        "thread count": torch.get_num_threads(),
        "options": {**options.as_dict(), "commit_every": args.commit_every},
        "output format": f"{line_files.name_suffix(output)}, dimension {dim}",
        "GEMM library": gemm_library(model),
        "device": device_identity(model.device),
        "torch version": torch.__version__,
        "minibert version": __version__,
    }


def model_identity(name_or_path, files_read: dict[str, Path]) -> str:
    """'FOLDER; N files sha256:...' or 'REPO at commit C; N files sha256:...': where the model was
    read from, and one digest of every file it read (their names too: a recipe file added is a change).

    >>> model_identity("m", {})
    'm (no file recorded); 0 files sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
    """
    lines = "".join(f"{name}\t{file_identity(path)}\n" for name, path in sorted(files_read.items()))
    digest = hashlib.sha256(lines.encode("utf-8")).hexdigest()
    return f"{_location(name_or_path, files_read)}; {len(files_read)} files sha256:{digest}"


def _location(name_or_path, files_read: dict[str, Path]) -> str:
    """The resolved folder the files lie in, or the hub repository and commit of their snapshot."""
    places = set()
    for name, path in files_read.items():
        cached = cached_file(Path(path))
        if cached is not None:
            places.add(f"{cached.repo_id} at commit {cached.commit}")
        else:  # the folder the name was asked in: path less the name's parts ("1_Pooling/config.json": two)
            folder = Path(path).parents[len(Path(name).parts) - 1]
            places.add(os.path.realpath(folder))
    return " + ".join(sorted(places)) if places else f"{os.fspath(name_or_path)} (no file recorded)"


def file_identity(path: Path) -> str:
    """A file's content: its SHA-256 up to ``HASHED_BYTES``; beyond, a hub blob's name (the cache names
    a weights blob by its SHA-256) or a local file's size and modification time."""
    size = os.stat(path).st_size
    if size <= HASHED_BYTES:
        return f"sha256:{file_digest(Path(path))}"
    blob = blob_of(Path(path))
    if blob is not None:
        return f"blob {blob} ({size} bytes)"
    return f"{size} bytes, modified {os.stat(path).st_mtime_ns}"


def gemm_library(model) -> str:
    """The library ``model``'s linear layers were given (speed/gemm.py's choice, not the flag asked)."""
    library = getattr(model, "gemm_backend", None) or "mkl"
    return f"int8 ({model.int8_library})" if library == "int8" else library


def device_identity(device) -> str:
    """'cpu: AMD EPYC 7B13 (family 25, model 1), AVX2 kernels' or 'cuda:0 (NVIDIA H200)': the device and
    what it is, since the same device name on another machine rounds differently. A GPU is named as
    the commands name it (loading/devices.py ``describe``); a CPU adds its model and kernels."""
    import torch

    if device.type == "cpu":
        from ..speed.cpu import cpu_name

        return f"{describe(device)}: {cpu_name()}, {torch.backends.cpu.get_cpu_capability()} kernels"
    return describe(device)
