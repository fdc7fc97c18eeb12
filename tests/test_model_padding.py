"""minibert.BertModel's paths through padding, against transformers and float64: left padding takes
the plain path, rows of very different lengths attend in length groups, the book's plain path
computes what the fast path computes, [PAD] rows are skipped only where asked for by name, and a
row with no real token differs between the paths in float16 only.

Every test states what it compares and reports the max |Δ| it found; fp32 tolerance 1e-5, beyond
fp32's own rounding at that depth (helpers.bound_from_exact).
"""

from __future__ import annotations

import pytest
import torch

from helpers import (
    assert_close,
    bound_from_exact,
    compare_outputs,
    compare_real_tokens_with_exact,
)
from minibert import BertModel, BertTokenizer
from minilm_models import batch_of

transformers = pytest.importorskip("transformers")
ATOL = 1e-5


def test_left_padding_takes_the_plain_path_and_matches(minilm, minilm_reference, minilm_exact, minilm_dir, real_texts):
    """Packing applies to right padding only; any other mask runs the plain path, still exact."""
    from minibert.speed.packing import Packing

    right = batch_of(minilm_dir, real_texts[:5])
    lengths = right["attention_mask"].sum(1)
    width = right["input_ids"].shape[1]
    left = {key: torch.zeros_like(value) for key, value in right.items()}
    for row, length in enumerate(lengths.tolist()):
        for key in left:
            left[key][row, width - length :] = right[key][row, :length]
    assert Packing.applies_to(right["attention_mask"]) and not Packing.applies_to(left["attention_mask"])
    with torch.no_grad():
        ours = minilm(**left, output_hidden_states=True)
        theirs = minilm_reference(**left, output_hidden_states=True)
        exact = minilm_exact(**left, output_hidden_states=True)
    compare_outputs(ours, theirs, left["attention_mask"], "left padding", exact=exact)


def test_padded_ids_without_a_mask_warn_once(minilm_dir):
    """transformers 4 warned once here (warn_if_padding_and_no_attention_mask); transformers 5's
    BertModel no longer calls it. minibert keeps the warning: the numbers do change."""
    import warnings

    padded = torch.tensor([[101, 7592, 102, 0, 0], [101, 7592, 2088, 999, 102]])
    model = BertModel.from_pretrained(minilm_dir)
    with pytest.warns(UserWarning, match="pad id 0 .* no attention_mask"):
        unmasked = model(padded).last_hidden_state
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(padded)  # once per model
        fresh = BertModel.from_pretrained(minilm_dir)
        masked = fresh(padded, attention_mask=(padded != 0).long()).last_hidden_state  # a mask: no warning
        fresh(padded[1:])  # no pad id at either end: no warning
    assert (unmasked[0, :3] - masked[0, :3]).abs().max() > 1e-3  # attending to padding changes the real tokens


def test_rows_of_very_different_lengths_attend_in_groups_and_match(minilm, minilm_exact, minilm_dir):
    """A batch mixing long and short texts (as a server's batches do) attends in length groups
    (AttentionGroup), each padded only to its own longest; every layer still matches transformers,
    which pads every row to the batch's longest. Ten rows (9 to 298 tokens) make four groups, one of a
    single row and three of several, out of batch order: a row put in the wrong group, padded or
    unpacked wrongly, or put back in the wrong place shows in every layer. (Fifteen more real texts
    made the references, which pad every row to 298 tokens, run 2.5 times as long and split the
    same way.)"""
    import corpus
    from minibert.speed.packing import AttentionGroup, Packing

    by_length = sorted((text for text in corpus.docstrings() if 20 < len(text) < 1200), key=len)
    texts = [by_length[-1], by_length[-2], *by_length[:6], by_length[len(by_length) // 2], by_length[-40]]
    batch = batch_of(minilm_dir, texts)
    packing = Packing(batch["attention_mask"])
    assert packing.groups is not None and len(packing.groups) >= 3, "the batch should split into groups"
    assert any(len(group.rows) > 1 for group in packing.groups), "some group should hold several rows"
    lengths = batch["attention_mask"].sum(1)
    covered = sorted(row for group in packing.groups for row in group.rows.tolist())
    assert covered == list(range(len(texts)))  # every row in exactly one group
    for group in packing.groups:
        group_lengths = lengths[group.rows]
        assert group.tokens == int(group_lengths.max())
        assert int(group_lengths.min()) >= AttentionGroup.RATIO * group.tokens
    # transformers' sdpa attention: its eager one differs from its own sdpa by up to ~1e-5 on
    # texts of 300 tokens, which would hide what the grouping changes.
    reference = transformers.BertModel.from_pretrained(str(minilm_dir), attn_implementation="sdpa").eval()
    # Groups are made only where padding is skipped (packed rows): skip_padding=True, real tokens compared
    # (the [PAD] rows stay zeros), each path against float64 within bound_from_exact of transformers'.
    mask = batch["attention_mask"]
    with torch.no_grad():
        ours = minilm(**batch, output_hidden_states=True, skip_padding=True)
        theirs = reference(**batch, output_hidden_states=True)
        exact = minilm_exact(**batch, output_hidden_states=True)
    compare_real_tokens_with_exact(ours, theirs, exact, mask, "rows in length groups")
    with torch.no_grad():  # and the same rows attending as one group
        AttentionGroup.RATIO, ratio = 0.0, AttentionGroup.RATIO
        try:
            assert Packing(mask).groups is None
            ungrouped = minilm(**batch, output_hidden_states=True, skip_padding=True)
        finally:
            AttentionGroup.RATIO = ratio
    compare_real_tokens_with_exact(ungrouped, theirs, exact, mask, "the same rows as one group")


def test_attention_groups_are_not_made_for_rows_of_similar_length():
    from minibert.speed.packing import AttentionGroup

    assert AttentionGroup.of(torch.tensor([10, 9, 8, 10])) is None
    groups = AttentionGroup.of(torch.tensor([30, 250, 28, 240, 25]))
    assert [group.rows.tolist() for group in groups] == [[1, 3], [0, 2, 4]]
    assert [group.tokens for group in groups] == [250, 30]
    assert groups[0].packed[:3].tolist() == [30, 31, 32]  # row 1 starts after row 0's 30 tokens


def test_the_books_plain_path_computes_what_the_fast_path_computes(minilm, minilm_exact, minilm_dir, real_texts):
    """model.py's written-out attention on (B, T, H) (``use_fast_path = False``) against the fast
    path asked to skip padding (speed/fast_path.py: packed tokens, length groups, the fused kernel), on a
    batch that takes all three, every layer and the pooler, real tokens only (the packed path leaves
    zeros at [PAD] rows; without ``skip_padding`` they are compared with transformers' in
    test_minilm_every_layer_matches). The two differ only in the order of fp32
    sums: each is held to the float64 result as the parity tests hold transformers
    (helpers.bound_from_exact: 1e-5 beyond twice the plain path's own fp32 error at that depth)."""
    import corpus
    from minibert.speed.packing import Packing

    by_length = sorted((text for text in corpus.docstrings() if 20 < len(text) < 1200), key=len)
    batch = batch_of(minilm_dir, [by_length[-1], *by_length[:4], *real_texts[:4]])
    assert Packing(batch["attention_mask"]).groups is not None  # the fast path packs and groups this batch
    with torch.no_grad():
        fast = minilm(**batch, output_hidden_states=True, skip_padding=True)
        minilm.use_fast_path = False
        try:
            plain = minilm(**batch, output_hidden_states=True)
        finally:
            minilm.use_fast_path = True
        exact = minilm_exact(**batch, output_hidden_states=True)
    # Each against the float64 result, within 1e-5 beyond twice the plain path's own fp32 error at that
    # depth (bound_from_exact): the written-out attention and the fused kernel are two fp32 orders, and at
    # layer 5 each lies up to ~1.2e-5 from float64 on some batches of these texts (a flat 1e-5 between
    # them failed at 1.26e-5 with another numpy's docstrings); a wrong layout is off by 1e-1 and more.
    real = batch["attention_mask"].bool()
    for depth, (a, b, e) in enumerate(zip(fast.hidden_states, plain.hidden_states, exact.hidden_states)):
        bound = bound_from_exact(b[real], e[real])
        assert_close(a[real], e[real], f"fast path vs float64, depth {depth}", bound)
    assert_close(fast.pooler_output, plain.pooler_output, "pooler, fast vs plain", ATOL)


def test_pad_rows_are_skipped_only_where_asked_for_by_name(minilm, minilm_dir, monkeypatch):
    """BertModel called directly computes [PAD] rows (no packing; their values are compared with
    transformers' in test_minilm_every_layer_matches); ``skip_padding=True`` packs and leaves zeros
    there, with the real rows unchanged; the Embedder, whose pooling never reads [PAD] rows, asks
    for it (its speed is the packed path's)."""
    from minibert import Embedder
    from minibert.speed.packing import Packing

    packed = []
    original = Packing.__init__

    def counted(self, mask, *rest, **named):
        packed.append(mask.shape)
        original(self, mask, *rest, **named)

    monkeypatch.setattr(Packing, "__init__", counted)
    batch = batch_of(minilm_dir, ["I love Paris, the city of light and of long walks by the river.", "Hi"])
    pad = ~batch["attention_mask"].bool()
    with torch.no_grad():
        direct = minilm(**batch).last_hidden_state
        assert not packed and bool(direct[pad].abs().min() > 0)  # real values at every [PAD] row
        skipped = minilm(**batch, skip_padding=True).last_hidden_state
    assert packed and bool((skipped[pad] == 0).all())
    assert_close(skipped[~pad], direct[~pad], "real rows, packed vs not", ATOL)
    packed.clear()
    Embedder.from_pretrained(minilm_dir).embed(["a short text", "a much longer text than the first one is"])
    assert packed, "the Embedder no longer packs away padding"


@pytest.mark.parametrize("padding", ["right", "left", "a row with no real token"])
@pytest.mark.parametrize("path", ["fast path", "output_attentions", "use_fast_path=False", "book modules"])
def test_skip_padding_leaves_zeros_at_every_pad_row_on_every_path(minilm, minilm_dir, padding, path):
    """``skip_padding=True`` promises zeros at the [PAD] rows of ``last_hidden_state`` and of every
    ``hidden_states``, whatever the path: packing gives them only for right padding on the fast path,
    so left padding, a row whose mask is all zeros, the written-out attention (``output_attentions``,
    ``use_fast_path=False``) and the book's modules set them. The real rows are those of the same call
    without ``skip_padding`` (1e-5: packing reorders fp32 sums)."""
    tokenizer = BertTokenizer.from_pretrained(minilm_dir)
    texts = ["I love Paris", "I was thirsty, so I drank some water today", "Hi there"]
    batch = tokenizer(texts, padding=True, return_tensors="pt", padding_side="left" if padding == "left" else "right")
    if padding == "a row with no real token":
        batch["input_ids"][2], batch["attention_mask"][2] = tokenizer.pad_token_id, 0
    pad = ~batch["attention_mask"].bool()
    use_fast_path = False if path == "use_fast_path=False" else None  # None: the model's own
    options = {"output_attentions": path == "output_attentions", "use_fast_path": use_fast_path}
    if path == "book modules":
        minilm.use_book_modules()
    try:
        with torch.no_grad():
            skipped = minilm(**batch, **options, output_hidden_states=True, skip_padding=True)
            computed = minilm(**batch, **options, output_hidden_states=True)
    finally:
        minilm.use_book_modules(False)
    for layer, (state, full) in enumerate(zip(skipped.hidden_states, computed.hidden_states)):
        worst = float(state[pad].abs().max())
        assert worst == 0.0, f"{padding}, {path}: hidden state {layer} has |value| {worst:.3g} at a [PAD] row"
        assert_close(state[~pad], full[~pad], f"{padding}, {path}: hidden state {layer}, real rows", ATOL)
    assert torch.equal(skipped.last_hidden_state, skipped.hidden_states[-1])
    # The pooler reads position 0 as computed (with left padding a [PAD] row, as transformers reads it),
    # not the zeroed output row: tanh(bias) alone, the same for every text, before.
    assert_close(skipped.pooler_output, computed.pooler_output, f"{padding}, {path}: pooler_output", ATOL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_a_row_with_no_real_token_differs_between_the_paths_in_float16_only(minilm_dir, dtype):
    """The fast path (the fused kernel) and the book's written-out attention on a batch whose row 0
    has no real token (attention_mask all zeros). Every key of that row is masked: in float32 and
    bfloat16 the dtype's minimum (-3.4e38) swallows every score on both paths (each key weighs the
    same), so the row agrees like the real one (within the dtype's rounding: 1e-5, 0.125). In float16
    the book adds -65504 in float16, where the sum rounds to steps of 32, and the kernel adds it to
    scores it holds in float32, where they survive: the row then attends as if unmasked, and differs
    from the book's (speed/fast_path.py says so). With ``skip_padding=True`` it is zeros on both."""
    tolerance = {torch.float32: ATOL, torch.bfloat16: 0.125, torch.float16: 0.01}[dtype]
    batch = batch_of(minilm_dir, ["I love Paris", "I was thirsty, so I drank some water today"])
    empty = batch["attention_mask"].clone()
    batch["input_ids"][0], empty[0] = 0, 0  # row 0: [PAD] only
    book = BertModel.from_pretrained(minilm_dir, dtype=dtype).use_book_modules()
    fast = BertModel.from_pretrained(minilm_dir, dtype=dtype)
    fast.short_attention = {}  # the fused kernel at every length (this CPU's measured verdict may write short ones out)
    with torch.no_grad():
        written, fused = (model(batch["input_ids"], empty).last_hidden_state for model in (book, fast))
        unmasked = fast(batch["input_ids"], torch.ones_like(empty)).last_hidden_state
        skipped = [model(batch["input_ids"], empty, skip_padding=True).last_hidden_state for model in (book, fast)]
    assert_close(fused[1], written[1], f"{dtype}: the real row, fast vs book", tolerance)
    if dtype == torch.float16:
        assert_close(fused[0], unmasked[0], "float16: the empty row (fast) vs the same row unmasked", tolerance)
        worst = float((fused[0].float() - written[0].float()).abs().max())
        assert worst > 0.5, f"float16's empty row now agrees (max |Δ| {worst:.3g}): update speed/fast_path.py"
    else:
        assert_close(fused[0], written[0], f"{dtype}: the empty row, fast vs book", tolerance)
    assert all(bool((out[0] == 0).all()) for out in skipped), "skip_padding: the empty row is not zeros"
