"""``composer.costmodel.predict``: step times from work and constants, and what ``composer info --device`` shows."""

from __future__ import annotations

import pytest

from composer.costmodel import parse_table, predict, predict_decode, predict_train, serving_summary, step_work
from composer.errors import ConfigError
from composer.presets import get_preset


def arch(pattern: str, preset: str = "demo-4m"):
    return get_preset(preset).arch.with_pattern(pattern)


def test_a_step_is_the_roofline_plus_ops_summed_over_units(table, box):
    a = arch("SAMM")
    expected = sum(u.layers * (max(u.flops / (box.peak * 0.5), u.bytes / (box.bandwidth * 0.5)) + 10 * box.op_cost)
                   for u in step_work(a, "decode", 2, 300, 4))
    prediction = predict(a, "box", "decode", batch=2, length=300, table=table)
    assert prediction.seconds == pytest.approx(expected)
    assert prediction.ms_per_token == pytest.approx(1e3 * expected) and prediction.tokens_per_s == 2 / expected
    assert {name.split(".")[1] for name in prediction.constants} == {"peak_flops", "bandwidth", "efficiency",
                                                                     "op_cost_s"}


def test_the_ops_of_a_chunked_scan_grow_with_its_chunks(box):
    table = box.table(per_chunk=5)
    units = {u.key: u for u in predict(arch("SM"), "box", "prefill", batch=1, length=64 * 6, table=table).units}
    assert units["S"].ops == 10 + 5 * (6 - 1) and units["M"].ops == 10


@pytest.mark.parametrize("device", ["box", "cpu", "h200"])
def test_decode_grows_with_the_context_for_attention_and_not_for_fixed_state(table, device):
    table = table if device == "box" else None

    def ms(pattern, context):
        return predict_decode(arch(pattern, "llama-3.2-1b"), device, context=context, batch=8, table=table).ms_per_token

    assert ms("(AM)x4", 256) < ms("(AM)x4", 4096) < ms("(AM)x4", 32768)
    assert ms("(SM)x2(DM)x2", 256) == ms("(SM)x2(DM)x2", 4096) == ms("(SM)x2(DM)x2", 32768)


def test_more_bandwidth_serves_a_memory_bound_decode_faster():
    a = arch("(AM)x16", "llama-3.2-1b")
    h100, h200 = (predict_decode(a, d, context=4096, batch=64) for d in ("h100", "h200"))
    assert h200.ms_per_token < h100.ms_per_token


def test_a_larger_training_batch_amortises_the_ops(table):
    small, large = (predict_train(arch("AMSD"), "box", batch=b, seq_len=64, table=table) for b in (1, 64))
    assert large.tokens_per_s > small.tokens_per_s


def test_the_serving_summary_caps_the_context_and_lists_its_sources(table):
    summary = serving_summary(arch("AMSD"), "box", table=table)  # demo-4m: max_seq_len 2048
    # the step after 2,047 tokens writes the last position (the decode point the cost limits and growth to equal
    # cost read, composer.costmodel.decode_point)
    assert summary["context"] == 2047 and summary["device"] == "box"
    assert set(summary["decode_ms_per_token"]) == set(summary["prefill_tokens_per_s"]) == {"1", "64"}
    assert summary["decode_ms_per_token"]["64"] > summary["decode_ms_per_token"]["1"] > 0
    assert (summary["train_batch"], summary["train_seq_len"]) == (4, 64)
    assert {c["source"] for c in summary["constants"].values()} <= set(summary["sources"])


def test_a_key_the_device_has_no_constant_for_is_one_line(raw_table):
    del raw_table["devices"]["box"]["efficiency"]["decode"]["E"]
    with pytest.raises(ConfigError, match="no decode efficiency for 'E'"):
        predict_decode(arch("EM"), "box", context=64, table=parse_table(raw_table))


def test_on_a_device_that_slices_the_batch_s_runs_its_scan_ops_once_a_slice(raw_table):
    """S's ops grow with the slices its CPU kernels run at a larger batch (M's do not); a device that runs other
    kernels (a GPU: ``batch_slices`` false) counts one slice whatever the batch."""
    raw_table["counts"]["per_key"]["S"]["train"]["per_slice"] = {
        "ssd_scan": {"ops": [7, 7, 7], "kernels": [7, 7, 7]}, "short_conv": {"ops": [3, 3, 3], "kernels": [3, 3, 3]}}
    a = arch("SM")

    def ops(batch, slicing):
        raw_table["devices"]["box"]["batch_slices"] = slicing
        units = predict(a, "box", "train", batch=batch, length=128, table=parse_table(raw_table)).units
        return {u.key: u.ops for u in units if u.key in "SM"}, {u.key: u for u in step_work(a, "train", batch, 128, 4)}

    (one, _), (many, work) = ops(1, True), ops(16, True)
    slices = dict(work["S"].slices)
    assert one == {"S": 10, "M": 10}
    assert many["S"] == 10 + 7 * (slices["ssd_scan"] - 1) + 3 * (slices["short_conv"] - 1) > 10 and many["M"] == 10
    assert ops(16, False)[0] == one


def test_activation_passes_add_memory_time_that_grows_with_the_width_not_its_square(raw_table):
    """A device with fitted activation passes charges each layer ``passes x tokens x d_model x bytes`` of memory
    traffic on top of its roofline; one without (a GPU) charges none."""
    a, wide = arch("SM"), arch("SM", "demo-4m:d384")
    plain = parse_table(raw_table)
    raw_table["devices"]["box"]["activation_passes"] = {"train": {"S": {"value": 6.0, "source": "test"}}}
    table = parse_table(raw_table)

    def extra(model):
        with_passes = predict(model, "box", "train", batch=4, length=128, table=table)
        without = predict(model, "box", "train", batch=4, length=128, table=plain)
        assert "box.activation_passes.train.S" in with_passes.constants
        return with_passes.seconds - without.seconds

    assert extra(a) == pytest.approx(6.0 * 4 * 128 * a.d_model * 4 / 1e10)  # one S layer, fp32, the box's bandwidth
    assert extra(wide) == pytest.approx(extra(a) * 2)
    assert predict(a, "box", "decode", batch=4, length=128, table=table).seconds == pytest.approx(
        predict(a, "box", "decode", batch=4, length=128, table=plain).seconds)  # a decode step: none
