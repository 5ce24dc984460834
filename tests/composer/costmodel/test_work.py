"""``composer.costmodel.work``: a step's FLOPs and bytes per unit, from the primitives' own accounting."""

from __future__ import annotations

import pytest

from composer.accounting import analyze
from composer.costmodel import OPTIMIZER_BYTES_PER_PARAM, step_work
from composer.errors import ConfigError
from composer.presets import get_preset
from primitives.attention import GroupedQueryAttention


def arch(pattern: str, preset: str = "demo-4m"):
    return get_preset(preset).arch.with_pattern(pattern)


def by_key(units, count_phase=None):
    return {u.key if u.key != "optimizer" else f"optimizer:{u.count_key}": u for u in units
            if count_phase is None or u.count_phase == count_phase or u.key == "optimizer"}


def test_training_flops_are_the_accountings():
    a = arch("SADDDDSAMW")
    units = step_work(a, "train", batch=4, length=128, dtype_bytes=4)
    flops = sum(u.layers * u.flops for u in units)
    assert flops == pytest.approx(analyze(a, seq_len=128).flops_per_token * 4 * 128)
    params = sum(u.layers * u.bytes for u in units if u.key == "optimizer") / OPTIMIZER_BYTES_PER_PARAM
    assert params == analyze(a).params  # the optimizer steps every parameter once
    assert {u.key for u in units} == {"S", "A", "D", "M", "W", "head", "embedding", "optimizer"}


def test_a_tied_embedding_gradient_is_four_passes_an_untied_one_one():
    def gradient_bytes(a):
        return next(u.bytes for u in step_work(a, "train", 1, 64, 2) if u.key == "embedding")

    tied = arch("AM")
    assert gradient_bytes(tied) == 4 * tied.vocab_size * tied.d_model * 4  # fp32 gradients
    assert gradient_bytes(tied.replace(tie_embeddings=False)) == gradient_bytes(tied) / 4


def test_a_parallel_layer_is_costed_as_its_branches():
    units = by_key(step_work(arch("[AS]M"), "decode", batch=1, length=512, dtype_bytes=2))
    assert set(units) == {"A", "S", "M", "head"} and units["A"].layers == units["S"].layers == 1


def test_decode_bytes_grow_with_the_context_for_attention_only():
    def bytes_at(a, context):
        return {u.key: u.bytes for u in step_work(a, "decode", 1, context, 2)}

    short, long = bytes_at(arch("ASDWM"), 256), bytes_at(arch("ASDWM"), 2048)
    assert long["A"] - short["A"] == (2048 - 256) * 2 * 2 * 32 * 2  # K and V, 2 KV heads of 32, bf16
    assert long["W"] - short["W"] == long["A"] - short["A"]  # demo-4m: W's window (4096) is not full yet
    assert long["S"] == short["S"] and long["D"] == short["D"] and long["M"] == short["M"]
    windowed = arch("WM", "search-1m")  # a window of 64 tokens
    assert bytes_at(windowed, 128)["W"] == bytes_at(windowed, 1024)["W"]


def test_a_batch_reads_the_weights_once_and_each_sequences_cache():
    a = arch("AM")
    one, many = (by_key(step_work(a, "decode", b, 1024, 2)) for b in (1, 8))
    assert many["M"].bytes == one["M"].bytes  # weights only
    attention = get_preset("demo-4m").arch.primitive_configs()["A"]
    per_sequence = GroupedQueryAttention.decode_cache_bytes(attention, 1024, 2)
    assert per_sequence == (1024 + 1) * 2 * 2 * 32 * 2  # the window read, the new token written
    assert many["A"].bytes - one["A"].bytes == 7 * per_sequence
    assert many["head"].flops == 8 * one["head"].flops and many["head"].bytes == one["head"].bytes


def test_moe_decode_reads_more_experts_at_a_larger_batch():
    e = {b: by_key(step_work(arch("EM"), "decode", b, 64, 2))["E"].bytes for b in (1, 4, 256)}
    assert e[1] < e[4] < e[256]
    full = by_key(step_work(arch("EM"), "train", 4, 64, 2))["E"].bytes / 3  # a training step touches them all
    assert e[256] == pytest.approx(full, rel=1e-6)


def test_prefill_of_a_chunked_scan_counts_its_chunks():
    units = by_key(step_work(arch("SDAM"), "prefill", 1, 300, 4))
    assert units["S"].chunks == units["D"].chunks == 5 and units["A"].chunks == units["M"].chunks == 1
    assert by_key(step_work(arch("SDAM"), "decode", 1, 300, 4))["S"].chunks == 1


@pytest.mark.parametrize("phase, batch, length, message", [
    ("serve", 1, 8, "unknown phase 'serve'"), ("train", 0, 8, "batch must be a positive integer"),
    ("decode", 1, -1, "length must be a positive integer"),
])
def test_bad_input_is_one_line(phase, batch, length, message):
    with pytest.raises(ConfigError, match=message):
        step_work(arch("AM"), phase, batch, length, 2)


def test_s_and_d_slices_follow_the_cpu_kernels_rules():
    """The slices a step's S and D layers are counted at are those their CPU kernels run: the conv's by its
    input's bytes (bf16 activations: half as many slices), the scan's by its fp32 score blocks."""
    from primitives.mamba2 import cpu_scan_slices
    from primitives.short_conv import cpu_batch_slices

    a = arch("SDAM")
    configs = a.primitive_configs()
    s, d = configs["S"], configs["D"]
    fp32 = by_key(step_work(a, "train", 16, 128, 4))
    assert dict(fp32["S"].slices) == {"short_conv": cpu_batch_slices(16, 128, s.conv_dim, 4),
                                      "ssd_scan": cpu_scan_slices(16, 128, s.n_heads, s.chunk_size)}
    assert dict(fp32["D"].slices) == {"short_conv": cpu_batch_slices(16, 128, d.conv_dim, 4)}
    assert fp32["A"].slices == fp32["M"].slices == ()
    assert dict(fp32["S"].slices)["ssd_scan"] > 1 and dict(fp32["D"].slices)["short_conv"] > 1  # demo-4m, 16 x 128
    bf16 = by_key(step_work(a, "train", 16, 128, 4, activation_bytes=2))
    assert dict(bf16["S"].slices)["short_conv"] < dict(fp32["S"].slices)["short_conv"]
    assert dict(bf16["S"].slices)["ssd_scan"] == dict(fp32["S"].slices)["ssd_scan"]
    assert by_key(step_work(a, "decode", 16, 128, 4))["S"].slices == ()
    assert all(n == 1 for _, n in by_key(step_work(a, "train", 1, 128, 4))["S"].slices)


def test_the_slice_rules_are_the_kernels_own(monkeypatch):
    """Counting the slices the kernels actually run: a rule that drifted from its kernel fails here."""
    import torch

    import primitives.mamba2 as mamba2
    import primitives.short_conv as short_conv

    calls = {"scan": 0, "taps": 0}
    scan, taps = mamba2._ssd_chunked, short_conv._taps

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(mamba2, "_ssd_chunked", counted("scan", scan))
    monkeypatch.setattr(short_conv, "_taps", counted("taps", taps))
    batch, seq, heads, head_dim, d_state, chunk = 24, 192, 8, 16, 16, 64
    x = torch.randn(batch, seq, heads, head_dim)
    dt = torch.rand(batch, seq, heads)
    bc = torch.randn(batch, seq, 1, d_state)
    mamba2.ssd_chunked(x, dt, -torch.rand(heads), bc, bc, chunk)
    assert calls["scan"] == mamba2.cpu_scan_slices(batch, seq, heads, chunk) > 1
    for dtype in (torch.float32, torch.bfloat16):
        calls["taps"] = 0
        channels = 384
        short_conv.causal_depthwise_conv1d(torch.randn(batch, seq, channels, dtype=dtype),
                                           torch.randn(channels, 1, 4, dtype=dtype))
        itemsize = torch.empty((), dtype=dtype).element_size()
        assert calls["taps"] == short_conv.cpu_batch_slices(batch, seq, channels, itemsize) > 1
