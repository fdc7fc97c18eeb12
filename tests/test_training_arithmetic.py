"""The training state records how the steps were computed (training/run/arithmetic.py): a resume follows
the run's GEMM backend, and says when it computes with another thread count or a backend that
$MINIBERT_GEMM imposes (its steps are then right but not bit-identical to an unbroken run's)."""

from __future__ import annotations

import contextlib
import os
import warnings

import pytest
import torch

from helpers import run_minibert
from minibert.errors import DeviceError
from minibert.heads import BertForPreTraining
from minibert.speed.packed_linear import use_backend
from minibert.training.run.arithmetic import arithmetic_of, deterministic_algorithms, follow_the_run
from minibert.training.run.checkpoint import RunDirectory, TrainingState
from random_instances import random_instances, write_instances

TINY = "tests/data/tiny_hub"


@pytest.fixture
def other_thread_count():
    before = torch.get_num_threads()
    other = 1 if before > 1 else 2
    yield other
    torch.set_num_threads(before)


def pretrain(data, run, *extra):
    return run_minibert("pretrain", "--data", str(data), "--init", TINY, "--output", str(run), "--steps", "4",
                        "--batch-size", "4", "--save-every", "2", *extra)  # fmt: skip


def test_the_state_records_the_threads_and_backend_and_a_resume_with_other_threads_says_so(
    tmp_path, other_thread_count, monkeypatch
):
    monkeypatch.setenv("MINIBERT_GEMM", "mkl")
    data = write_instances(tmp_path / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=5))
    run = tmp_path / "run"
    saved = RunDirectory.save

    def stopped_at_step_two(self, model, state, hub_files=True):  # steps 3 and 4 left to resume
        saved(self, model, state, hub_files)
        if state.step == 2:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(RunDirectory, "save", stopped_at_step_two)
        assert pretrain(data, run).returncode == 130
    recorded = TrainingState.from_file(run / "training_state.pt").arithmetic
    assert recorded == {"threads": torch.get_num_threads(), "gemm": "mkl", "device": "cpu"}
    torch.set_num_threads(other_thread_count)
    resumed = pretrain(data, run, "--keep-state", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    said = f"the run was computed with {recorded['threads']} torch threads (this process has {other_thread_count})"
    assert said in resumed.stderr and "not bit-identical" in resumed.stderr, resumed.stderr
    torch.set_num_threads(recorded["threads"])  # (the state's last steps were computed with the other count)
    again = pretrain(data, run, "--resume")  # its whole state kept at its last step: no step left to round
    assert again.returncode == 0 and "bit-identical" not in again.stderr, again.stderr


def test_a_resume_with_the_same_threads_says_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIBERT_GEMM", "mkl")
    data = write_instances(tmp_path / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=5))
    run = tmp_path / "run"
    assert pretrain(data, run).returncode == 0
    resumed = pretrain(data, run, "--resume")
    assert resumed.returncode == 0 and "bit-identical" not in resumed.stderr, resumed.stderr


@pytest.fixture
def tiny_model():
    model = BertForPreTraining.from_pretrained(TINY, new_heads=True, gemm="mkl")
    if "onednn" not in _runnable(model):
        pytest.skip("oneDNN cannot run this model here: there is no second backend to follow")
    return model


def _runnable(model) -> list[str]:
    from minibert.speed.gemm import onednn_available

    return ["mkl", "onednn"] if onednn_available(model) else ["mkl"]


def test_a_resume_follows_the_runs_backend_when_none_is_asked_for(tiny_model, monkeypatch):
    monkeypatch.delenv("MINIBERT_GEMM", raising=False)
    saved = {"threads": torch.get_num_threads(), "gemm": "onednn", "device": "cpu"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say: the process computes as the run did
        follow_the_run(tiny_model, saved)
    assert arithmetic_of(tiny_model) == saved


def test_a_backend_asked_for_is_kept_and_the_difference_said(tiny_model, monkeypatch):
    monkeypatch.setenv("MINIBERT_GEMM", "mkl")
    use_backend(tiny_model, "mkl")
    with pytest.warns(UserWarning, match=r"the onednn GEMMs \(MINIBERT_GEMM asks for mkl\).*not bit-identical"):
        follow_the_run(tiny_model, {"threads": torch.get_num_threads(), "gemm": "onednn"})
    assert tiny_model.gemm_backend == "mkl"


def test_a_state_from_before_the_record_is_taken_as_it_is(tiny_model):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        follow_the_run(tiny_model, {})
    assert tiny_model.gemm_backend == "mkl"


def test_a_run_from_another_device_says_its_resume_is_not_bit_identical(tiny_model):
    """A state recorded on a GPU, resumed on the CPU (or the other way): right, but its sums and
    its dropout generator are another device's, and the run says so (the threads are then moot)."""
    with pytest.warns(UserWarning, match=r"on cuda \(this process runs on cpu: its own order of sums, and its own "
                      r"generator for dropout\).*not bit-identical"):  # fmt: skip
        follow_the_run(tiny_model, {"threads": 64, "gemm": "mkl", "device": "cuda"})


def write_pairs(path, count: int = 8):
    """A generic CSV of ``count`` labelled texts of the tiny vocabulary's words."""
    rows = [f"the {'river' if i % 2 else 'money'} bank {i},{'wet' if i % 2 else 'dry'}" for i in range(count)]
    path.write_text("text,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


# (where --gemm goes, the backend it asks for, the one $MINIBERT_GEMM asks for): the flag must win
ASKED = [("before", "mkl", "onednn"), ("after", "mkl", "onednn"), ("before", "onednn", "mkl"),
         ("after", "onednn", "mkl")]  # fmt: skip


@pytest.mark.parametrize(("where", "asked", "environment"), ASKED, ids=["-".join(case) for case in ASKED])
def test_finetune_computes_with_the_gemm_asked_for_before_or_after_the_command(
    where, asked, environment, tiny_model, tmp_path, monkeypatch
):
    """docs/cli.md: --gemm is taken by every command that loads a model; before `finetune` it was
    parsed and then ignored (the state recorded what $MINIBERT_GEMM or the measurement picked)."""
    monkeypatch.setenv("MINIBERT_GEMM", environment)
    run = tmp_path / "run"
    command = ["finetune", "--model", TINY, "--train", str(write_pairs(tmp_path / "train.csv")), "--output", str(run),
               "--batch-size", "4", "--epochs", "1", "--max-seq-length", "16", "--keep-state"]  # fmt: skip
    flag = ["--gemm", asked]
    result = run_minibert(*(flag + command if where == "before" else command + flag))
    assert result.returncode == 0, result.stderr
    assert TrainingState.from_file(run / "training_state.pt").arithmetic["gemm"] == asked


@pytest.mark.parametrize("init", [True, False], ids=["init", "config"])
def test_pretrain_computes_with_the_gemm_asked_for(init, tiny_model, tmp_path, monkeypatch):
    """From a checkpoint (--init) and from random weights (--config, where only the flag changes the
    book's nn.Linear)."""
    monkeypatch.setenv("MINIBERT_GEMM", "mkl")
    data = write_instances(tmp_path / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=5))
    start = ["--init", TINY] if init else ["--config", f"{TINY}/config.json", "--vocab", f"{TINY}/vocab.txt"]
    run = tmp_path / "run"
    result = run_minibert("--gemm", "onednn", "pretrain", "--data", str(data), *start, "--output", str(run),
                          "--steps", "2", "--batch-size", "4", "--keep-state")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert TrainingState.from_file(run / "training_state.pt").arithmetic["gemm"] == "onednn"


def test_a_resume_keeps_the_gemm_the_command_asks_for_and_says_so(tiny_model, monkeypatch):
    monkeypatch.delenv("MINIBERT_GEMM", raising=False)
    use_backend(tiny_model, "mkl")
    with pytest.warns(UserWarning, match=r"the onednn GEMMs \(--gemm asks for mkl\).*not bit-identical"):
        follow_the_run(tiny_model, {"threads": torch.get_num_threads(), "gemm": "onednn"}, gemm="mkl")
    assert tiny_model.gemm_backend == "mkl"


@pytest.mark.parametrize("command", [["vocab", "--input", "a.txt", "--output", "v"], ["tokenize", "a text"],
                                     ["convert", "source", "destination"]], ids=lambda argv: argv[0])  # fmt: skip
def test_gemm_before_a_command_that_runs_no_model_is_a_usage_error(command):
    """The top-level parser takes --gemm for every command; one that computes with no model says so
    (exit 2) rather than ignore it."""
    result = run_minibert("--gemm", "mkl", *command)
    assert result.returncode == 2 and f"minibert {command[0]} runs none" in result.stderr, result.stderr
    # after the command's name: "unrecognized arguments: --gemm a text" (argparse took "mkl" for the text)
    for gemm in (["--gemm", "mkl"], ["--gemm=mkl"]):
        result = run_minibert(command[0], *gemm, *command[1:])
        assert result.returncode == 2 and result.stderr.strip() == (
            f"minibert: error: --gemm picks the linear layers' library of a model the command runs; minibert "
            f"{command[0]} runs none (see 'minibert --help')"), result.stderr


# --deterministic on a GPU (arithmetic.deterministic_algorithms): torch's deterministic algorithms strictly, for
# the run only. These run on the CPU: the context touches no GPU, only torch's flags and the environment.
CUDA = torch.device("cuda")


@pytest.fixture
def flags_put_back():
    """torch's deterministic flags as some earlier code left them (on, warn-only), restored after the test."""
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield True, True
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def _flags():
    return torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()


def test_deterministic_on_a_gpu_is_strict_for_the_run_and_puts_the_process_setting_back(flags_put_back, monkeypatch):
    # warn-only would leave flash and memory-efficient attention's backward adding up in a changing order
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    with deterministic_algorithms(CUDA, True):
        assert _flags() == (True, False)
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert _flags() == flags_put_back
    with pytest.raises(ValueError), deterministic_algorithms(CUDA, True):
        raise ValueError("a run that fails")
    assert _flags() == flags_put_back


@pytest.mark.parametrize(("device", "asked"), [(CUDA, False), (torch.device("cpu"), True)])
def test_deterministic_changes_nothing_unasked_or_on_a_cpu(flags_put_back, monkeypatch, device, asked):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    with deterministic_algorithms(device, asked):
        assert _flags() == flags_put_back and "CUBLAS_WORKSPACE_CONFIG" not in os.environ


def test_an_operation_without_a_deterministic_kernel_stops_the_run_naming_it(flags_put_back):
    with pytest.raises(DeviceError, match=r"^--deterministic: put_ has no deterministic kernel in this torch "
                                          r"\(.+\) on cuda; run without --deterministic"):  # fmt: skip
        with deterministic_algorithms(CUDA, True):
            torch.zeros(3).put_(torch.tensor([0]), torch.tensor([1.0]))  # no deterministic kernel, CPU or GPU
    with pytest.raises(RuntimeError, match="another failure"), deterministic_algorithms(CUDA, True):
        raise RuntimeError("another failure")  # any other error passes through as it is
    assert _flags() == flags_put_back


def test_a_process_that_used_the_gpu_before_is_told_cublas_may_not_follow(flags_put_back, monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.warns(UserWarning, match="every product of the run is refused"), deterministic_algorithms(CUDA, True):
        pass
    with warnings.catch_warnings():  # set before: cuBLAS read it when it started
        warnings.simplefilter("error")
        with deterministic_algorithms(CUDA, True):
            pass


def test_a_training_run_computes_inside_the_deterministic_context(tmp_path, monkeypatch):
    from minibert.training import FinetuneOptions, finetune
    from minibert.training.run import loop

    seen = []

    @contextlib.contextmanager
    def spy(device, asked):
        seen.append((device.type, asked))
        yield
        seen.append((tmp_path / "run" / "metrics.jsonl").exists())  # the steps ran inside

    monkeypatch.setattr(loop, "deterministic_algorithms", spy)
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"text number {i},{'ab'[i % 2]}\n" for i in range(8)), encoding="utf-8")
    finetune(FinetuneOptions(model=TINY, train=str(train), output=str(tmp_path / "run"), epochs=1, batch_size=4,
                             max_seq_length=16, device="cpu", deterministic=True))  # fmt: skip
    assert seen == [("cpu", True), True]


def test_cublas_refused_by_torch_or_set_to_another_value_is_one_line(flags_put_back, monkeypatch):
    # torch's refusal of every product when cuBLAS started before the variable was set (Context.cpp's text)
    refusal = ("Deterministic behavior was enabled with either `torch.use_deterministic_algorithms(True)` or "
               "`at::Context::setDeterministicAlgorithms(true)`, but this operation is not deterministic because it "
               "uses CuBLAS and you have CUDA >= 10.2. To enable deterministic behavior in this case, you must set an "
               "environment variable before running your PyTorch application: CUBLAS_WORKSPACE_CONFIG=:4096:8 or "
               "CUBLAS_WORKSPACE_CONFIG=:16:8.")  # fmt: skip
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")  # the other setting torch takes: kept as it is
    with pytest.raises(DeviceError, match="^--deterministic: cuBLAS started in this process before "
                                          "CUBLAS_WORKSPACE_CONFIG was set"):  # fmt: skip
        with deterministic_algorithms(CUDA, True):
            assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
            raise RuntimeError(refusal)
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0")
    with pytest.raises(DeviceError, match="CUBLAS_WORKSPACE_CONFIG is ':0:0'; cuBLAS adds up in one order only with "
                                          ":4096:8 or :16:8"):  # fmt: skip
        with deterministic_algorithms(CUDA, True):
            pass
    assert _flags() == flags_put_back
