"""The device peak behind MFU: Lightning's table, and the chips it misses."""

from __future__ import annotations

import torch

from composer.training import throughput


def test_an_h200_gets_its_datasheet_peak_where_lightnings_table_misses_it(monkeypatch):
    """Lightning 2.6 keys the H200 as "h200 sxm1": on an H200, `composer train` wrote no MFU at all."""
    monkeypatch.setattr(throughput, "get_available_flops", lambda device, dtype: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    cuda = torch.device("cuda", 0)
    assert throughput.peak_flops(cuda, torch.bfloat16) == 989.4e12
    assert throughput.peak_flops(cuda, torch.float32) is None  # the fallback is a bf16/fp16 table only
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA L4")
    assert throughput.peak_flops(cuda, torch.bfloat16) is None


def test_lightnings_table_wins_and_cpus_have_no_peak(monkeypatch):
    monkeypatch.setattr(throughput, "get_available_flops", lambda device, dtype: 123.0)
    assert throughput.peak_flops(torch.device("cuda", 0), torch.bfloat16) == 123.0
    assert throughput.peak_flops(torch.device("cpu"), torch.bfloat16) is None
