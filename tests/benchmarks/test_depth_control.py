"""benchmarks/depth_control.py: the 2x2 that tells depth from mixers, every arm at the target's size at its depth,
trained through the search's stages (training faked: plumbing, not learning), paired by seed."""

from __future__ import annotations

import json

import pytest

from composer.accounting import non_embedding_params
from composer.presets import get_preset


def test_every_arm_has_its_depth_and_the_targets_size(load_benchmark):
    bench = load_benchmark("depth_control")
    goal = non_embedding_params(get_preset("demo-4m").arch)
    depths = {"answer@34": 34, "answer@16": 16, "nemotron-h@16": 16, "nemotron-h@34": 34, "answer-mlp@16": 16}
    for name, depth in depths.items():
        layout, widths = bench.ARMS[name].model()
        arch = get_preset(widths).arch.with_pattern(layout)
        assert arch.n_layers == depth and abs(non_embedding_params(arch) / goal - 1) < 0.05, name
    assert bench.ARMS["answer@34"].model() == (
        "SDDDDSDDDDSDDDDSDADDDSDDDDSDDDDSDD",
        "demo-4m",
    )  # the search's
    mlp, _ = bench.ARMS["answer-mlp@16"].model()
    assert mlp[1::2] == "M" * 8 and mlp[0::2].count("A") == 1  # an MLP after each of the answer's 8 mixers
    # the model the search compared with: 16 layers at d 192, larger than the target
    layout, widths = bench.ARMS["nemotron-h@16-d192"].model()
    assert (
        widths == "demo-4m"
        and non_embedding_params(get_preset(widths).arch.with_pattern(layout)) > 1.15 * goal
    )


def test_an_arm_trains_through_the_search_stages_once_and_pairs_by_seed(
    tmp_path, fake, load_benchmark, monkeypatch
):
    bench = load_benchmark("depth_control")
    smoke = bench.control_config()
    monkeypatch.setattr(
        bench,
        "control_config",
        lambda precision="fp32": type(smoke)(
            **{**smoke.to_dict(), "budget": "smoke", "widths": "tiny", "precision": precision}
        ),
    )
    monkeypatch.setattr(bench, "TARGET", "tiny")
    arm = bench.Arm("answer@8", "SADDDD", attention="keep", depth=8)
    monkeypatch.setitem(bench.ARMS, "answer@8", arm)
    record = bench.train_arm(arm, tmp_path, threads=1)
    assert set(record["stages"]) == {"rung1", "confirmation"}
    trained = set(fake.trained)
    assert len(trained) == 1 and len(next(iter(trained))) == 8  # laid out at 8 layers
    assert record["widths"].startswith("tiny:d") and record["stages"]["rung1"]["widths"] == record["widths"]
    runs = len(fake.trained)
    bench.train_arm(arm, tmp_path, threads=1)
    assert len(fake.trained) == runs, "a rerun trained the arm again"
    saved = json.loads((tmp_path / "answer@8" / "family.json").read_text())
    losses = bench.arm_losses(arm, tmp_path)
    assert set(losses) == {"0", "1", "2"} and losses["0"] == saved["stages"]["rung1"]["losses"]["0"]
    # a rate past the grid's edge it chose, once: half the lower, or twice the higher
    edge = bench.edge_check(arm, tmp_path, threads=1)
    chosen = saved["stages"]["rung1"]["lr"]
    assert edge["lr"] in (chosen / 2, chosen * 2) and edge["chosen_loss"] == losses["0"]
    assert len(fake.trained) == runs + 1 and bench.edge_check(arm, tmp_path, threads=1) == edge


def test_the_differences_pair_the_recorded_arms_and_wait_for_the_rest(tmp_path, load_benchmark):
    bench = load_benchmark("depth_control")
    records = {name: bench.arm_record(arm, tmp_path) for name, arm in bench.ARMS.items()}
    rows = {row["what"]: row for row in bench.differences(records)}
    gap = rows["search's gap (as it trained them)"]
    assert gap["seeds"] == ["0", "1", "2"] and gap["mean"] == pytest.approx(-0.0509, abs=1e-4)
    assert rows["mixers at 16 layers"]["verdict"] == "not trained yet"
