"""search.cost: the serving cost of the model a candidate becomes at the target, and --max-kv before training."""

import json
from pathlib import Path

import pytest

from composer.accounting import analyze
from composer.errors import ConfigError
from composer.presets import get_preset
from search.config import SearchConfig
from search.cost import (
    keeps_every_token,
    measure_decode,
    over_max_kv,
    parse_max_kv,
    recall_under_max_kv,
    serving_cost,
)
from search.engine import pattern_at_target
from search.run import check_recall_under_max_kv, run_search

TOY = "toy_evaluator:make"
DEMO = get_preset("demo-4m").arch


@pytest.mark.parametrize("text, expected", [
    ("64MiB@32K", (64 * 1024**2, 32_768)), ("1000@4096", (1000, 4096)), ("1.5GB@32k", (1_500_000_000, 32_768)),
    ("2 KiB @ 1K", (2048, 1024)),
])
def test_max_kv_reads_bytes_at_a_length(text, expected):
    assert parse_max_kv(text) == expected


@pytest.mark.parametrize("text, said", [("64MiB", "BYTES@LENGTH"), ("lots@32K", "the size"), ("1MiB@far", "length"),
                                        ("0@32K", "positive")])
def test_a_bad_max_kv_says_what_it_takes(text, said):
    with pytest.raises(ConfigError, match=said):
        parse_max_kv(text)
    with pytest.raises(ConfigError, match=said):  # refused when the search is configured, before anything runs
        SearchConfig(max_kv=text)


def test_the_cost_is_that_of_the_model_at_the_target_not_of_the_searched_layers():
    stacked = DEMO.with_pattern(pattern_at_target("AMAMAM", "demo-4m"))
    cost = serving_cost(stacked)
    assert cost["n_layers"] == 18 and cost["state_bytes"] == 0
    six = analyze(DEMO.with_pattern("AMAMAM")).kv_cache_bytes_per_token
    assert cost["kv_bytes_per_token"] == 3 * six  # 9 attention layers, not 3
    assert cost["cache_bytes"] == {str(n): n * cost["kv_bytes_per_token"] for n in (4096, 32768)}
    free = serving_cost(DEMO.with_pattern(pattern_at_target("SDMMSD", "demo-4m")))
    assert free["kv_bytes_per_token"] == 0 and free["state_bytes"] > 0  # a fixed state: the same at every length
    assert free["cache_bytes"]["4096"] == free["cache_bytes"]["32768"] == free["state_bytes"]


def test_max_kv_refuses_a_model_over_it_and_says_by_how_much():
    stacked = DEMO.with_pattern(pattern_at_target("AMAMAM", "demo-4m"))
    at_32k = serving_cost(stacked)["cache_bytes"]["32768"]
    assert over_max_kv(stacked, (at_32k, 32_768)) is None
    said = over_max_kv(stacked, (at_32k - 1, 32_768))
    assert said.startswith("its model at the target (18 layers) holds") and f"{at_32k:,}" in said


def test_a_search_skips_candidates_over_max_kv_before_training_them(tmp_path, monkeypatch):
    log = tmp_path / "trained.txt"
    monkeypatch.setenv("TOY_EVAL_LOG", str(log))
    config = SearchConfig(evaluator=TOY, budget="smoke", wandb="off", out=str(tmp_path / "out"), sampler="random",
                          trials=4, primitives="AMS", max_kv="1MiB@32K", target="demo-4m")
    result = run_search(config, echo=lambda _: None)
    trained = log.read_text().split()
    assert trained and not any("A" in pattern for pattern in trained)  # any attention layer is over 1 MiB at 32K
    skipped = json.loads((Path(result["out"]) / "failures.json").read_text())
    assert any(f["state"] == "skipped" and "over --max-kv 1,048,576" in f["reason"] for f in skipped)
    for row in result["leaderboard"]:
        assert row["cost"]["cache_bytes"]["32768"] <= 1024**2 and row["target_pattern"]
    assert "max_kv" in config.score_settings() and config.settings_digest()  # another study than without it


def test_only_a_layer_that_keeps_every_token_counts_as_able_to_recall_them():
    assert keeps_every_token(DEMO.with_pattern("SMAM"), 1_024)  # full attention keeps them all
    assert not keeps_every_token(DEMO.with_pattern("SMDM"), 1_024)  # fixed states compress them
    window = DEMO.with_pattern("WMSM")
    assert keeps_every_token(window.replace(options={"W": {"window": 1_024}}), 1_024)
    assert not keeps_every_token(window.replace(options={"W": {"window": 1_023}}), 1_024)  # one token short


def test_recall_under_max_kv_counts_the_patterns_that_fit_and_keep_every_token():
    patterns = ["AMAMAM", "AMMMMM", "SMSMSM", "SDMMSD"]
    one_attention = analyze(DEMO.with_pattern(pattern_at_target("AMMMMM", "demo-4m")), seq_len=32_768)
    found = recall_under_max_kv(patterns, "demo-4m", (one_attention.cache_bytes_per_sequence, 32_768), 1_024)
    assert found == {"patterns": 4, "fit": 3, "fit_and_keep": 1,
                     "cheapest_keeping": ("AMMMMM", one_attention.cache_bytes_per_sequence)}
    tighter = recall_under_max_kv(patterns, "demo-4m", (one_attention.cache_bytes_per_sequence - 1, 32_768), 1_024)
    assert tighter["fit"] == 2 and tighter["fit_and_keep"] == 0 and tighter["cheapest_keeping"][0] == "AMMMMM"


def test_min_recall_known_under_a_max_kv_no_attention_fits_is_refused_before_anything_is_written(tmp_path):
    # at demo-4m every AMSD pattern with attention stacks to 2 or more attention layers (16 MiB at 32K), so a
    # limit at Nemotron-H's cache (8.4 MiB, one attention layer) leaves no pattern that can recall as it does
    config = SearchConfig(primitives="AMSD", min_recall="known", max_kv="10MiB@32K", wandb="off",
                          out=str(tmp_path / "out"))
    with pytest.raises(ConfigError, match=r"leaves 729 of 4,096 patterns, none with a layer that keeps every token"
                                          r".*raise --max-kv to 16MiB@32K \(the least any such pattern holds: AMMMMM"
                                          r"\), or pass --attention-at-target keep \(1,458 patterns with attention "
                                          r"then fit\)"):
        run_search(config, echo=lambda _: None)
    assert not (tmp_path / "out").exists()
    said = []
    check_recall_under_max_kv(SearchConfig(primitives="AMSD", min_recall=0.5, max_kv="10MiB@32K", wandb="off"),
                              said.append)  # a fraction: a warning, the search goes on
    assert len(said) == 1 and said[0].startswith("warning: --max-kv 10MiB@32K leaves 729") and "16MiB@32K" in said[0]
    check_recall_under_max_kv(SearchConfig(primitives="AMSD", min_recall="known", max_kv="16MiB@32K", wandb="off"),
                              said.append)  # AMMMMM fits: nothing to say
    check_recall_under_max_kv(SearchConfig(primitives="AMSD", min_recall="known", max_kv="10MiB@32K",
                                           attention_at_target="keep", wandb="off"), said.append)  # one A fits
    assert len(said) == 1


def test_a_search_that_keeps_attention_at_the_target_trains_what_stacking_puts_over_max_kv(tmp_path, monkeypatch):
    """Every 6-layer pattern with one attention layer stacks to 3 at demo-4m (24 MiB at 32K): over 9 MiB, all are
    skipped; kept at the target, each holds one (8 MiB) and trains, and its cost is its model's with one."""
    one_attention = {"min_share": {"A": 0.1}, "max_share": {"A": 0.2}}
    common = dict(evaluator=TOY, budget="smoke", wandb="off", sampler="random", trials=3, primitives="AMS",
                  max_kv="9MiB@32K", target="demo-4m", known=False, **one_attention)
    log = tmp_path / "trained.txt"
    monkeypatch.setenv("TOY_EVAL_LOG", str(log))
    kept = run_search(SearchConfig(**common, attention_at_target="keep", out=str(tmp_path / "kept")),
                      echo=lambda _: None)
    trained = log.read_text().split()
    assert trained and all(pattern.count("A") == 1 for pattern in trained)
    assert kept["leaderboard"]
    for row in kept["leaderboard"]:
        assert row["target_pattern"].count("A") == 1 and row["cost"]["cache_bytes"]["32768"] <= 9 * 1024**2
        stacked = DEMO.with_pattern(pattern_at_target(row["pattern"], "demo-4m"))
        assert "over --max-kv" in over_max_kv(stacked, (9 * 1024**2, 32_768))  # the default would skip it
    with pytest.raises(RuntimeError, match="no trial .* completed"):  # and does: nothing trains
        run_search(SearchConfig(**common, out=str(tmp_path / "stacked")), echo=lambda _: None)
    assert log.read_text().split() == trained


def test_decode_speed_is_measured_through_the_cache():
    tiny = get_preset("tiny").arch.with_pattern("AMSM")
    measured = measure_decode(tiny, context=64, new_tokens=4)
    assert measured["decode_tokens_per_s"] > 0 and measured["context"] == 64
