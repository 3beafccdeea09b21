"""What this machine's CPU computes natively, read without importing torch (a new run's settings are resolved before
torch is imported: a3c/run/resolve.py).

bfloat16: oneDNN runs ``--bf16``'s convolutions and dense layers on bfloat16 instructions where the CPU has them
(AVX-512 BF16 on AMD Zen 4 and Intel Cooper Lake on; AMX on Intel Sapphire Rapids on) and emulates them elsewhere,
where float32 is faster. So a preset's ``bf16 = true`` holds only on such CPUs (a3c.spec.presets.resolve_config); a
``--bf16`` typed by the user is left as given.
"""

from __future__ import annotations

import functools
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})  # the kernel's names for the instructions (torch's too)


@functools.cache
def native_bf16(cpuinfo: Path = CPUINFO) -> bool:
    """Whether the CPU has bfloat16 instructions, from the flags the Linux kernel lists in /proc/cpuinfo. False
    where there is no such file (macOS, Windows: their builds of oneDNN are not the measured path) or it lists
    neither."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return not BF16_FLAGS.isdisjoint(line.partition(":")[2].split())
    return False
