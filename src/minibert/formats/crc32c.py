"""CRC32C (Castagnoli), the checksum TensorFlow puts on every block and tensor of a checkpoint.

Python's standard library has CRC32 (zlib) but not CRC32C. This one is plain numpy: a byte table
(slicing-by-4, four bytes a step) for short inputs, and for long ones many lanes run side by side
and are combined through the linear map of "run the register over 2**k zero bytes" (GF(2)
algebra: a CRC is linear in its input). TensorFlow stores CRCs *masked*: see ``mask``/``unmask``.
"""

from __future__ import annotations

import functools

import numpy as np

CRC_MASK_DELTA = 0xA282EAD8

_POLY = 0x82F63B78  # CRC32C (Castagnoli), bit-reflected


def _byte_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLY), table >> 1).astype(np.uint32)
    return table


_T0 = _byte_table()
# Slicing-by-4: _T[k][b] is the effect of byte b followed by k zero bytes, so four bytes go per step.
_T = [_T0]
for _ in range(3):
    _T.append((_T[-1] >> np.uint32(8)) ^ _T0[_T[-1] & np.uint32(0xFF)])


def _apply_linear_map(images: list[int], value: int) -> int:
    """Apply a linear map on 32-bit values, given by the images of the 32 unit vectors."""
    out = 0
    for bit in range(32):
        if value >> bit & 1:
            out ^= images[bit]
    return out


@functools.cache
def _zero_bytes_map(log2_count: int) -> tuple[int, ...]:
    """The linear map 'run the CRC register over 2**log2_count zero bytes' (as 32 unit images)."""
    if log2_count == 0:
        return tuple(int(_T0[(1 << bit) & 0xFF]) ^ ((1 << bit) >> 8) for bit in range(32))
    half = _zero_bytes_map(log2_count - 1)
    return tuple(_apply_linear_map(half, image) for image in half)  # twice the half map


@functools.cache
def _zero_bytes_tables(log2_count: int) -> np.ndarray:
    """The same map as four 256-entry tables, one per byte of the register, for numpy."""
    images = _zero_bytes_map(log2_count)
    tables = np.zeros((4, 256), dtype=np.uint32)
    for byte in range(4):
        for bit in range(8):
            tables[byte, (np.arange(256) >> bit) & 1 == 1] ^= np.uint32(images[8 * byte + bit])
    return tables


def _run_lanes(words: np.ndarray) -> np.ndarray:
    """CRC registers (started from 0) of each row of ``words`` (lanes, words per lane), all lanes
    advancing together four bytes per step. Columns are copied out 64 at a time, so each step reads
    contiguous memory."""
    lanes, columns = words.shape
    register = np.zeros(lanes, dtype=np.uint32)
    index = np.empty(lanes, dtype=np.uint32)
    t0, t1, t2, t3 = _T
    for first in range(0, columns, 64):
        for column in np.ascontiguousarray(words[:, first : first + 64].T):  # (64, lanes)
            register ^= column
            np.bitwise_and(register, 0xFF, out=index)
            out = t3.take(index)
            np.right_shift(register, 8, out=index)
            out ^= t2.take(np.bitwise_and(index, 0xFF, out=index))
            np.right_shift(register, 16, out=index)
            out ^= t1.take(np.bitwise_and(index, 0xFF, out=index))
            out ^= t0.take(np.right_shift(register, 24, out=index))
            register = out
    return register


def crc32c(data) -> int:
    """CRC32C of ``data`` (bytes-like), as TensorFlow computes it.

    >>> hex(crc32c(b"123456789"))   # the standard check value
    '0xe3069283'

    A byte-at-a-time loop in Python would take minutes for bert-base's 440 MB, so the bytes are cut
    into up to 65,536 streams (lanes) of equal length, processed side by side with numpy
    (slicing-by-4: four bytes per step), and the lanes' CRCs are then combined pairwise: the CRC
    register is linear over GF(2), so the CRC of A followed by B is (A's register run over len(B)
    zero bytes) XOR (B's register). Zero bytes in front of the data do not change a register
    started from 0, which pads the first lane (and the lane count, to a power of two); the
    standard initial value 0xFFFFFFFF is run over the data's length at the end.
    """
    data = np.frombuffer(data, dtype=np.uint8)
    length = len(data)
    log2_step = 2  # bytes per lane: a power of two, so the combining maps are few and cached
    while -(-length >> log2_step) > 65536:
        log2_step += 1
    step = 1 << log2_step
    head = length % step  # the first lane, zero-padded in front; the others are views of the data
    registers = [np.zeros(0, dtype=np.uint32)]
    if head:
        first_lane = np.zeros(step, dtype=np.uint8)
        first_lane[step - head :] = data[:head]
        registers.append(_run_lanes(first_lane.view("<u4").reshape(1, -1)))
    if length - head:
        registers.append(_run_lanes(data[head:].view("<u4").reshape(-1, step // 4)))
    register = np.concatenate(registers)
    lanes = 1 << max(0, (len(register) - 1).bit_length())
    register = np.concatenate([np.zeros(lanes - len(register), dtype=np.uint32), register])  # zero lanes in front
    level = log2_step
    while len(register) > 1:  # combine neighbouring lanes: (A run over len(B) zero bytes) ^ B
        tables = _zero_bytes_tables(level)
        left = register[0::2]
        shifted = tables[0][left & 0xFF] ^ tables[1][(left >> 8) & 0xFF]
        shifted ^= tables[2][(left >> 16) & 0xFF] ^ tables[3][left >> 24]
        register = shifted ^ register[1::2]
        level += 1
    initial = 0xFFFFFFFF
    for bit in range(length.bit_length()):  # 0xFFFFFFFF run over `length` zero bytes
        if length >> bit & 1:
            initial = _apply_linear_map(_zero_bytes_map(bit), initial)
    value = int(register[0]) if len(register) else 0
    return (value ^ initial ^ 0xFFFFFFFF) & 0xFFFFFFFF


def mask(crc: int) -> int:
    """TensorFlow stores CRCs masked (a CRC of data that contains CRCs is otherwise weak)."""
    return ((crc >> 15 | crc << 17) + CRC_MASK_DELTA) & 0xFFFFFFFF


def unmask(masked: int) -> int:
    rotated = (masked - CRC_MASK_DELTA) & 0xFFFFFFFF
    return (rotated >> 17 | rotated << 15) & 0xFFFFFFFF


@functools.cache
def _initial_term(length: int) -> int:
    """The standard initial value 0xFFFFFFFF run over ``length`` zero bytes, XOR the final 0xFFFFFFFF:
    what a register started from 0 must be XORed with to give the CRC32C of ``length`` bytes."""
    initial = 0xFFFFFFFF
    for bit in range(length.bit_length()):
        if length >> bit & 1:
            initial = _apply_linear_map(_zero_bytes_map(bit), initial)
    return initial ^ 0xFFFFFFFF


# What batching costs and saves (measured with numpy on an AVX2 core): one step of ``_run_lanes`` costs
# ~10 us whatever the lanes, one ``crc32c`` call ~100 us. A group of chunks padded to W bytes takes
# W/4 steps together, or one call each: together pays when the group has more than ~W/40 chunks.
LANES_PER_BYTE_OF_WIDTH = 1 / 32


def crc32c_many(chunks) -> np.ndarray:
    """CRC32C of each of many byte strings at once (uint32 array), as ``crc32c`` gives them.

    One numpy call per string costs ~0.1 ms; a TFRecord file holds two CRCs per record and many
    thousands of records. So strings of similar length go together, each as one lane: zero-padded in
    front to the group's longest (zero bytes in front do not move a register started from 0), all
    lanes run side by side four bytes a step, and each register is XORed with its length's initial
    term. A group spans lengths from L to 2L + 64, so padding at most doubles its bytes; a group too
    small to pay for its steps (a long record among short ones) goes through ``crc32c`` one string
    at a time, which is linear in the length. Time and memory follow the bytes given, whatever the
    mix of lengths.

    >>> chunks = [b"123456789", b"", b"a", bytes(70_000)]
    >>> [int(value) for value in crc32c_many(chunks)] == [crc32c(chunk) for chunk in chunks]
    True
    """
    lengths = np.array([len(chunk) for chunk in chunks], dtype=np.int64)
    out = np.zeros(len(lengths), dtype=np.uint32)
    order = np.argsort(lengths, kind="stable")
    ordered = lengths[order]
    start = 0
    while start < len(order):  # one group per doubling of the length: at most ~log2(longest) groups
        end = int(np.searchsorted(ordered, 2 * ordered[start] + 64, side="right"))
        rows = order[start:end]
        width = -(-max(int(ordered[end - 1]), 1) // 4) * 4
        if len(rows) >= width * LANES_PER_BYTE_OF_WIDTH:
            out[rows] = _crc_of_group([chunks[row] for row in rows], width)
        else:
            out[rows] = [crc32c(chunks[row]) for row in rows]
        start = end
    return out


def _crc_of_group(chunks: list, width: int) -> np.ndarray:
    """CRC32C of chunks of at most ``width`` bytes (a multiple of 4), as lanes side by side."""
    padded = np.zeros((len(chunks), width), dtype=np.uint8)
    for row, chunk in enumerate(chunks):
        if len(chunk):
            padded[row, width - len(chunk) :] = np.frombuffer(chunk, dtype=np.uint8)
    registers = _run_lanes(padded.view("<u4"))
    return registers ^ np.array([_initial_term(len(chunk)) for chunk in chunks], dtype=np.uint32)
