"""The CPU half of running minibert on a GPU: ``--device`` on every command that runs a model and
``device=`` on the Python entry points, checked before anything is read or written; what a
machine without CUDA says; training's ``--precision``; a training state written on a GPU read
on a CPU; fp16's loss scaler. (tests/test_gpu.py runs the other half where a GPU is.)

"Without CUDA" is made true on any machine by taking CUDA out of torch's version record, the
first thing devices.py asks: these tests run, and mean the same, on a GPU machine too.
"""

from __future__ import annotations

import io
import re
import shutil

import pytest
import torch

from helpers import run_minibert
from minibert import BertModel, DeviceError
from minibert.errors import DataError, FlagConflictError, QuantizationError
from minibert.loading.devices import as_torch_device, check_device_name, resolve_device
from minibert.training.options import FinetuneOptions, PretrainOptions
from minibert.training.run.checkpoint import TrainingState
from minibert.training.run.optimization import AdamWeightDecay, update
from minibert.training.run.precision import LossScaler
from random_instances import random_instances, write_instances

TINY = "tests/data/tiny_hub"


@pytest.fixture
def without_cuda(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # (so on a GPU machine too)


@pytest.fixture
def with_one_gpu(monkeypatch):
    """A CUDA build that sees one GPU (what devices.py asks; nothing runs on it)."""
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "NVIDIA Stand-In")


def test_device_names_are_checked_before_the_machine_is_asked():
    assert [check_device_name(name) for name in ("auto", "cpu", "cuda", "cuda:0", " cuda:12 ")] == [
        "auto", "cpu", "cuda", "cuda:0", "cuda:12"]  # fmt: skip
    for bad in ("gpu", "cuda:", "cuda:-1", "cuda:x", "CPU", "", "cuda 0"):
        with pytest.raises(ValueError, match="expected auto, cpu, cuda or cuda:N"):
            check_device_name(bad)
    with pytest.raises(ValueError, match="expected auto, cpu, cuda or cuda:N"):
        resolve_device("gpu")  # not torch's list of every backend it was built for
    assert resolve_device(None) is None and resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("meta")) == torch.device("meta")


def test_what_is_missing_is_named(without_cuda, monkeypatch):
    version = re.escape(torch.__version__)
    with pytest.raises(DeviceError, match=rf"device 'cuda': this torch \({version}\) is built without CUDA"):
        resolve_device("cuda")
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(DeviceError, match=r"\(CUDA 13.0\) sees no GPU: no NVIDIA driver, or CUDA_VISIBLE_DEVICES"):
        resolve_device(torch.device("cuda", 0))


def test_a_gpu_number_beyond_the_machines_is_named(with_one_gpu):
    with pytest.raises(DeviceError, match=r"device 'cuda:3': this machine has 1 GPU \(cuda:0\)"):
        resolve_device("cuda:3")


TORCH_READS = ["cuda:0", "cuda:7", "cuda:10", "cuda:127"]
TORCH_REFUSES = ["cuda:01", "cuda:00", "cuda:007", "cuda:\u0661", "cuda:\u0660", "cuda:+1", "cuda:1e0", "cuda:0x1",
                 "cuda: 1", "cuda::1", "cuda:1:2", "cuda:"]  # fmt: skip


def test_the_names_minibert_takes_are_the_names_torch_reads():
    """``cuda:01`` and ``cuda:\u0661`` (an Arabic-Indic one: a digit to Python's ``\\d``) passed the
    syntax check, then torch refused them and the error said "got str" (a TypeError): now minibert
    refuses exactly what torch refuses, saying the rule broken."""
    for name in TORCH_READS + TORCH_REFUSES:
        try:
            torch.device(name)
            torch_reads = True
        except RuntimeError:
            torch_reads = False
        try:
            check_device_name(name)
            minibert_takes = True
        except ValueError:
            minibert_takes = False
        assert minibert_takes == torch_reads, name
    with pytest.raises(ValueError, match=re.escape("from 0, without a leading zero: cuda:1)")):
        check_device_name("cuda:01")
    with pytest.raises(ValueError, match=re.escape("from 0, in the digits 0-9)")):
        check_device_name("cuda:\u0661")


@pytest.mark.parametrize("name", ["cuda:01", "cuda:00", "cuda:\u0661"])
def test_a_number_torch_does_not_read_is_a_usage_error_and_a_value_error(name, tmp_path):
    from minibert import BertForSequenceClassification, Embedder, classify

    result = run_minibert("embed", "a", "--model", TINY, "--output", str(tmp_path / "x.npy"), "--device", name)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert f"argument --device: device {name!r}: expected auto, cpu, cuda or cuda:N" in result.stderr
    said = re.escape(f"device {name!r}: expected auto, cpu, cuda or cuda:N")
    for load in (lambda: resolve_device(name),
                 lambda: BertForSequenceClassification.from_pretrained(TINY, device=name),
                 lambda: BertForSequenceClassification.from_pretrained(TINY, device_map=name),
                 lambda: Embedder.from_pretrained(TINY, device=name),
                 lambda: classify(["a text"], model=TINY, device=name)):  # fmt: skip
        with pytest.raises(ValueError, match=said):  # (not a TypeError saying "got str")
            load()
    with pytest.raises(DataError, match=re.escape(f"--device: device {name!r}: expected")):
        FinetuneOptions(model=TINY, train="train.csv", output=str(tmp_path / "run"), device=name)
    assert sorted(tmp_path.iterdir()) == []


@pytest.fixture
def without_other_accelerators(monkeypatch):
    """No XPU, no Apple GPU, no hpu backend (whatever this machine has; torch.accelerator: 2.6+)."""
    if hasattr(torch, "xpu"):
        monkeypatch.setattr(torch.xpu, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.delattr(torch, "hpu", raising=False)
    if hasattr(torch, "accelerator"):
        monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)


def _entry_points(tmp_path) -> dict:
    """Each Python entry point that loads a model, given a folder that does not exist: a device
    checked first is refused before the folder is looked for."""
    from minibert import AutoModel, BertForSequenceClassification, Embedder, classify, fill_mask
    from minibert.explorer.loading import load_for_exploring
    from minibert.tasks import CrossEncoder

    missing = str(tmp_path / "no such model")
    return {
        "from_pretrained": lambda device: BertForSequenceClassification.from_pretrained(missing, device=device),
        "device_map": lambda device: BertForSequenceClassification.from_pretrained(missing, device_map=device),
        "AutoModel": lambda device: AutoModel.from_pretrained(missing, device=device),
        "Embedder": lambda device: Embedder.from_pretrained(missing, device=device),
        "classify": lambda device: classify(["a text"], model=missing, device=device),
        "fill_mask": lambda device: fill_mask("a [MASK]", model=missing, device=device),
        "CrossEncoder": lambda device: CrossEncoder(missing, device=device),
        "explorer": lambda device: load_for_exploring(missing, device=device),
    }


@pytest.mark.parametrize("device, said", [
    ("xpu", "device 'xpu': this torch .* sees no XPU device"),
    ("xpu:1", "device 'xpu:1': this torch .* sees no XPU device"),
    ("mps", "device 'mps': this torch .* sees no MPS device"),
    ("hpu", r"device 'hpu': this torch .* sees no HPU device \(no backend for it is loaded: torch cannot make a "
            r"tensor there\)"),
])  # fmt: skip
def test_other_accelerators_are_checked_before_any_file_is_read(without_other_accelerators, tmp_path, device, said):
    """xpu, mps and hpu were passed to torch unchecked: the checkpoint was read, then torch's own
    AssertionError, RuntimeError or ModuleNotFoundError came from inside ``model.to()`` (and a
    missing folder was said before the device)."""
    for name, load in _entry_points(tmp_path).items():
        with pytest.raises(DeviceError, match=said):
            load(device)
        assert "--device" not in said, name


def test_an_accelerator_torch_has_is_taken_and_its_number_checked(monkeypatch):
    if not hasattr(torch, "xpu"):
        pytest.skip("this torch has no torch.xpu")
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    monkeypatch.setattr(torch.xpu, "device_count", lambda: 1)
    assert resolve_device("xpu") == torch.device("xpu") and resolve_device("xpu:0") == torch.device("xpu", 0)
    with pytest.raises(DeviceError, match=re.escape("device 'xpu:1': this machine has 1 XPU device (xpu:0)")):
        resolve_device("xpu:1")


def test_meta_builds_a_model_to_inspect_and_nothing_computes_there(tmp_path):
    """A model on meta holds shapes, no numbers: from_pretrained makes one; a task, the Embedder, a
    CrossEncoder or the explorer would fail at their first number (``Tensor.item() cannot be called
    on meta tensors``), so they refuse it before loading (a missing folder is not looked for)."""
    from minibert import BertTokenizer, Embedder, fill_mask
    from minibert.heads import BertForMaskedLM

    assert BertModel.from_pretrained(TINY, device="meta").device == torch.device("meta")
    for name, load in _entry_points(tmp_path).items():
        if name in ("from_pretrained", "device_map", "AutoModel"):
            continue
        with pytest.raises(DeviceError, match="device 'meta' holds a model's shapes, not its numbers: .* cannot run"):
            load("meta")
    on_meta = BertForMaskedLM.from_pretrained(TINY, device="meta")
    with pytest.raises(DeviceError, match="device 'meta' holds a model's shapes"):
        fill_mask("a [MASK] b", model=(on_meta, BertTokenizer.from_pretrained(TINY)))
    with pytest.raises(DeviceError, match="device 'meta' holds a model's shapes.*: the Embedder cannot run there"):
        Embedder(BertModel.from_pretrained(TINY, device="meta"), BertTokenizer.from_pretrained(TINY))  # (was
        # torch's "Tensor.item() cannot be called on meta tensors" at the first embed())


def test_python_is_told_device_cpu_and_the_command_line_the_flag(without_cuda, tmp_path, monkeypatch):
    """The advice at the end of a missing GPU's message was "use --device cpu" in Python too."""
    from minibert import Embedder, classify
    from minibert.training import finetune

    train = tmp_path / "train.csv"
    train.write_text("text,label\na b,x\nb a,y\n", encoding="utf-8")
    options = FinetuneOptions(model=TINY, train=str(train), output=str(tmp_path / "run"), device="cuda")
    for load in (lambda: BertModel.from_pretrained(TINY, device="cuda"),
                 lambda: Embedder.from_pretrained(TINY, device="cuda"),
                 lambda: classify(["a text"], model=TINY, device="cuda"),
                 lambda: finetune(options)):  # fmt: skip
        with pytest.raises(DeviceError, match=re.escape("or use device='cpu'")) as raised:
            load()
        assert "--device" not in str(raised.value)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(DeviceError, match=re.escape("hides them; use device='cpu'")):
        BertModel.from_pretrained(TINY, device="cuda")
    commands = _commands(tmp_path)
    for name in ("embed", "finetune", "pretrain"):
        result = run_minibert(*commands[name][0], "--device", "cuda")
        assert result.returncode == 1 and result.stderr.rstrip().endswith("; use --device cpu"), (name, result.stderr)
    assert not (tmp_path / "run").exists()


def test_from_pretrained_raises_minibert_own_error_before_reading(without_cuda, tmp_path):
    with pytest.raises(DeviceError, match="built without CUDA"):
        BertModel.from_pretrained(TINY, device="cuda")
    with pytest.raises(DeviceError, match="built without CUDA"):  # the device first: even a missing folder waits
        BertModel.from_pretrained(tmp_path / "nothing here", device="cuda:1")


def test_int8_elsewhere_than_the_cpu_is_refused_before_reading():
    with pytest.raises(QuantizationError, match="dtype='int8' runs on the CPU .* asked for meta"):
        BertModel.from_pretrained(TINY, device="meta", dtype="int8")


def test_a_loaded_model_is_never_moved_by_a_task(with_one_gpu):
    from minibert.heads import BertForMaskedLM
    from minibert.tasks import fill_mask

    model = BertForMaskedLM.from_pretrained(TINY)
    with pytest.raises(ValueError, match=r"device='cuda', but the model given is on cpu: move it first"):
        fill_mask("a [MASK] b", model=model, device="cuda")
    with pytest.raises(DeviceError, match=r"device 'meta' holds a model's shapes"):  # (moving it would not help)
        fill_mask("a [MASK] b", model=model, device="meta")
    assert model.device == torch.device("cpu")
    assert fill_mask("a [MASK] b", model=model, device="cpu")  # where it is: fine


def _commands(tmp_path) -> dict[str, tuple[list[str], object]]:
    """Each command that runs a model: its arguments (without --device) and what it would write."""
    train = tmp_path / "train.csv"
    train.write_text("text,label\na b,x\nb a,y\n", encoding="utf-8")
    data = write_instances(tmp_path / "data.tfrecord", random_instances(4, vocab_size=111, seq_len=16, seed=1))
    out = tmp_path / "out"
    return {
        "embed": (["embed", "a text", "--model", TINY, "--output", f"{out}.npy"], f"{out}.npy"),
        "similarity": (["similarity", "a", "b", "--model", TINY], None),
        "fill-mask": (["fill-mask", "a [MASK]", "--model", TINY], None),
        "next-sentence": (["next-sentence", "a", "b", "--model", TINY], None),
        "verify": (["verify", "--model", TINY], None),
        "classify": (["classify", "a", "--model", TINY, "--output", f"{out}.jsonl"], f"{out}.jsonl"),
        "tag": (["tag", "a", "--model", TINY, "--output", f"{out}.jsonl"], f"{out}.jsonl"),
        "answer": (["answer", "--question", "a", "--context", "b", "--model", TINY], None),
        "rerank": (["rerank", "a", "b", "c", "--model", TINY], None),
        "serve": (["serve", "--model", TINY, "--port", "0"], None),
        "explore": (["explore", "a [MASK]", "--model", TINY, "--output", f"{out}.html"], f"{out}.html"),
        "pretrain": (["pretrain", "--data", str(data), "--init", TINY, "--output", str(out), "--steps", "1",
                      "--batch-size", "2"], out),  # fmt: skip
        "finetune": (["finetune", "--model", TINY, "--train", str(train), "--output", str(out)], out),
    }


def test_every_command_says_in_one_line_that_cuda_is_missing_and_writes_nothing(without_cuda, tmp_path):
    for name, (arguments, output) in _commands(tmp_path).items():
        result = run_minibert(*arguments, "--device", "cuda")
        lines = result.stderr.splitlines()
        assert result.returncode == 1 and len(lines) == 1, (name, result.stderr)
        assert lines[0].startswith("minibert: error: device 'cuda': this torch") and "without CUDA" in lines[0], name
        assert lines[0].endswith("or use --device cpu"), name
        assert output is None or not (tmp_path / output).exists(), f"{name} wrote {output}"
        assert result.stdout == "", name


def test_a_bad_device_name_is_a_usage_error_on_every_command(tmp_path):
    for name, (arguments, _) in _commands(tmp_path).items():
        result = run_minibert(*arguments, "--device", "gpu0")
        assert result.returncode == 2, (name, result.stderr)
        assert "argument --device: device 'gpu0': expected auto, cpu, cuda or cuda:N" in result.stderr, name


def test_the_cpu_named_runs_as_before(tmp_path):
    result = run_minibert("embed", "a text", "--model", TINY, "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert "device" not in result.stderr  # only a GPU is named


def test_fp16_training_on_a_cpu_is_one_line_and_no_folder(tmp_path):
    arguments, output = _commands(tmp_path)["finetune"]
    result = run_minibert(*arguments, "--device", "cpu", "--precision", "fp16")
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "--precision fp16 trains on a GPU (float16 with a loss scaler); this run is on cpu" in result.stderr
    assert ("or --device cuda" in result.stderr) == torch.cuda.is_available(), result.stderr  # (this machine's torch)
    assert not output.exists()


def test_fp16_on_a_cpu_offers_the_gpu_only_where_torch_has_one(monkeypatch):
    """The refusal ended "or --device cuda" on a torch built without CUDA too: followed, that was the
    next error ("this torch ... is built without CUDA")."""
    from minibert.training.run.precision import check_precision

    said = re.escape("--precision fp16 trains on a GPU (float16 with a loss scaler); this run is on cpu: use "
                     "--precision bf16 or fp32 there")  # fmt: skip
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match=said + re.escape(f" (this torch, {torch.__version__}, is built without "
                                                           "CUDA)") + "$"):  # fmt: skip
        check_precision("fp16", torch.device("cpu"))
    monkeypatch.setattr(torch.version, "cuda", "13.0")  # a CUDA build that sees no GPU
    with pytest.raises(DeviceError, match=said + re.escape(f" (torch {torch.__version__} sees no GPU here)") + "$"):
        check_precision("fp16", torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU there: the run asked for the CPU
    with pytest.raises(DeviceError, match=said + ", or --device cuda$"):
        check_precision("fp16", torch.device("cpu"))
    with pytest.raises(DeviceError, match=re.escape("on cpu: an fp16 run resumes on a GPU only (--device cuda), as a "
                                                    "resume keeps the run's precision") + "$"):  # fmt: skip
        check_precision("fp16", torch.device("cpu"), resume=True)  # (a resume cannot change precision)


def test_bf16_is_precision_bf16_and_they_cannot_contradict():
    options = PretrainOptions(data=["d"], output="o", steps=1, batch_size=1, init="i", bf16=True)
    assert (options.precision, options.bf16) == ("bf16", False)
    assert options == PretrainOptions(data=["d"], output="o", steps=1, batch_size=1, init="i", precision="bf16")
    for other in ("fp16", "fp32"):  # fp32 given is not fp32 by default
        with pytest.raises(FlagConflictError, match=f"--bf16 and --precision {other} contradict"):
            PretrainOptions(data=["d"], output="o", steps=1, batch_size=1, init="i", bf16=True, precision=other)
    assert PretrainOptions(data=["d"], output="o", steps=1, batch_size=1, init="i").precision == "fp32"
    for given in (["--bf16", "--precision", "fp32"], ["--precision", "fp16", "--bf16"]):  # a usage error
        result = run_minibert("pretrain", "--data", "d", "--init", "i", "--output", "o", "--steps", "1",
                              "--batch-size", "1", *given)  # fmt: skip
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
        assert f"--bf16 and --precision {given[given.index('--precision') + 1]} contradict" in result.stderr
    agreeing = run_minibert("pretrain", "--data", "d", "--init", "i", "--output", "o", "--steps", "1",
                            "--batch-size", "1", "--bf16", "--precision", "bf16")  # fmt: skip
    assert agreeing.returncode == 1 and "contradict" not in agreeing.stderr  # (then the missing data: exit 1)
    settings = FinetuneOptions(model="m", train="t", output="o", device="cuda", precision="bf16").settings(1, 5)
    assert settings["precision"] == "bf16" and "device" not in settings and "deterministic" not in settings


@pytest.mark.parametrize("field, value, said", [
    ("precision", "fp8", "--precision 'fp8': must be one of fp32, bf16, fp16"),
    ("precision", "FP16", "--precision 'FP16': must be one of fp32, bf16, fp16"),
    ("device", "tpu", "--device: device 'tpu': expected auto, cpu, cuda or cuda:N"),
    ("device", "cuda:x", "--device: device 'cuda:x': expected auto, cpu, cuda or cuda:N"),
])  # fmt: skip
def test_options_made_in_python_refuse_another_precision_or_device_name_when_made(tmp_path, monkeypatch, field,
                                                                                  value, said):  # fmt: skip
    """The command line's parser refuses these (argparse's choices, --device's type); a value made in
    Python once passed check(), wrote the run folder, then failed at the first step with a bare
    KeyError: 'fp8' (or a ValueError for the device), leaving a folder that blocked a rerun. Now it is
    the options' DataError naming the flag, when they are made (dataclasses.replace too): before any
    file is read or written."""
    import dataclasses

    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match=re.escape(said)):
        FinetuneOptions(model=TINY, train="train.csv", output="run", **{field: value})
    with pytest.raises(DataError, match=re.escape(said)):
        PretrainOptions(data=["d.tfrecord"], output="run", steps=1, batch_size=1, init=TINY, **{field: value})
    with pytest.raises(DataError, match=re.escape(said)):
        dataclasses.replace(FinetuneOptions(model=TINY, train="train.csv", output="run"), **{field: value})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["cuda:256", "cuda:01", "cpu:1", "cuda:\u0661", "gpu"])
def test_training_options_refuse_a_device_name_in_the_parsers_words(name):
    """The options' DataError said "(N: the GPU's number, from 0)" for every bad name: for cuda:256 (the
    rule broken is 0-127), cuda:01 (no leading zero) and cpu:1 (the CPU is one device) it hid the
    rule the command line's parser states. Now it is the parser's words, after the flag."""
    with pytest.raises(ValueError) as parser:
        check_device_name(name)
    for make in (lambda: FinetuneOptions(model=TINY, train="train.csv", output="run", device=name),
                 lambda: PretrainOptions(data=["d"], output="run", steps=1, batch_size=1, init=TINY, device=name)):
        with pytest.raises(DataError) as refused:
            make()
        assert str(refused.value) == f"--device: {parser.value}"


def test_training_options_take_a_device_as_every_python_entry_point_does():
    """docs/gpu.md: in Python a number is a device (N: cuda:N, -1: the CPU), and a torch.device is
    one; the training options refused them ("expected auto, cpu, cuda or cuda:N"). Each is kept as
    the name --device would give, meaning the same device (what resolve_device reads)."""
    for given, name in ((-1, "cpu"), (0, "cuda:0"), (3, "cuda:3"), (torch.device("cuda", 1), "cuda:1"),
                        (torch.device("cpu", 0), "cpu"), (torch.device("cuda"), "cuda"), ("cpu:0", "cpu")):  # fmt: skip
        options = FinetuneOptions(model=TINY, train="train.csv", output="run", device=given)
        assert options.device == name and as_torch_device(name) == as_torch_device(given), given
        assert PretrainOptions(data=["d"], output="o", steps=1, batch_size=1, init=TINY, device=given).device == name
    for number in (-2, 128):
        with pytest.raises(DataError, match=re.escape(f"--device: device={number}: expected a GPU's number from 0 "
                                                      "to 127 (cuda:N), or -1 for the CPU")):  # fmt: skip
            FinetuneOptions(model=TINY, train="train.csv", output="run", device=number)


@pytest.fixture
def tagged_as_written_on_a_gpu():
    """torch.save tags every CPU storage as cuda:0 while this is on (the file a GPU run writes)."""

    def tagger(storage):
        return "cuda:0" if getattr(storage, "device", torch.device("meta")).type == "cpu" else None

    torch.serialization.register_package(-100, tagger, lambda storage, location: None)
    added = torch.serialization._package_registry[0]
    yield
    torch.serialization._package_registry.remove(added)


def _pretrain(data, run, *extra):
    return run_minibert("pretrain", "--data", str(data), "--init", TINY, "--output", str(run), "--steps", "4",
                        "--batch-size", "2", "--save-every", "2", "--device", "cpu", *extra)  # fmt: skip


def test_a_training_state_written_on_a_gpu_resumes_on_the_cpu(tmp_path, tagged_as_written_on_a_gpu, monkeypatch):
    """A run stopped at its checkpoint of step 2 of 4 (the whole state: its tensors to tag), its state
    rewritten as a GPU writes it, resumes on the CPU, saying that its steps left are not bit-identical.
    (A finished run resumed has no step left: it says so, and nothing of devices.)"""
    from minibert.training.run.checkpoint import RunDirectory

    data = write_instances(tmp_path / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=3))
    run = tmp_path / "run"
    save = RunDirectory.save

    def save_then_stop(self, model, state, *args, **kwargs):
        save(self, model, state, *args, **kwargs)
        if state.step == 2:
            raise KeyboardInterrupt  # (stopped just after the checkpoint of step 2)

    with monkeypatch.context() as patch:
        patch.setattr(RunDirectory, "save", save_then_stop)
        assert _pretrain(data, run).returncode == 130
    state = TrainingState.from_file(run / "training_state.pt")
    assert state.step == 2 and not state.finished
    state.arithmetic["device"] = "cuda"
    state.device_rng = [torch.zeros(16, dtype=torch.uint8)]
    (run / "training_state.pt").write_bytes(state.to_bytes())  # every tensor in it tagged cuda:0
    payload = (run / "training_state.pt").read_bytes()[:-32]
    if not torch.cuda.is_available():  # the file really says cuda: torch alone cannot read it here
        with pytest.raises(RuntimeError, match="CUDA"):
            torch.load(io.BytesIO(payload), weights_only=True)
    shutil.copytree(run, tmp_path / "again")
    resumed = run_minibert("pretrain", "--data", str(data), "--init", TINY, "--output", str(tmp_path / "again"),
                           "--steps", "6", "--batch-size", "2", "--save-every", "2", "--device", "cpu", "--resume")
    assert resumed.returncode != 0 and "steps = 4" in resumed.stderr, resumed.stderr  # the settings still bind
    resumed = _pretrain(data, run, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "the run was computed on cuda (this process runs on cpu" in resumed.stderr
    assert "not bit-identical" in resumed.stderr


def test_a_resume_with_another_precision_is_refused_and_an_older_state_reads_as_fp32(tmp_path):
    data = write_instances(tmp_path / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=4))
    run = tmp_path / "run"
    assert _pretrain(data, run).returncode == 0
    refused = _pretrain(data, run, "--resume", "--precision", "bf16")
    assert refused.returncode == 1 and "the run was made with precision = 'fp32'" in refused.stderr, refused.stderr
    assert "resume with the run's settings" in refused.stderr  # (an fp32 run: the other test's advice is fp16's)
    state = TrainingState.from_file(run / "training_state.pt")
    del state.settings["precision"]
    state.settings["bf16"] = False  # as a run made before --precision recorded it
    (run / "training_state.pt").write_bytes(state.to_bytes())
    assert _pretrain(data, run, "--resume").returncode == 0


def test_an_fp16_run_resumed_on_a_cpu_is_told_it_resumes_on_a_gpu_only(tmp_path):
    """A GPU's fp16 run resumed on the CPU: without --precision the state said "resume with the run's
    settings", and --precision fp16 then said "use --precision bf16 or fp32 there", which the state
    refuses: each sent the user to the other. Both now say docs/gpu.md's rule, in one line."""
    data = write_instances(tmp_path / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=5))
    run = tmp_path / "run"
    assert _pretrain(data, run, "--keep-state").returncode == 0
    state = TrainingState.from_file(run / "training_state.pt")
    state.settings["precision"], state.loss_scale = "fp16", {"scale": 1024.0, "good_steps": 3}
    state.arithmetic["device"] = "cuda"  # as a GPU's fp16 run writes it
    (run / "training_state.pt").write_bytes(state.to_bytes())
    rule = "an fp16 run resumes on a GPU only (--device cuda), as a resume keeps the run's precision"
    for given in ([], ["--precision", "fp16"], ["--precision", "bf16"]):
        result = _pretrain(data, run, "--resume", *given)
        assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, (given, result.stderr)
        assert rule in result.stderr and "use --precision bf16" not in result.stderr, (given, result.stderr)
        assert "resume with the run's settings" not in result.stderr, (given, result.stderr)


def test_the_loss_scaler_skips_an_overflowing_step_and_unscales_the_others():
    weight = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    optimizer = AdamWeightDecay([("w", weight)], weight_decay=0.0)

    class One:  # a group of one process
        def sum_gradients(self, parameters):
            pass

    scaler = LossScaler(scale=8.0)
    scaler.scaled((weight * torch.tensor([1.0, float("inf")])).sum()).backward()  # an fp16 overflow
    norm, updated = update([weight], optimizer, 0.1, One(), 1.0, scaler=scaler)
    assert (norm, updated, scaler.scale) == (float("inf"), False, 4.0)
    assert weight.tolist() == [1.0, 2.0] and weight.grad is None and optimizer.moments == {}
    scaler.scaled((weight * torch.tensor([3.0, 4.0])).sum()).backward()  # gradients 4 × (3, 4)
    norm, updated = update([weight], optimizer, 0.1, One(), 100.0, scaler=scaler)
    assert (norm, updated) == (5.0, True)  # the norm of the unscaled gradients
    assert optimizer.moments["w"][0].tolist() == pytest.approx([0.3, 0.4])  # m = 0.1 g: unscaled


def test_the_scaler_never_halves_below_one_the_guard_stops_there():
    scaler = LossScaler(scale=1.0)
    assert scaler.update(float("nan")) is True and scaler.scale == 1.0  # the loop's guard then stops the run


# ---------------------------------------------------------------- the device through every entry point


def _loaders():
    """Every public entry point that loads a model by name, called with ``device``."""
    import minibert
    from minibert.apps.ray import EmbedBatch

    def task(function, *arguments):
        return lambda path, device: function(*arguments, model=path, device=device)

    def model(cls):
        return lambda path, device: cls.from_pretrained(path, device=device)

    loaders = {name: model(getattr(minibert, name)) for name in minibert.__all__
               if name.startswith(("Bert", "AutoModel")) and hasattr(getattr(minibert, name), "from_pretrained")
               and name not in ("BertTokenizer", "BertTokenizerFast", "BertConfig")}  # fmt: skip  (no tensors)
    loaders.update({
        "Embedder": lambda path, device: minibert.Embedder.from_pretrained(path, device=device),
        "CrossEncoder": lambda path, device: minibert.CrossEncoder(path, device=device),
        "EmbedBatch": lambda path, device: EmbedBatch(path, device=device),
        "explore": lambda path, device: minibert.explore(path, "a [MASK]", device=device),
        "fill_mask": task(minibert.fill_mask, "a [MASK]"),
        "next_sentence": task(minibert.next_sentence, "a", "b"),
        "classify": task(minibert.classify, "a"),
        "tag": task(minibert.tag, "a"),
        "answer": task(minibert.answer, "a?", "b"),
        "rerank": task(minibert.rerank, "a", ["b"]),
    })  # fmt: skip
    return loaders


def test_every_entry_point_names_the_missing_gpu_before_it_reads_a_file(without_cuda, tmp_path):
    loaders = _loaders()
    assert len(loaders) >= 26  # the models, the Auto names, the Embedder, the tasks
    for name, load in loaders.items():
        for where in (tmp_path / "no such folder", TINY):  # nothing read: a missing folder is not what is said
            with pytest.raises(DeviceError, match="device 'cuda': this torch .* is built without CUDA"):
                load(where, "cuda")
            assert name  # (the name is in the traceback of a failure)


def test_a_loaded_model_elsewhere_than_the_device_named_is_refused_by_every_task(with_one_gpu):
    import minibert
    from minibert.config import BertConfig
    from minibert.heads import BertForMaskedLM, BertForNextSentencePrediction

    config = BertConfig.from_json_file(f"{TINY}/config.json")
    classifier = minibert.BertForSequenceClassification(config)
    cross_encoder = minibert.CrossEncoder.__new__(minibert.CrossEncoder)  # a loaded one (no files needed)
    cross_encoder.model = classifier
    calls = {
        "fill_mask": lambda device: minibert.fill_mask("a [MASK]", model=BertForMaskedLM(config), device=device),
        "next_sentence": lambda device: minibert.next_sentence("a", "b", model=BertForNextSentencePrediction(config),
                                                               device=device),  # fmt: skip
        "classify": lambda device: minibert.classify("a", model=classifier, device=device),
        "tag": lambda device: minibert.tag("a", model=minibert.BertForTokenClassification(config), device=device),
        "answer": lambda device: minibert.answer("a?", "b", model=minibert.BertForQuestionAnswering(config),
                                                 device=device),  # fmt: skip
        "rerank": lambda device: minibert.rerank("a", ["b"], model=cross_encoder, device=device),
        "explore": lambda device: minibert.explore(BertForMaskedLM(config), "a [MASK]", device=device),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=r"device='cuda', but the model given is on cpu: move it first"):
            call("cuda")
        with pytest.raises(DeviceError, match=r"device 'meta' holds a model's shapes, not its numbers"):
            call("meta")  # (moving it there would not help)
        assert name


def test_auto_takes_a_loaded_model_where_it_is(with_one_gpu):
    import minibert
    from minibert.heads import BertForMaskedLM

    model = BertForMaskedLM.from_pretrained(TINY)  # on the CPU, on a machine with a GPU: "auto" is fine
    assert minibert.fill_mask("a [MASK] b", model=model, device="auto")
    assert minibert.explore(model, "a [MASK] b", device="auto").data.model_name


def test_every_pooling_mode_computes_where_its_states_are():
    """A GPU's states pooled on the GPU: every tensor a mode makes is made there. Meta tensors
    stand in for another device (torch refuses to mix them with the CPU's, as it refuses a GPU's)."""
    from minibert.embedding.options import POOLINGS
    from minibert.embedding.pooling import pool

    states, mask = torch.empty(2, 5, 8, device="meta"), torch.empty(2, 5, 1, device="meta")
    pooler = torch.empty(2, 8, device="meta")
    for mode in POOLINGS:
        pooled = pool(states, mask, pooler, (mode,))
        assert pooled.device.type == "meta" and pooled.shape[0] == 2, mode


def test_auto_runs_int8_on_the_cpu_and_names_a_gpu_it_uses(with_one_gpu, capsys):
    from argparse import Namespace

    from minibert.apps.commands import device_of
    from minibert.loading.devices import placement

    assert placement("auto", "int8") == torch.device("cpu") == placement("auto", torch.int8)
    assert placement("auto", None) == torch.device("cuda")
    with pytest.raises(QuantizationError, match="asked for cuda:0"):
        placement("cuda:0", "int8")
    assert device_of(Namespace(device="auto", dtype="int8")) == torch.device("cpu")
    assert capsys.readouterr().err == ""  # the CPU is not named
    assert device_of(Namespace(device="auto", dtype=None)) == torch.device("cuda")
    assert capsys.readouterr().err == "minibert: device cuda:0 (NVIDIA Stand-In)\n"
    result = run_minibert("embed", "a text", "--model", TINY, "--dtype", "int8")  # auto: here, the CPU
    assert result.returncode == 0 and "device" not in result.stderr, result.stderr


def test_torchrun_joins_by_nccl_on_gpus_and_gloo_on_cpus(with_one_gpu, monkeypatch):
    from minibert.training.run import distributed

    joined, placed = [], []
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda backend: joined.append(backend))
    monkeypatch.setattr(distributed.dist, "get_rank", lambda: 1)
    monkeypatch.setattr(distributed.dist, "get_world_size", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", placed.append)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    world = distributed.World.from_environment(torch.device("cuda"))
    assert (joined, placed, world.device, world.rank, world.size) == (["nccl"], [torch.device("cuda", 1)],
                                                                      torch.device("cuda", 1), 1, 2)  # fmt: skip
    assert distributed.World.from_environment(torch.device("cpu")).device == torch.device("cpu")
    assert joined == ["nccl", "gloo"]
    with pytest.raises(DeviceError, match=r"--device cuda:0 under torchrun: the 2 processes on this machine would "
                                          r"all train on that one GPU; give --device cuda"):  # fmt: skip
        distributed.World.from_environment(torch.device("cuda", 0))
    assert joined == ["nccl", "gloo"]  # refused before joining
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")  # one process a machine: its number is the user's to choose
    assert distributed.World.from_environment(torch.device("cuda", 0)).device == torch.device("cuda", 0)


def test_a_kind_only_a_plugin_knows_is_taken_where_torch_can_make_a_tensor_there(monkeypatch):
    """xla (torch_xla) has no torch.xla module to ask and is not torch.accelerator's: it was always
    refused as 'no backend loaded', even where torch_xla is. Now it is taken where torch can make a
    tensor there, and refused, saying so, where it cannot."""
    with pytest.raises(DeviceError, match=r"sees no XLA device \(no backend for it is loaded"):
        resolve_device("xla")
    made = []
    monkeypatch.setattr(torch, "empty", lambda *size, device=None, **options: made.append(str(device)))
    assert resolve_device("xla") == torch.device("xla") and made == ["xla"]


# ------------------------------------------------ one spelling: the CPU as cpu:0, a device as a number


@pytest.mark.parametrize("device", [-1, "cpu:0", torch.device("cpu", 0)], ids=["-1", "cpu:0", "torch.device(cpu,0)"])
def test_the_cpu_by_number_is_the_cpu_on_every_entry_point(device, tmp_path):
    """``-1`` (transformers' pipeline(device=-1)), ``"cpu:0"`` and ``torch.device("cpu", 0)`` name the
    CPU: every entry point runs there, as transformers' fill-mask pipeline does given them. ``-1`` was
    a TypeError ("got int") everywhere, ``device_map=-1`` a ValueError about a device 'cuda:-1' never
    written, and ``torch.device("cpu", 0)`` a refusal of the string 'cpu:0' by the tasks, or of a
    loaded model on the CPU ("move it first (model.to('cpu:0'))", which could never succeed)."""
    import transformers

    import minibert
    from minibert.errors import MissingHeadsError
    from minibert.heads import BertForMaskedLM

    for name, load in _loaders().items():
        try:  # the device taken; what is said of a checkpoint without the head a class needs is the head
            loaded = load(TINY, device)
        except MissingHeadsError:
            continue
        model = getattr(loaded, "model", getattr(getattr(loaded, "embedder", None), "model", loaded))
        assert not isinstance(model, torch.nn.Module) or model.device == torch.device("cpu"), name
    assert BertModel.from_pretrained(TINY, device_map=device).device == torch.device("cpu")
    pipeline = transformers.pipeline("fill-mask", model=TINY, device=device)
    theirs = pipeline("a [MASK] b", top_k=3)
    for model in (TINY, BertForMaskedLM.from_pretrained(TINY)):  # by name, and a model loaded on the CPU
        ours = minibert.fill_mask("a [MASK] b", model=model, device=device, top_k=3)
        assert [row["token_str"] for row in ours] == [row["token_str"] for row in theirs]
        assert [row["score"] for row in ours] == pytest.approx([row["score"] for row in theirs], abs=1e-5)
    assert minibert.explore(BertForMaskedLM.from_pretrained(TINY), "a [MASK]", device=device).data.model_name


def test_a_number_is_a_gpu_as_torch_reads_it_and_said_as_written(without_cuda):
    from minibert import Embedder, classify, fill_mask

    for load in (lambda: BertModel.from_pretrained(TINY, device=0),
                 lambda: BertModel.from_pretrained(TINY, device_map=0),
                 lambda: Embedder.from_pretrained(TINY, device=0), lambda: classify(["a"], model=TINY, device=0),
                 lambda: fill_mask("a [MASK]", model=TINY, device=0)):  # fmt: skip
        with pytest.raises(DeviceError, match=re.escape("device 0 (cuda:0): this torch (") + ".* without CUDA"):
            load()  # (was a TypeError, "got int"; device_map=0 was said as 'cuda:0')
    for number in (-2, 128):
        with pytest.raises(ValueError, match=rf"device={number}: expected a GPU's number from 0 to 127 \(cuda:N\), "
                                             "or -1 for the CPU"):  # fmt: skip
            BertModel.from_pretrained(TINY, device_map=number)
    for other in ("cpu:1", torch.device("cpu", 1)):  # torch takes them as the CPU; minibert names it one way
        with pytest.raises(ValueError, match=re.escape("device 'cpu:1': the CPU is one device: cpu (or cpu:0)")):
            resolve_device(other)
    with pytest.raises(TypeError, match="device must be a name .* got bool"):
        resolve_device(True)


def test_a_number_and_a_name_agree_where_they_mean_one_gpu(with_one_gpu):
    from minibert.heads import BertForMaskedLM
    from minibert.tasks import fill_mask

    assert resolve_device(0) == torch.device("cuda", 0) == resolve_device("cuda:0")
    with pytest.raises(DeviceError, match=re.escape("device 1 (cuda:1): this machine has 1 GPU (cuda:0)")):
        resolve_device(1)
    with pytest.raises(ValueError, match=re.escape("device=0, but the model given is on cpu: move it first "
                                                   "(model.to(0))")):  # fmt: skip
        fill_mask("a [MASK] b", model=BertForMaskedLM.from_pretrained(TINY), device=0)
    from minibert.loading.transformers_keywords import _one_device

    assert _one_device(0, "cuda:0") == 0 and _one_device({"": -1}, "cpu:0") == -1
    with pytest.raises(TypeError, match="disagree"):
        _one_device(0, "cpu")


def test_minus_one_is_advised_as_the_device_it_means():
    """device=-1 (the CPU, as in transformers' pipelines) for a model elsewhere advised model.to(-1),
    which torch refuses ("Device index must not be negative")."""
    from minibert.loading.devices import check_model_is_on

    with pytest.raises(ValueError, match=re.escape("device=-1, but the model given is on meta: move it first "
                                                   "(model.to('cpu'))")):  # fmt: skip
        check_model_is_on(torch.nn.Linear(1, 1, device="meta"), -1, "classify")
    torch.nn.Linear(1, 1).to("cpu")  # (the advice works)


def test_the_command_line_takes_cpu_0_as_the_cpu(tmp_path):
    assert check_device_name("cpu:0") == "cpu:0" and resolve_device("cpu:0") == torch.device("cpu")
    result = run_minibert("embed", "a text", "--model", TINY, "--device", "cpu:0")
    assert result.returncode == 0 and "device" not in result.stderr, result.stderr  # (only a GPU is named)
    for other in ("cpu:1", "cpu:00"):
        result = run_minibert("embed", "a text", "--model", TINY, "--device", other)
        assert result.returncode == 2 and f"device {other!r}: the CPU is one device: cpu (or cpu:0)" in result.stderr
