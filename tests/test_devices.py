"""The CPU half of running minibert on a GPU (with test_devices_training.py and
test_devices_entry_points.py): ``--device`` on every command that runs a model, its name checked
before anything is read or written, as torch reads it; other accelerators; the meta device; what a
machine without CUDA says. (tests/test_gpu.py runs the other half where a GPU is.)

"Without CUDA" is made true on any machine by taking CUDA out of torch's version record, the
first thing devices.py asks (faked_devices.py): these tests run, and mean the same, on a GPU
machine too.
"""

from __future__ import annotations

import re

import pytest
import torch

from faked_devices import TINY
from helpers import child_environment, run_minibert
from minibert import BertModel, DeviceError
from minibert.errors import DataError, QuantizationError
from minibert.loading.devices import check_device_name, resolve_device
from minibert.training.options import FinetuneOptions
from random_instances import random_instances, write_instances


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


def test_the_gpu_tests_pass_on_the_cpu(tmp_path):
    """tests/test_gpu.py skips where torch sees no CUDA, so CI (no GPU) never runs it, and a change
    that broke it would first be seen in a device's 15 minutes. ``MINIBERT_TEST_DEVICE=cpu`` runs it
    on the CPU (its docstring): here, in a child pytest, every test either passes or is skipped for
    one of the reasons the file gives for the CPU (float16, the CUDA kernels), none fails."""
    import subprocess
    import sys
    from pathlib import Path

    environment = child_environment(MINIBERT_TEST_DEVICE="cpu")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-m", "gpu",
                             f"--basetemp={tmp_path / 'pytest'}", "tests/test_gpu.py"], capture_output=True,
                            text=True, timeout=900, env=environment, cwd=Path(__file__).parents[1])  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 10 and "failed" not in summary and "error" not in summary, summary
    reasons = re.findall(r"SKIPPED \[\d+\] [^:]+:\d+: (.+)", result.stdout)
    allowed = ("float16 is a GPU's", "the CUDA kernels", "fp16 trains on a GPU", "torch's sync debug mode is CUDA's")
    assert all(reason.startswith(allowed) for reason in reasons), reasons
