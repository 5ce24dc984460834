"""``precision auto``: bf16 only where the hardware computes it, detected from the CPU's flags, not guessed."""

from __future__ import annotations

import pytest
import torch

from composer import precision
from composer.training import TrainConfig
from composer.training.run import resolve_precision

X86_WITH_BF16 = """processor\t: 0
vendor_id\t: GenuineIntel
flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512vl avx512_bf16 amx_tile
"""
X86_AVX512_ONLY = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512vl avx512dq\n"
ARM_WITH_BF16 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


def test_cpu_flags_are_read_from_x86_flags_and_arm_features():
    assert {"avx512_bf16", "amx_tile"} <= precision.cpu_flags(X86_WITH_BF16)
    assert "bf16" in precision.cpu_flags(ARM_WITH_BF16)
    assert precision.cpu_flags("") == frozenset()


@pytest.mark.parametrize("cpuinfo, native", [(X86_WITH_BF16, True), (ARM_WITH_BF16, True), (X86_AVX512_ONLY, False)])
def test_native_bf16_needs_the_instruction_not_just_avx512(monkeypatch, cpuinfo, native):
    """AVX-512 without AVX512_BF16 emulates bf16 (slower than fp32): auto must not choose it there."""
    monkeypatch.setattr(precision.platform, "system", lambda: "Linux")
    parse = precision.cpu_flags
    monkeypatch.setattr(precision, "cpu_flags", lambda text=None: parse(cpuinfo))
    precision.cpu_has_native_bf16.cache_clear()
    try:
        assert precision.cpu_has_native_bf16() is native
        assert precision.device_has_native_bf16("cpu") is native
        assert resolve_precision(TrainConfig(device="cpu")) == ("bf16-mixed" if native else "32-true")
    finally:
        precision.cpu_has_native_bf16.cache_clear()


def test_this_machine_agrees_with_its_own_cpuinfo():
    flags = precision.cpu_flags()
    if torch.cuda.is_available() or not flags:
        pytest.skip("needs a Linux CPU-only machine")
    expected = bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})
    assert precision.device_has_native_bf16("cpu") is expected
    assert resolve_precision(TrainConfig()) == ("bf16-mixed" if expected else "32-true")
    assert precision.describe_bf16_support().startswith("CPU with native bf16") is expected


def test_an_explicit_precision_is_kept():
    assert resolve_precision(TrainConfig(precision="32-true")) == "32-true"
    assert resolve_precision(TrainConfig(precision="bf16-mixed", device="cpu")) == "bf16-mixed"


# issue 49, "one name, one meaning": one parser for every spelling of a precision and of a dtype


@pytest.mark.parametrize("spelling, lightning", [("fp32", "32-true"), ("32-true", "32-true"), ("bf16", "bf16-mixed"),
                                                 ("BF16-Mixed", "bf16-mixed"), ("bf16-true", "bf16-true"),
                                                 ("16-mixed", "16-mixed"), ("auto", "auto")])
def test_every_spelling_of_a_precision_means_one_lightning_precision(spelling, lightning):
    assert precision.parse_precision(spelling) == lightning
    assert TrainConfig(precision=spelling).precision == lightning  # what composer train and hybridize take


def test_the_search_keeps_fp32_weights_and_names_precisions_its_own_way():
    allowed = precision.AUTOCAST_PRECISIONS
    assert [precision.short_precision(s, allowed) for s in ("32-true", "bf16-mixed", "fp32", "bf16", "auto")] == [
        "fp32", "bf16", "fp32", "bf16", "auto"]
    with pytest.raises(precision.ConfigError) as err:
        precision.short_precision("bf16-true", allowed)
    assert "bf16-true" not in str(err.value).split("; got")[0]  # not offered where it is refused


@pytest.mark.parametrize("bad", ["fp64", "half", "", "bf16_mixed"])
def test_a_bad_precision_is_one_line_listing_every_spelling(bad):
    with pytest.raises(precision.ConfigError) as err:
        precision.parse_precision(bad)
    text = str(err.value)
    assert "\n" not in text and text.endswith(f"got {bad!r}")
    for spelling in ("auto", "fp32", "bf16 (bf16 autocast, fp32 weights)", "bf16-true", "32-true", "bf16-mixed",
                     "16-mixed"):
        assert spelling in text


@pytest.mark.parametrize("spelling, short", [("fp32", "fp32"), ("float32", "fp32"), ("bfloat16", "bf16"),
                                             ("bf16", "bf16"), ("float16", "fp16"), ("torch.float16", "fp16")])
def test_a_dtype_is_spelt_either_way(spelling, short):
    assert precision.parse_dtype(spelling) == short
    assert precision.torch_dtype(spelling) == {"fp32": torch.float32, "bf16": torch.bfloat16,
                                               "fp16": torch.float16}[short]


def test_a_bad_dtype_is_one_line_listing_both_spellings():
    with pytest.raises(precision.ConfigError, match=r"^--precision must be fp32, bf16, fp16 \(or float32, bfloat16, "
                                                    r"float16\); got 'int8'$"):
        precision.parse_dtype("int8")


def test_every_device_spelling_means_one_torch_device_and_one_lacking_is_one_line(monkeypatch):
    """One vocabulary for every command's --device (issue 69), checked against what this machine has: here a
    machine with one CUDA GPU and no MPS."""
    from composer.errors import ConfigError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert precision.resolve_device("auto") == precision.resolve_device("gpu") == torch.device("cuda")
    assert precision.resolve_device("cuda:0") == torch.device("cuda:0")
    assert precision.resolve_device(" CPU ") == torch.device("cpu")
    refusals = {"cuda:1": "--device cuda:1, but this machine has 1 CUDA GPU (cuda:0 to cuda:0); pick one of them",
                "mps": "--device mps, but MPS (Apple's GPU) is not available on this machine; use --device cpu",
                "tpu": "--device must be auto, cpu, cuda (or gpu), cuda:N or mps; got 'tpu'",
                "meta": "--device must be auto, cpu, cuda (or gpu), cuda:N or mps; got 'meta'"}
    for name, message in refusals.items():
        with pytest.raises(ConfigError) as refused:
            precision.resolve_device(name)
        assert message in str(refused.value) and "\n" not in str(refused.value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert precision.resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ConfigError, match="--device gpu, but CUDA has no GPU on this machine; use --device cpu"):
        precision.resolve_device("gpu")


def test_the_cpus_free_memory_is_what_linux_calls_available():
    from pathlib import Path

    meminfo = Path("/proc/meminfo")
    if not meminfo.is_file():
        assert precision.available_memory_bytes("cpu") is None
        return
    fields = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in meminfo.read_text().splitlines()}
    free = precision.available_memory_bytes("cpu")
    limit = Path("/sys/fs/cgroup/memory.max")
    if limit.is_file() and limit.read_text().strip() != "max":  # a container's limit may be lower
        assert 0 <= free <= fields["MemAvailable"] + (256 << 20)
    else:  # free memory plus the caches the kernel drops, not MemFree (which counts the caches as used)
        assert abs(free - fields["MemAvailable"]) < 256 << 20, (free, fields["MemAvailable"], fields["MemFree"])
    assert precision.available_memory_bytes("mps") is None
