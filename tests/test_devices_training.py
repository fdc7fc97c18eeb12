"""Training where the device is named: ``--precision`` (fp16 on a CPU refused in one line, bf16 the
same as --bf16), the options made in Python checked when made, a training state written on a GPU
resumed on the CPU (and an fp16 run's refused there), another precision refused on resume, and
fp16's loss scaler. (tests/test_gpu.py trains on a GPU where one is.)"""

from __future__ import annotations

import io
import re
import shutil

import pytest
import torch

from faked_devices import TINY
from helpers import run_minibert
from minibert import DeviceError
from minibert.errors import DataError, FlagConflictError
from minibert.loading.devices import as_torch_device, check_device_name
from minibert.training.options import FinetuneOptions, PretrainOptions
from minibert.training.run.checkpoint import TrainingState
from minibert.training.run.optimization import AdamWeightDecay, update
from minibert.training.run.precision import LossScaler
from random_instances import random_instances, write_instances


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
    assert refused.returncode == 1, refused.stderr
    assert "the run was made with precision (--precision) = 'fp32'" in refused.stderr, refused.stderr
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
