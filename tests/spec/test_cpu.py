"""a3c.spec.cpu: bfloat16 instructions read from /proc/cpuinfo's flags, without torch; where torch can tell, the
same answer as torch's own CPU probe."""

from __future__ import annotations

import sys

import pytest

from a3c.spec.cpu import CPUINFO, native_bf16


@pytest.mark.parametrize(
    ("flags", "native"),
    [
        ("fpu sse2 avx2 avx512f avx512bw avx512_vnni", False),  # AVX-512 without BF16: oneDNN emulates bfloat16
        ("fpu avx2 avx512f avx512_bf16 avx512_vnni", True),  # Zen 4, Cooper Lake
        ("fpu avx512f amx_bf16 amx_tile amx_int8", True),  # Sapphire Rapids
        ("fpu avx512f avx512_bf16x", False),  # a whole flag, not a prefix
    ],
)
def test_the_flags_line_decides(tmp_path, flags, native):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    assert native_bf16(cpuinfo) is native


def test_no_cpuinfo_or_no_flags_line_means_float32(tmp_path):
    assert native_bf16(tmp_path / "missing") is False
    (tmp_path / "arm").write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")
    assert native_bf16(tmp_path / "arm") is False


@pytest.mark.skipif(not (sys.platform == "linux" and CPUINFO.exists()), reason="reads the Linux kernel's CPU flags")
def test_this_machines_answer_is_torchs():
    torch = pytest.importorskip("torch")
    capabilities = getattr(getattr(torch, "cpu", None), "get_capabilities", None)
    if capabilities is None:
        pytest.skip("this torch has no torch.cpu.get_capabilities")
    found = capabilities()
    assert native_bf16() is bool(found.get("avx512_bf16") or found.get("amx_bf16"))
