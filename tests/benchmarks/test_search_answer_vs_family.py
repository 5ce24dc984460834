"""benchmarks/search_answer_vs_family.py: a family outside the search's primitives, trained as the search trains a
known layout and paired by seed with the search's confirmed answer. The search and the family's runs use the
``lm`` evaluator with its training replaced by the bookkeeping tests' deterministic fake: plumbing, not learning."""

from __future__ import annotations

import json

import pytest

from composer.errors import ConfigError
from search.growth import grow
from search.run import run_search
from tests.search.test_bookkeeping import halving


def test_samba_pairs_with_the_confirmed_answer_seed_by_seed_and_a_rerun_trains_nothing(tmp_path, fake, load_benchmark):
    bench = load_benchmark("search_answer_vs_family")
    result = run_search(halving(tmp_path, confirm_seeds=3), echo=lambda _: None)
    out = tmp_path / "out"
    answer = result["vs_known"]["best_new"]["pattern"]
    searched = len(fake.trained)

    compared = bench.compare(out, "samba", None, tmp_path / "samba", echo=lambda _: None)
    samba_at_target = grow("SMSMWM", "tiny", "samba").layout
    assert compared["family"]["target_pattern"] == samba_at_target and "W" in samba_at_target
    # rung 1 (the smoke ladder's rung at the target): both rates at seed 0; the confirmation: seeds 1 and 2 at the
    # rate rung 1 chose
    assert fake.trained[searched:] == [samba_at_target] * 4
    stages = compared["family"]["stages"]
    assert set(stages) == {"rung1", "confirmation"} and stages["rung1"]["budget"] == "rung-smoke-1"
    assert stages["confirmation"]["budget"] == "confirm2:rung-smoke-1"
    assert set(stages["confirmation"]["losses"]) == {"1", "2"}
    assert stages["confirmation"]["lr"] == stages["rung1"]["lr"]

    board = json.loads((out / "leaderboard.json").read_text())
    mine = next(row for row in board if row["pattern"] == answer)["evidence"]["scores"]  # the confirmed seeds too
    paired = compared["answer_minus_family"]
    assert compared["answer"]["pattern"] == answer and paired["seeds"] == ["0", "1", "2"]
    theirs = compared["family"]["losses"]
    assert paired["differences"] == pytest.approx([mine[s] - theirs[s] for s in ("0", "1", "2")])
    assert paired["ci"] is not None
    # each side's cache at 32K, as the search costs its trials: Samba's sliding window holds a cache, and the
    # answer's row carries the cost its trial recorded
    assert compared["family"]["cost"]["pattern"] == samba_at_target
    assert compared["family"]["cost"]["cache_bytes"]["32768"] > 0
    assert compared["answer"]["cost"]["cache_bytes"]["32768"] == next(
        row for row in board if row["pattern"] == answer)["cost"]["cache_bytes"]["32768"]

    again = bench.compare(out, "samba", None, tmp_path / "samba", echo=lambda _: None)
    assert len(fake.trained) == searched + 4, "a rerun trained the family again"
    assert again["answer_minus_family"] == paired


def test_a_search_without_its_answer_or_another_familys_work_is_refused_in_one_line(tmp_path, fake, load_benchmark,
                                                                                     capsys):
    bench = load_benchmark("search_answer_vs_family")
    assert bench.main([str(tmp_path / "none"), "--family", "samba"]) == 2
    assert "has no config.json" in capsys.readouterr().err
    run_search(halving(tmp_path), echo=lambda _: None)
    out = tmp_path / "out"
    bench.compare(out, "samba", None, tmp_path / "work", echo=lambda _: None)
    with pytest.raises(ConfigError, match="holds samba: pass another --work"):
        bench.compare(out, "jamba", None, tmp_path / "work", echo=lambda _: None)
    with pytest.raises(ConfigError, match="is not on"):
        bench.compare(out, "samba", "WWWWWW", tmp_path / "work", echo=lambda _: None)


def test_a_layout_of_the_targets_size_is_trained_as_given_and_one_that_would_grow_is_refused(tmp_path, fake,
                                                                                             load_benchmark, capsys):
    # the what-if the AMSD answer needed: its model at the target with fewer attention layers, through the same
    # stages as a family, paired with the search's rows
    bench = load_benchmark("search_answer_vs_family")
    run_search(halving(tmp_path, confirm_seeds=3), echo=lambda _: None)
    out = tmp_path / "out"
    stacked = grow("SMSAMS", "tiny").layout
    first = stacked.index("A") + 1
    variant = stacked[:first] + stacked[first:].replace("A", "S")  # one attention layer kept
    searched = len(fake.trained)
    compared = bench.compare(out, "one-attention", None, tmp_path / "variant", echo=lambda _: None, layout=variant)
    assert fake.trained[searched:] == [variant] * 4 and compared["family"]["target_pattern"] == variant
    assert compared["family"]["name"] == "one-attention" and compared["answer_minus_family"]["ci"] is not None
    with pytest.raises(ConfigError, match="grows to .* give a layout of the target's size"):
        bench.compare(out, "two", None, tmp_path / "two", echo=lambda _: None, layout="SM")
    assert bench.main([str(out), "--layout", variant]) == 2
    assert "--layout needs --name" in capsys.readouterr().err


def test_train_only_trains_the_family_before_the_search_has_an_answer(tmp_path, fake, load_benchmark, capsys):
    # the family does not depend on the answer: trained while the search still runs, compared once it has finished
    bench = load_benchmark("search_answer_vs_family")
    run_search(halving(tmp_path, confirm_seeds=3), echo=lambda _: None)
    out = tmp_path / "out"
    best = (out / "best.json").read_text()
    (out / "best.json").unlink()  # as if the search were still running
    searched = len(fake.trained)
    assert bench.main([str(out), "--family", "samba", "--train-only", "--work", str(tmp_path / "samba")]) == 0
    assert "rung1, confirmation trained" in capsys.readouterr().out
    assert len(fake.trained) == searched + 4
    assert bench.main([str(out), "--family", "samba", "--work", str(tmp_path / "samba")]) == 2
    assert "holds no finished search" in capsys.readouterr().err
    (out / "best.json").write_text(best)
    assert bench.main([str(out), "--family", "samba", "--work", str(tmp_path / "samba")]) == 0
    assert len(fake.trained) == searched + 4, "the comparison trained the family again"


def test_more_seeds_follow_the_confirmation_at_its_rate_one_write_per_seed_and_a_rerun_trains_none(
        tmp_path, fake, load_benchmark):
    bench = load_benchmark("search_answer_vs_family")
    config = halving(tmp_path, confirm_seeds=3)
    run_search(config, echo=lambda _: None)
    config = bench.search_config(tmp_path / "out")
    record = bench.train_family(config, "samba", tmp_path / "samba", echo=lambda _: None)
    path = tmp_path / "samba" / "family.json"
    before = len(fake.trained)

    stage = bench.train_more_seeds(config, record["fit"], path, 2, 1, known={record["fit"]: "samba"},
                                   echo=lambda _: None)
    assert fake.trained[before:] == [record["stages"]["rung1"]["pattern"]] * 2  # one run per seed, no rate sweep
    assert set(stage["losses"]) == {"3", "4"} and stage["lr"] == record["stages"]["rung1"]["lr"]
    assert stage["budget"] == "confirm1:rung-smoke-1"
    assert set(bench.stage_losses(path, config)) == {"0", "1", "2", "3", "4"}  # every seed pairs
    assert json.loads(path.read_text())["stages"]["more_seeds"]["losses"] == stage["losses"]

    bench.train_more_seeds(config, record["fit"], path, 2, 1, known={record["fit"]: "samba"}, echo=lambda _: None)
    assert len(fake.trained) == before + 2, "a rerun trained seeds it had"
    bench.train_more_seeds(config, record["fit"], path, 3, 1, known={record["fit"]: "samba"}, echo=lambda _: None)
    assert set(bench.stage_losses(path, config)) == {str(seed) for seed in range(6)}
