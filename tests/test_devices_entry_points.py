"""The device through every Python entry point that loads a model (models, heads, Embedder, the task
functions, minibert.ray): a missing GPU named before any file is read, a loaded model elsewhere than
the device named refused by every task, ``auto`` taking a model where it is, int8 on the CPU, torchrun's
backend by device; and one spelling of each device: the CPU as cpu:0, a GPU as a number, as torch reads them."""

from __future__ import annotations

import re

import pytest
import torch

from faked_devices import TINY
from helpers import run_minibert
from minibert import BertModel, DeviceError
from minibert.errors import QuantizationError
from minibert.loading.devices import check_device_name, resolve_device

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


def test_minus_one_is_advised_as_the_device_it_means(with_one_gpu):
    """device=-1 (the CPU, as in transformers' pipelines) for a model elsewhere advised model.to(-1),
    which torch refuses ("Device index must not be negative")."""
    import types

    from minibert.loading.devices import check_model_is_on

    class OnTheGpu(torch.nn.Module):  # (the faked machine's GPU holds no tensor: its parameters say where)
        def parameters(self, recurse: bool = True):
            yield types.SimpleNamespace(device=torch.device("cuda", 0))

    with pytest.raises(ValueError, match=re.escape("device=-1, but the model given is on cuda:0: move it first "
                                                   "(model.to('cpu'))")):  # fmt: skip
        check_model_is_on(OnTheGpu(), -1, "classify")
    torch.nn.Linear(1, 1).to("cpu")  # (the advice works)


def test_a_model_on_meta_is_said_to_hold_no_numbers_whatever_device_is_named():
    """A model on meta given with device="cpu" was advised to move first (model.to('cpu')), which
    torch refuses for meta tensors ("Cannot copy out of meta tensor"), while device=None said what is
    true: meta holds shapes, not numbers. Now every device named says that."""
    from minibert.loading.devices import check_model_is_on

    for device in ("cpu", -1, "cpu:0", None, "auto"):
        with pytest.raises(DeviceError, match=r"^device 'meta' holds a model's shapes, not its numbers: classify "):
            check_model_is_on(torch.nn.Linear(1, 1, device="meta"), device, "classify")


def test_the_command_line_takes_cpu_0_as_the_cpu(tmp_path):
    assert check_device_name("cpu:0") == "cpu:0" and resolve_device("cpu:0") == torch.device("cpu")
    result = run_minibert("embed", "a text", "--model", TINY, "--device", "cpu:0")
    assert result.returncode == 0 and "device" not in result.stderr, result.stderr  # (only a GPU is named)
    for other in ("cpu:1", "cpu:00"):
        result = run_minibert("embed", "a text", "--model", TINY, "--device", other)
        assert result.returncode == 2 and f"device {other!r}: the CPU is one device: cpu (or cpu:0)" in result.stderr
