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
