"""search.cost.measured: every finalist's and known layout's measured cost at the target, its ratios to the best
known layout, kept across a resume; and the summary's table of it (search.summary)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from composer.evaluation.bench_cost import machine
from search.cost import measured as measured_cost
from search.cost.measured import STORE, add_measured_cost, add_ratios, cost_grid
from search.summary import summary_text

GRID = cost_grid("rung-smoke-1")  # the smoke ladder's last rung: 8 x 64 tokens
ANALYTIC = {"params": 200_000, "cache_bytes": {"4096": 1024**2, "32768": 8 * 1024**2}, "state_bytes": 0}


def fake_record(train: float, ms_1: float, ms_64: float, grid=GRID, **extra) -> dict:
    """A measured record of the shape bench_cost writes, on this machine, with the figures given."""

    def value(median: float, spread: float = 0.05) -> dict:
        return {"median": median, "min": median * (1 - spread / 2), "max": median * (1 + spread / 2), "repeats": 3,
                "spread": spread, "noisy": spread > 0.1}

    return {**machine(torch.device("cpu"), grid), "dtype": "fp32", "train_dtype": "fp32",
            "decode_path": "eager InferenceCache, fp32",
            "train_tokens_per_s": {**value(train), "batch": 8, "seq_len": 64},
            "prefill_tokens_per_s": {**value(2 * train), "context": 64},
            "decode_ms_per_token": {"1": {"64": value(ms_1 * 0.9), "512": value(ms_1)},
                                    "64": {"64": value(ms_64 * 0.5), "512": value(ms_64, 0.3)}},
            "peak_memory_bytes": {"train": 1_000, "decode": 2_000, "method": "cpu: test"},
            "noisy": ["decode ms at batch 64 after 512 tokens: spread 30% over 3 repeats"],
            "noisy_spread": 0.1, "grid": dataclasses.asdict(grid), "seconds": 0.5, **extra}


def rows() -> list[dict]:
    """A final ranking whose best known layout (the first known in the ranking) is AAMMMM, not the first row, and
    a second known layout below it with other figures; the last row as a search written before the model at the
    target was stored whole (search.growth.Grown) held it."""
    return [{"pattern": "AMAMAA", "grown": grown("AMAMAA"), "known": None, "cost": dict(ANALYTIC), "rung": 1},
            {"pattern": "AAMMMM", "grown": grown("AAMMM"), "known": "composer-paper", "cost": dict(ANALYTIC),
             "rung": 1},
            {"pattern": "AMAMAM", "target_pattern": "AMAMAM", "known": "llama", "cost": dict(ANALYTIC), "rung": 1}]


def grown(layout: str) -> dict:
    return {"layout": layout, "widths": "tiny", "by": "parameters", "how": "stacked to the target's size"}


FIGURES = {"AMAMAA": (500.0, 4.0, 40.0), "AAMMM": (1_000.0, 2.0, 10.0), "AMAMAM": (250.0, 8.0, 80.0)}


@pytest.fixture
def measured(monkeypatch):
    """measure_row replaced by the fixed figures above; the patterns it was asked for, in order."""
    asked = []

    def measure_row(pattern, target, grid):
        asked.append(pattern)
        return fake_record(*FIGURES[pattern], grid=grid)

    monkeypatch.setattr(measured_cost, "measure_row", measure_row)
    return asked


def test_ratios_are_to_the_best_known_layout_the_answer_weighs(tmp_path, measured):
    ranking = rows()
    add_measured_cost(ranking, "tiny", GRID, tmp_path, {"pattern": "AAMMMM", "name": "composer-paper"})
    assert measured == ["AMAMAA", "AAMMM", "AMAMAM"]  # every finalist and every known layout
    new, known, llama = (row["cost"]["vs_best_known"] for row in ranking)
    assert new["pattern"] == "AAMMMM" and new["name"] == "composer-paper" and new["grown"]["layout"] == "AAMMM"
    assert new["train_tokens_per_s"] == pytest.approx(0.5) and llama["train_tokens_per_s"] == pytest.approx(0.25)
    assert new["decode_ms_per_token"] == {"1": {"64": pytest.approx(2.0), "512": pytest.approx(2.0)},
                                          "64": {"64": pytest.approx(4.0), "512": pytest.approx(4.0)}}
    assert known["train_tokens_per_s"] == 1.0 and known["peak_memory_bytes"] == {"train": 1.0, "decode": 1.0}
    assert ranking[0]["cost"]["params"] == ANALYTIC["params"]  # the analytic cost kept beside it
    # another best known (a --min-recall ranking's) gives other ratios
    add_ratios(ranking, {"pattern": "AMAMAM", "name": "llama"})
    assert ranking[0]["cost"]["vs_best_known"]["train_tokens_per_s"] == pytest.approx(2.0)


def test_a_resumed_search_reads_its_measurements_and_measures_only_what_changed(tmp_path, measured):
    add_measured_cost(rows(), "tiny", GRID, tmp_path, None)
    assert len(measured) == 3 and set(json.loads((tmp_path / STORE).read_text())) == {
        "tiny:AMAMAA", "tiny:AAMMM", "tiny:AMAMAM"}
    again = rows()
    lines = []
    add_measured_cost(again, "tiny", GRID, tmp_path, {"pattern": "AAMMMM"}, echo=lines.append)
    assert len(measured) == 3, "a resume measured again"
    assert again[0]["cost"]["measured"]["train_tokens_per_s"]["median"] == 500.0
    assert sum(f"measured before ({STORE})" in line for line in lines) == 3
    add_measured_cost(rows(), "tiny", dataclasses.replace(GRID, seq_len=32), tmp_path, None)  # another grid
    assert len(measured) == 6
    store = json.loads((tmp_path / STORE).read_text())
    store["tiny:AMAMAA"]["threads"] += 1  # measured with other threads: measured again
    (tmp_path / STORE).write_text(json.dumps(store))
    add_measured_cost(rows(), "tiny", dataclasses.replace(GRID, seq_len=32), tmp_path, None)
    assert measured[6:] == ["AMAMAA"]


def test_a_failed_measurement_is_said_not_stored_and_costs_no_ratio(tmp_path, monkeypatch):
    def broken(arch, grid):
        raise RuntimeError("out of memory")

    monkeypatch.setattr("composer.evaluation.bench_cost.measure_cost", broken)
    ranking = rows()[:2]
    add_measured_cost(ranking, "tiny", GRID, tmp_path, {"pattern": "AAMMMM"})
    assert ranking[0]["cost"]["measured"] == {"error": "RuntimeError: out of memory"}
    assert "vs_best_known" not in ranking[0]["cost"] and not (tmp_path / STORE).exists()
    text = summary_text(result(ranking))
    assert "measured nothing: AMAMAA: RuntimeError: out of memory" in text


def result(ranking: list[dict]) -> dict:
    """The least a search's result holds for summary_text."""
    board = [{"rank": i + 1, "score": 3.0 + i / 10, "lr": 3e-3, "params": 1, "attention_share": 0.5, "trial": i,
              **row} for i, row in enumerate(ranking)]
    return {"leaderboard": board, "best": board[0], "out": "runs/x", "vs_known": {}}


def test_the_summary_prints_training_and_decode_with_ratios_and_names_the_device(tmp_path, measured):
    ranking = rows()
    add_measured_cost(ranking, "tiny", GRID, tmp_path, {"pattern": "AAMMMM", "name": "composer-paper"})
    text = summary_text(result(ranking))
    lines = text.splitlines()
    assert ("serving cost at the target (cache: analytic, bf16, one sequence; the rest measured; x: over the best "
            "known layout, composer-paper AAMMMM):") in lines
    here = machine(torch.device("cpu"), GRID)  # one thread: the grid's default
    assert (f"measured on cpu ({here['device_name']}), 1 thread: training fp32 at 8 x 64 tokens, "
            "decode path eager InferenceCache, fp32, ms per decode step after 512 tokens; each the median of its "
            "repeats (training 3, decode 3), their spread below") in lines
    header = next(line for line in lines if line.startswith("pattern "))
    assert header.split()[-8:] == ["train", "tok/s", "decode", "ms", "b1", "decode", "ms", "b64"]
    row = next(line for line in lines if line.startswith("AMAMAA "))
    assert row.split()[-6:] == ["500", "0.50x", "4", "2.00x", "40~", "4.00x"]  # the noisy figure marked ~
    assert next(line for line in lines if line.startswith("AAMMMM ")).split()[-6:] == [
        "1,000", "1.00x", "2", "1.00x", "10~", "1.00x"]
    assert ("noisy (~: the repeats spread over 10% of their median; decode as bBATCH@CONTEXT): AMAMAA b64@512 30%; "
            "AAMMMM b64@512 30%; AMAMAM b64@512 30%") in lines
    assert "decode tok/s" not in text


def test_an_old_search_without_measurements_prints_its_cost_and_not_its_single_decode_timing():
    """A search written before the measured cost carries ``cost["decode"]``: composer report still prints its
    analytic cost; its decode tokens/s, one timed run without a spread (issue 61: 128 and 12 tokens/s for the same
    model on two runs), is said to be left out, not printed."""
    old = rows()
    for row, speed in zip(old, (27.4, 49.0, 15.0), strict=True):
        row["cost"]["decode"] = {"decode_tokens_per_s": speed, "context": 1024}
    text = summary_text(result(old))
    lines = text.splitlines()
    heading = lines.index("serving cost of the finalists, on their models at the target (bf16 cache, batch 1):")
    assert "decode" not in lines[heading + 1] and lines[heading + 2].startswith(old[0]["pattern"])
    assert not any(line.rstrip().endswith((" 27", " 49", " 15")) for line in lines[heading:heading + 6])
    assert lines[heading + 5].startswith("decode tok/s not printed: this search timed each model's decode once")
    assert "serving cost at the target" not in text
