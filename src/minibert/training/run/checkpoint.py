"""The run directory: a hub-layout checkpoint at every save, the training state beside it, the metrics.

    RUN/
      config.json  model.safetensors          BertForPreTraining, transformers' tensor names: loadable by
      vocab.txt  tokenizer_config.json ...    transformers, minibert, fill_mask and `minibert serve` as it is
      training_state.pt                       what --resume needs (below), with a SHA-256 of itself
      metrics.jsonl                           one JSON line per step (step 1-based, losses, accuracies, rate)
      loss.png                                the loss curve (written at the end when matplotlib is installed)

The training state holds everything a step depends on, so that a resumed run computes the same
numbers, bit for bit, as one that was never stopped: the weights (fp32, as trained), AdamWeightDecay's
moments m and v, the number of updates done, the data position, each process's random-number state
(dropout), and the settings, the config and the fingerprints of the training data and the dev set it
was made with (a resume with other settings, another config, other data or another dev set is
refused, naming what differs: a resumed run never mixes two runs).

Every file is replaced atomically (written beside, then renamed), the training state last. A process
killed at any moment therefore leaves a resumable run: the state file is the previous checkpoint's or
this one's, never half of one; metrics lines past the state's step are dropped on resume.
"""

from __future__ import annotations

import contextlib
import dataclasses
import filecmp
import hashlib
import io
import json
import os
import signal
import threading
from dataclasses import MISSING, dataclass, field
from pathlib import Path

import torch

from ...errors import DataError, TrainingStateError
from ...formats.atomic_files import atomic_output, naming_the_file, write_atomically
from ..options import flag_of
from .lock import LOCK_FILE
from .paths import PATH_SETTINGS, real_path, same_path, shown
from .precision import FP16_RESUMES

# The settings a resumed run shares that are no flag of their own: the processes (torchrun's), and a
# fine-tuning run's steps (from --epochs and the data; pre-training's --steps is said as it is).
NOT_FLAGS = ("processes", "steps")

STATE_FILE = "training_state.pt"
METRICS_FILE = "metrics.jsonl"
FORMAT = 1
DIGEST_BYTES = 32  # the SHA-256 of the rest of training_state.pt, at its end
MODEL_FILES = ("config.json", "model.safetensors")  # without a training state: a model, not a run


@dataclass
class TrainingState:
    """What --resume restores. ``moments``: {hub name: (m, v)}; ``rng``: one CPU generator state per
    process; ``device_rng``: one GPU generator state per process (a run on GPUs; else empty);
    ``loss_scale``: fp16's LossScaler state (precision.py; else None)."""

    step: int  # updates done
    data_position: int  # the first instance of the next global batch
    settings: dict  # the command's numbers (steps, batch size, rates, seed, ...) and the process count
    config: dict  # the model's config.json
    data_fingerprint: str  # Instances.fingerprint()
    weights: dict[str, torch.Tensor]  # the model's state_dict
    moments: dict[str, tuple[torch.Tensor, torch.Tensor]]
    rng: list[torch.Tensor]
    # How the steps were computed (arithmetic.py): torch's thread count and the linear layers' GEMM
    # backend. Not checked like the settings: a resume computed otherwise is allowed, and said.
    arithmetic: dict = field(default_factory=dict)
    device_rng: list = field(default_factory=list)
    loss_scale: dict | None = None
    # A finished run keeps its state without weights, moments or random states (``finished_state``):
    # what it was made with and where it ended, so --resume reads it as finished; its weights are
    # model.safetensors beside it.
    finished: bool = False
    # The dev set's {"fingerprint": SHA-256 of its features, "examples": its count} (Task.dev_fingerprint):
    # its figures and best/ were measured on it. None: no --dev, or a state written before dev sets
    # were fingerprinted (a resume of such a run cannot check its dev file).
    dev_data: dict | None = None
    # The SHA-256 of the tokenizer saved with every checkpoint (vocabulary_fingerprint): the weights
    # learned its ids. None: a state written before it was recorded (not checked).
    vocabulary: str | None = None
    # {path setting: the real path it named when the run started} (paths.py real_paths): a resume
    # from another directory gives the same files. Empty: none named a file, or a state written
    # before they were kept (its typed paths are read from the directory the resume runs in).
    paths: dict = field(default_factory=dict)

    def finished_state(self) -> TrainingState:
        """This state as a finished run keeps it: kilobytes instead of three times the model."""
        return dataclasses.replace(self, weights={}, moments={}, rng=[], device_rng=[], loss_scale=None,
                                   finished=True)  # fmt: skip

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        torch.save({"format": FORMAT, **self.__dict__}, buffer)
        payload = buffer.getvalue()
        return payload + hashlib.sha256(payload).digest()

    @classmethod
    def from_file(cls, path: Path) -> TrainingState:
        """Read and check the file's integrity (truncation, any changed byte) and its structure."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise TrainingStateError(f"nothing to resume: {path} does not exist (start without --resume)") from None
        payload, digest = data[:-DIGEST_BYTES], data[-DIGEST_BYTES:]
        if len(data) <= DIGEST_BYTES or hashlib.sha256(payload).digest() != digest:
            raise TrainingStateError(f"training state {path} is truncated or was altered (its SHA-256 does not match)")
        try:
            # read onto the CPU whatever device wrote it: a run from a GPU resumes on a CPU too
            values = torch.load(io.BytesIO(payload), weights_only=True, map_location="cpu")
        except Exception as error:  # written by another program with a matching digest: still one line
            raise TrainingStateError(f"training state {path} cannot be read: {error}") from None
        if not isinstance(values, dict) or values.get("format") != FORMAT:
            raise TrainingStateError(f"training state {path}: not a minibert training state of format {FORMAT}")
        # (a field with a default was added after FORMAT 1's first states: absent, it takes the default)
        fields = [name for name, spec in cls.__dataclass_fields__.items()
                  if name not in values and spec.default is MISSING and spec.default_factory is MISSING]  # fmt: skip
        if fields:
            raise TrainingStateError(f"training state {path}: missing {', '.join(fields)}")
        return cls(**{name: values[name] for name in cls.__dataclass_fields__ if name in values})


def vocabulary_fingerprint(tokenizer) -> str:
    """The SHA-256 of what a run's tokenizer makes of text: its pieces in id order, its added tokens
    and its casing (--vocab and --cased, or the model's files). A resume with another would save
    the other beside weights trained on the first's ids, silently."""
    basic = tokenizer.basic
    described = [sorted(tokenizer.vocab.items(), key=lambda item: item[1]), basic.do_lower_case, basic.strip_accents,
                 basic.tokenize_chinese_chars, sorted((index, str(token)) for index, token in
                                                      tokenizer.added_tokens_decoder.items())]  # fmt: skip
    return hashlib.sha256(json.dumps(described).encode("utf-8")).hexdigest()


def check_state(state: TrainingState, path: Path, *, settings: dict, config: dict, fingerprint: str,
                dev: dict | None, vocabulary: str, model, instances: int, hub_names: list[str]) -> None:  # fmt: skip
    """Refuse a state that does not belong to this command, naming the first thing that differs
    (``fingerprint``: the training data's; ``dev``: the dev set's, as TrainingState.dev_data;
    ``vocabulary``: the tokenizer's, vocabulary_fingerprint)."""
    where = f"training state {path}"
    made_by, this = (("finetune" if "task" in given else "pretrain") for given in (state.settings, settings))
    if made_by != this:  # (a fine-tuning run's settings name its task; pre-training's do not)
        raise TrainingStateError(f"{where}: the run was made by minibert {made_by}, not {this}: continue it with "
                                 f"minibert {made_by} ... --resume, or give {this} a new --output")  # fmt: skip
    recorded = state.paths if isinstance(state.paths, dict) else {}  # (paths.py: where the run's files were)
    for name, value in settings.items():
        saved = state.settings.get(name)
        a_path = name in PATH_SETTINGS and isinstance(saved, str) and isinstance(value, str)  # compared as files
        if same_path(saved, recorded.get(name), value) if a_path else saved == value:
            continue
        advice = "resume with the run's settings"
        if name == "precision" and saved == "fp16" and next(model.parameters()).device.type != "cuda":
            advice = FP16_RESUMES  # (not --precision fp16 here: that is refused on a CPU)
        then, now = (shown(saved, recorded.get(name)), shown(value, real_path(value))) if a_path else \
            (repr(saved), repr(value))  # fmt: skip
        flag = f" ({flag_of(name)})" if name not in NOT_FLAGS else ""  # (the options' fields are flags)
        raise TrainingStateError(f"{where}: the run was made with {name}{flag} = {then}, this command gives {now}; "
                                 f"{advice}")  # fmt: skip
    if state.config != config:
        differ = sorted(k for k in set(state.config) | set(config) if state.config.get(k) != config.get(k))
        raise TrainingStateError(f"{where}: the run's model config differs in {', '.join(differ)}")
    if state.data_fingerprint != fingerprint:
        data = f"--train {settings['train']}" if "train" in settings else "--data"
        raise TrainingStateError(f"{where}: the run was trained on other data: {data} is not what it was (the "
                                 "SHA-256 of its instances differs); resume with the run's data")  # fmt: skip
    _check_dev(where, state.dev_data, dev, settings.get("dev"))
    if state.vocabulary is not None and state.vocabulary != vocabulary:  # (None: a state from before it was kept)
        given = (f"--model {settings['model']}" if "model" in settings else
                 f"--init {settings['init']}" if settings.get("init") else "--vocab and --cased")  # fmt: skip
        raise TrainingStateError(f"{where}: the tokenizer this command gives ({given}) is not the run's: other "
                                 "pieces, ids or casing than its weights were trained on; resume with the run's "
                                 "vocabulary")  # fmt: skip
    steps, batch = settings["steps"], settings["batch_size"]
    if not isinstance(state.step, int) or not 0 <= state.step <= steps:
        raise TrainingStateError(f"{where}: step {state.step!r} is outside 0 … --steps {steps}")
    position = state.step * batch % instances
    if state.data_position != position:
        raise TrainingStateError(f"{where}: data position {state.data_position!r} does not follow from step "
                                 f"{state.step} (expected {position} of {instances} instances)")  # fmt: skip
    if state.finished:
        if state.step != steps:
            raise TrainingStateError(f"{where}: a finished run's state at step {state.step!r}, not its last, {steps}")
        return  # its weights are model.safetensors; nothing is left to restore
    expected = model.state_dict()
    _check_tensors(where, "weights", state.weights, {k: v.shape for k, v in expected.items()})
    shapes = dict(zip(hub_names, (p.shape for p in model.parameters())))
    if state.step > 0:
        if not isinstance(state.moments, dict) or set(state.moments) != set(shapes):
            raise TrainingStateError(f"{where}: the optimizer moments do not name the model's parameters")
        for name, pair in state.moments.items():
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TrainingStateError(f"{where}: the optimizer moments of {name} are not a pair (m, v)")
            _check_tensors(
                where, f"optimizer moments of {name}", dict(zip("mv", pair)), dict.fromkeys("mv", shapes[name])
            )
    size = settings["processes"]
    generator_bytes = torch.get_rng_state().numel()
    if not isinstance(state.rng, list) or len(state.rng) != size:
        raise TrainingStateError(f"{where}: the random-number states are missing (expected one per process, {size})")
    for index, rng in enumerate(state.rng):
        if not isinstance(rng, torch.Tensor) or rng.dtype != torch.uint8 or rng.numel() != generator_bytes:
            raise TrainingStateError(f"{where}: random-number state {index} is not a CPU generator state")


def _check_dev(where: str, saved: dict | None, given: dict | None, path: str | None) -> None:
    """The dev set the run was evaluated on is the one given: its figures in metrics.jsonl and best/
    were measured on it, and the figures after the resume are compared with them."""
    if saved is None or given is None or saved.get("fingerprint") == given["fingerprint"]:
        return  # (no --dev: the settings compared that; an older state: no fingerprint to compare)
    then, now = saved.get("examples"), given["examples"]
    how = (f"it now makes {now} examples, the run's made {then}" if then != now else
           f"it makes as many examples as the run's, {now}, with other texts or labels")  # fmt: skip
    raise TrainingStateError(f"{where}: --dev {path} is not the dev set the run was evaluated on: {how} (the "
                             "SHA-256 of its features differs); resume with the run's dev file, or give a new "
                             "--output: the dev figures and best/ of two dev sets cannot be compared")  # fmt: skip


def _check_tensors(where: str, what: str, found, shapes: dict) -> None:
    if not isinstance(found, dict) or set(found) != set(shapes):
        extra = sorted(set(found) - set(shapes)) if isinstance(found, dict) else []
        missing = sorted(set(shapes) - set(found)) if isinstance(found, dict) else sorted(shapes)
        raise TrainingStateError(f"{where}: the {what} do not match the model (missing {missing[:3]}, "
                                 f"unexpected {extra[:3]})")  # fmt: skip
    for name, shape in shapes.items():
        tensor = found[name]
        if not isinstance(tensor, torch.Tensor) or tensor.shape != shape or tensor.dtype != torch.float32:
            got = f"{tuple(tensor.shape)} {tensor.dtype}" if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise TrainingStateError(f"{where}: {what}: {name} is {got}, expected {tuple(shape)} torch.float32")
        if not bool(torch.isfinite(tensor).all()):
            raise TrainingStateError(f"{where}: {what}: {name} holds NaN or infinite values")


def _a_runs_own_leftover(name: str) -> bool:
    """A killed run's lock file, or the temporary of a write it did not finish (``.NAME.xxxx.partial``:
    a kill while the first training state was written leaves one, and no run)."""
    return name == LOCK_FILE or (name.startswith(".") and name.endswith(".partial"))


class RunDirectory:
    """The output folder of ``minibert pretrain``: refuses to overwrite a run, writes checkpoints."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.state_path = self.path / STATE_FILE
        self.metrics_path = self.path / METRICS_FILE
        self.saved_step: int | None = None  # the step of the training state on disk, once known

    def holds_run(self) -> bool:
        """A run is its training state: written before anything else (a folder without it holds no
        run yet) and kept when the run ends. A model folder (config.json, model.safetensors) is not one."""
        return self.state_path.exists()

    def check_new(self) -> None:
        """A new run's folder: ``check_place``, and no run in it (checked under the lock: a run
        being written by another process is refused by the lock, naming that process)."""
        self.check_place()
        if self.holds_run():
            raise DataError(f"--output {self.path} already holds a run: pass --resume to continue it, or choose "
                            "another folder (nothing was overwritten)")  # fmt: skip

    def check_place(self) -> None:
        """A new run's folder is new or empty (or holds a run, which check_new refuses), and is
        itself, not a link to somewhere else: a run writes every file of its own inside its folder,
        and nothing of anyone else's is in there. Checked before the lock too: a refused folder is
        left as it was, without even a lock file."""
        if self.path.is_symlink():
            raise DataError(f"--output {self.path} is a symbolic link (to {os.readlink(self.path)}): a run writes into "
                            "a folder of its own; give the folder itself, new or empty")  # fmt: skip
        if self.path.exists() and not self.path.is_dir():
            raise DataError(f"--output {self.path} exists and is not a directory")
        if self.path.is_dir() and not self.holds_run():
            held = self._what_is_there()
            if held:
                raise DataError(f"--output {self.path} {held}: a run needs a new or empty folder of its own; choose "
                                "another (nothing was written)")  # fmt: skip

    def check_resumable(self) -> None:
        """``--resume``: a run is there to continue (its training state). A folder without one is
        named for what it holds (a model is not a run), so that the advice is what to do instead."""
        if self.holds_run():
            return
        held = self._what_is_there() if self.path.is_dir() else ""
        if not held:
            raise TrainingStateError(f"nothing to resume: {self.state_path} does not exist (start without --resume)")
        raise TrainingStateError(f"nothing to resume: --output {self.path} {held}: give a new or empty folder, "
                                 "without --resume")  # fmt: skip

    def _what_is_there(self) -> str:
        """What a folder without a training state holds, in words ("" when nothing but a killed
        run's leftovers): a model (config.json, model.safetensors), or other files."""
        others = sorted(entry.name for entry in self.path.iterdir() if not _a_runs_own_leftover(entry.name))
        if not others:
            return ""
        others.sort(key=lambda name: name not in MODEL_FILES)  # a model's own files named first
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        if any(name in others for name in MODEL_FILES):
            return f"holds a model ({shown}), not a run (it has no {STATE_FILE})"
        if METRICS_FILE in others:
            return f"holds a run's files ({shown}) but no {STATE_FILE}, so no run that can be continued"
        return f"is not empty ({shown}) and holds no run"

    def save(self, model, state: TrainingState, hub_files: bool = True) -> None:
        """A checkpoint: the hub files first, the training state last (each replaced atomically).
        The state on disk and ``saved_step`` change together: a Ctrl-C or SIGTERM that lands while the
        state is written (its rename done, the folder's fsync not yet) is handled after, so the line
        that names the step on disk never names the one before."""
        if hub_files:
            model.save_pretrained(self.path)
        payload = state.to_bytes()
        with _stops_held():
            write_atomically(self.state_path, payload)
            self.saved_step = state.step

    def finish(self, last: TrainingState | None, keep_state: bool, best_weights: Path | None) -> None:
        """The folder of a run whose last step is saved, made no bigger than its use. ``best_weights``
        (best/model.safetensors, when the best dev figure is the last step's): the same bytes as the
        final weights, so it becomes a second name of that file (a hard link: no second copy on disk).
        ``last`` (the state just saved; None when it is already finished): unless ``keep_state``,
        replaced by its ``finished_state``. Each change is atomic: a kill leaves the folder before or
        after it, and a temporary that the next --resume removes."""
        final = self.path / "model.safetensors"
        if best_weights is not None and best_weights.exists() and not os.path.samefile(best_weights, final) \
                and filecmp.cmp(best_weights, final, shallow=False):  # fmt: skip
            temporary = self.path / f".best-model.{os.getpid()}.partial"
            try:
                os.link(final, temporary)
                os.replace(temporary, best_weights)
            except OSError:  # a file system without hard links keeps the copy
                temporary.unlink(missing_ok=True)
        if last is not None and not keep_state and not last.finished:
            write_atomically(self.state_path, last.finished_state().to_bytes())

    def remove_leftovers(self) -> list[str]:
        """Delete the temporary files of a write that a kill interrupted (``.NAME.xxxx.partial``:
        formats/atomic_files.py); the files they were to replace are whole. Returns their names."""
        leftovers = [entry for entry in self.path.iterdir()
                     if entry.name != LOCK_FILE and _a_runs_own_leftover(entry.name)]  # fmt: skip
        for entry in leftovers:
            entry.unlink(missing_ok=True)
        return [entry.name for entry in leftovers]

    def keep_metrics_up_to(self, step: int) -> None:
        """Drop metrics lines past ``step`` (written after the last checkpoint by a killed process)
        and a line cut short by the kill, so the file holds steps 1 … step once each. Copied line by
        line into the file that replaces it: a million steps' lines are never held at once."""
        if not self.metrics_path.exists():
            return
        with open(self.metrics_path, "rb") as lines, atomic_output(self.metrics_path) as kept:
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:  # (a line cut short, or bytes that are not UTF-8)
                    continue
                if isinstance(record, dict) and isinstance(record.get("step"), int) and record["step"] <= step:
                    kept.write(line.rstrip(b"\r\n") + b"\n")

    def append_metrics(self, record: dict) -> None:
        """One line per step. A NaN or infinite number is written as JSON's common extension
        (``NaN``, ``Infinity``, ``-Infinity``: Python's json, JavaScript's JSON5, pandas read it),
        which ``read_metrics`` and ``minibert plot`` read back."""
        with naming_the_file(self.metrics_path), open(self.metrics_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, allow_nan=True) + "\n")


@contextlib.contextmanager
def _stops_held():
    """SIGINT and SIGTERM noted during the block and raised again after it, to the handlers that
    were there (Python runs signal handlers in the main thread only: elsewhere, nothing to hold)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    held = [signum for signum in (signal.SIGINT, signal.SIGTERM)
            if signal.getsignal(signum) not in (None, signal.SIG_IGN)]  # (None: a handler set outside Python)
    previous = {signum: signal.signal(signum, lambda signum, frame: caught.append(signum)) for signum in held}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in caught:
            signal.raise_signal(signum)
