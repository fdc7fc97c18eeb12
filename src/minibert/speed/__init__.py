"""Everything that makes the book fast and is not the book: a reader learning BERT can skip this folder.

model.py computes BERT as the paper writes it. Speed enters it at two named seams, and nowhere else;
each computes the same numbers as the book's plain path, up to the order of float sums
(tests/test_speed_book_modules.py compares both with transformers on real weights):

* ``layout`` in ``SelfAttention.forward``: the fast path (fast_path.py): the fused attention kernel,
  the real tokens packed end to end when a caller asks (``skip_padding``), length groups, Q, K and V
  as one product when training on a GPU, and there packed sequences attending as they lie (varlen.py).
* ``speed_up`` at the end of ``from_pretrained`` (seam.py): the linear layers' GEMM library chosen
  for this CPU, and int8 when asked for by name. ``model.use_book_modules()`` takes it all out.

The room, read in that order:

    seam.py               the one place where a loaded model gets its speed; use_book_modules()
    fast_path.py          FastLayout: packing, length groups, the fused kernel or attention written out
    packing.py            where the real tokens live: Packing (P, H), AttentionGroup; computed where the mask is
    varlen.py             a GPU's variable-length kernels: packed sequences attend with no padding at all
    gemm.py               which GEMM library multiplies the projections: measured on this CPU, cached
    packed_linear.py      the GEMM backends themselves: PackedLinear (oneDNN, prepacked), use_backend
    attention_threshold.py  up to which length attention is faster written out than fused
    bf16.py               dtype="fastest": is bfloat16 measured faster than float32 here?
    int8.py               dtype="int8": Int8Linear, the int8 projections (FBGEMM or oneDNN)
    int8_steps.py         an activation as 8-bit steps, by torch's rule (oneDNN's int8 layers' input)
    int8_check.py         int8 checked against float32 at load (cosine floor), its library measured, what it buys
    int8_twin.py          an int8 model's float32 twin, read again from the files it was loaded from
    measure.py            THE measurement rule: best_times, and time_against_float32 (the six projections)
    cache.py              THE cache of verdicts: one file, one key function, one version
    cpu.py                the CPU's name and flags (/proc/cpuinfo), and their digest for the cache key
    malloc.py             memory settings the command applies: glibc malloc, oneDNN's cache (and int8's heap trim)

Every question "is X faster than float32 here?" (bf16 inference, int8, ``pretrain --bf16``) is asked
one way: ``measure.time_against_float32`` times one encoder layer's six projections (4 × H→H, H→F,
F→H) both ways, float32 on the faster of the GEMM backends a loaded model may run on
(``measure.gemm_backends``), and the verdict goes to ``cache.write_cache`` under ``cache.cache_key(...)``.

This ``__init__`` imports nothing heavy (no torch): the command's parser reads ``BACKENDS`` from it.
"""

# The GEMM backends a model's projections run on (packed_linear.py runs each; gemm.py chooses):
# "mkl" is F.linear, as nn.Linear calls it (the book's path); the CLI's --gemm offers these and "auto".
BACKENDS = ("mkl", "onednn", "onednn-fused")
