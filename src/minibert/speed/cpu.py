"""The CPU at hand, as the measurements name it: its model and family, and its instruction-set flags
(from ``/proc/cpuinfo``; elsewhere the platform's name and no flags).

    >>> cpu_name()                                                   # doctest: +SKIP
    'AMD EPYC Processor (with IBPB) (family 23, model 1)'
    >>> has_native_bf16()                                            # doctest: +SKIP
    False

Benchmarks name the machine with ``describe_machine()`` (scripts/bench*.py).
"""

from __future__ import annotations

import hashlib
import platform


def cpu_name() -> str:
    """The CPU's model name, family and model numbers: "AMD EPYC (family 25, model 1)"."""
    info = read_cpuinfo()
    name = info.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in info:
        name += f" (family {info['cpu family']}, model {info.get('model', '?')})"
    return name


def cpu_flags() -> set[str]:
    return set(read_cpuinfo().get("flags", "").split())


def has_native_bf16() -> bool:
    """Whether the CPU multiplies bfloat16 in hardware (AVX-512 BF16 or AMX); elsewhere torch
    emulates it, slower than float32."""
    return bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})


def describe_machine() -> str:
    """One line for a benchmark's header: the CPU, its cores and the flags that decide GEMM speed,
    torch and its threads, Python."""
    import os

    import torch

    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
    flags = " ".join(flag for flag in wanted if flag in cpu_flags())
    return (
        f"{cpu_name()}; {os.cpu_count()} cores; flags: {flags}; torch {torch.__version__} "
        f"({torch.get_num_threads()} threads); Python {platform.python_version()}"
    )


def cpu_flags_digest() -> str:
    """The flags in a few characters, for a cache key: two CPUs of one name can differ by AVX-512."""
    return hashlib.sha256(" ".join(sorted(cpu_flags())).encode()).hexdigest()[:12]


def read_cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    info = {}
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    break  # the first processor is enough
                name, _, value = line.partition(":")
                info[name.strip()] = value.strip()
    except OSError:
        pass
    return info
