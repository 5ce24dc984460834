"""``composer.costmodel.table``: the one table of constants, where every figure names its source."""

from __future__ import annotations

import pytest

from composer.costmodel import Counts, load_table, parse_table
from composer.costmodel.table import SOURCE_KINDS
from composer.errors import ConfigError


def test_the_shipped_table_names_a_known_source_for_every_constant():
    table = load_table()
    assert {"cpu", "h100", "h200"} <= set(table.devices)
    for device in table.devices.values():
        constants = [device.peak_flops, device.bandwidth, *device.op_cost_s.values()]
        constants += [c for keys in device.efficiency.values() for c in keys.values()]
        for constant in constants:
            source = table.sources[constant.source]
            assert source["kind"] in SOURCE_KINDS
            assert source.get("note") or source.get("command"), constant.source  # says where it came from
        efficiencies = [c.value for keys in device.efficiency.values() for c in keys.values()]
        assert min(efficiencies) > 0
        if device.name != "cpu":  # a datasheet peak is a bound; the CPU's is a measured GEMM, which a layer can beat
            assert max(efficiencies) <= 1
    assert table.counts_source in table.sources


def test_gpu_peaks_are_the_datasheets():
    table = load_table()
    for name, bandwidth in (("h100", 3.35e12), ("h200", 4.8e12)):
        device = table.device(name)
        assert device.peak_flops.value == pytest.approx(989.4e12) and device.bandwidth.value == bandwidth
        assert table.sources[device.peak_flops.source]["kind"] == "datasheet"


def test_an_unknown_device_names_the_choices(table):
    with pytest.raises(ConfigError, match=r"unknown device 'tpu'; choose one of: box"):
        table.device("tpu")


@pytest.mark.parametrize("edit, message", [
    (lambda raw: raw["devices"]["box"].update(peak_flops={"value": 1.0, "source": "nowhere"}), "names source"),
    (lambda raw: raw["devices"]["box"]["efficiency"]["train"].update(A={"value": 0, "source": "test"}), "> 0"),
    (lambda raw: raw["devices"]["box"]["efficiency"]["train"].update(A=0.5), "must be"),
    (lambda raw: raw["sources"]["test"].update(kind="guessed"), "kind 'guessed'"),
    (lambda raw: raw["devices"]["box"].update(precision="int3"), "precision must be one of"),
])
def test_a_constant_without_a_known_source_or_value_is_refused(raw_table, edit, message):
    edit(raw_table)
    with pytest.raises(ConfigError, match=message):
        parse_table(raw_table)


def test_counts_interpolate_chunks_linearly_past_two():
    counts = Counts((10.0, 20.0, 30.0))
    assert [counts.at(n) for n in (1, 2, 3, 4, 8)] == [10.0, 20.0, 25.0, 30.0, 50.0]


def test_each_further_batch_slice_adds_its_kernels_ops():
    counts = Counts((10.0, 20.0, 30.0), {"scan": (4.0, 6.0, 8.0), "conv": (1.0, 1.0, 1.0)})
    assert counts.at(2) == counts.at(2, [("scan", 1), ("conv", 1)]) == 20.0  # one slice: what was measured
    assert counts.at(2, [("scan", 4)]) == 20.0 + 3 * 6.0
    assert counts.at(4, [("scan", 3), ("conv", 5), ("other", 9)]) == 30.0 + 2 * 8.0 + 4 * 1.0  # unknown: nothing


def test_per_slice_counts_and_the_training_precision_are_read_from_the_table(raw_table):
    raw_table["counts"]["per_key"]["S"]["train"]["per_slice"] = {"ssd_scan": {"ops": [1, 2, 3], "kernels": [0, 1, 1]}}
    raw_table["devices"]["box"].update(train_precision="bf16", batch_slices=True)
    table = parse_table(raw_table)
    assert table.counts_of("S", "train", "ops").per_slice == {"ssd_scan": (1.0, 2.0, 3.0)}
    assert table.counts_of("S", "train", "kernels").at(4, [("ssd_scan", 2)]) == table.counts_of(
        "S", "train", "kernels").at(4) + 1
    box = table.device("box")
    assert box.batch_slices and box.activation_bytes("train") == 2 and box.activation_bytes("decode") == 4
    raw_table["devices"]["box"]["train_precision"] = "int3"
    with pytest.raises(ConfigError, match="train_precision must be one of"):
        parse_table(raw_table)


def test_the_constants_digest_moves_with_the_devices_constants_only(raw_table):
    import copy

    from composer.costmodel.table import constants_digest

    raw_table["devices"]["other"] = copy.deepcopy(raw_table["devices"]["box"])
    before = constants_digest(raw_table, "box")
    raw_table["devices"]["other"]["peak_flops"]["value"] = 7.0
    assert constants_digest(raw_table, "box") == before
    raw_table["devices"]["box"]["efficiency"]["train"]["S"]["value"] = 0.25
    assert constants_digest(raw_table, "box") != before
