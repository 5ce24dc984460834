"""search.cost: the serving cost of the model a candidate becomes at the target, and --max-kv before training."""

import functools
import io
import json
from pathlib import Path

import pytest

from composer.accounting import analyze
from composer.errors import ConfigError
from composer.presets import get_preset
from search.config import SearchConfig
from search.cost import (
    keeps_every_token,
    over_max_kv,
    parse_max_kv,
    recall_under_max_kv,
    serving_cost,
)
from search.growth import grow
from search.progress import SearchProgress
from search.run import check_recall_under_max_kv, run_search

TOY = "toy_evaluator:make"
DEMO = get_preset("demo-4m").arch


@pytest.mark.parametrize("text, expected", [
    ("64MiB@32K", (64 * 1024**2, 32_768)), ("1000@4096", (1000, 4096)), ("1.5GB@32k", (1_500_000_000, 32_768)),
    ("2 KiB @ 1K", (2048, 1024)),
    ("10MB@32K", (10_000_000, 32_768)), ("10mib@32k", (10 * 2**20, 32_768)),  # units in any case: MB 10^6, MiB 2^20
])
def test_max_kv_reads_bytes_at_a_length(text, expected):
    assert parse_max_kv(text) == expected


@pytest.mark.parametrize("text, said", [("64MiB", "BYTES@LENGTH"), ("lots@32K", "the size"), ("1MiB@far", "length"),
                                        ("0@32K", "positive"),
                                        # a bare M in a size could be 10^6 or 2^20 bytes (a length's K is 1,024)
                                        ("10M@32K", r"the size '10M' is not a number with a unit: sizes take B, "
                                                    r"KB/MB/GB \(10\^3/10\^6/10\^9 bytes\) or KiB/MiB/GiB")])
def test_a_bad_max_kv_says_what_it_takes(text, said):
    with pytest.raises(ConfigError, match=said):
        parse_max_kv(text)
    with pytest.raises(ConfigError, match=said):  # refused when the search is configured, before anything runs
        SearchConfig(max_kv=text)


def test_the_cost_is_that_of_the_model_at_the_target_not_of_the_searched_layers():
    stacked = DEMO.with_pattern(grow("AMAMAM", "demo-4m").layout)
    cost = serving_cost(stacked)
    assert cost["n_layers"] == 18 and cost["state_bytes"] == 0
    six = analyze(DEMO.with_pattern("AMAMAM")).kv_cache_bytes_per_token
    assert cost["kv_bytes_per_token"] == 3 * six  # 9 attention layers, not 3
    assert cost["cache_bytes"] == {str(n): n * cost["kv_bytes_per_token"] for n in (4096, 32768)}
    free = serving_cost(DEMO.with_pattern(grow("SDMMSD", "demo-4m").layout))
    assert free["kv_bytes_per_token"] == 0 and free["state_bytes"] > 0  # a fixed state: the same at every length
    assert free["cache_bytes"]["4096"] == free["cache_bytes"]["32768"] == free["state_bytes"]


def test_max_kv_refuses_a_model_over_it_and_says_by_how_much():
    stacked = DEMO.with_pattern(grow("AMAMAM", "demo-4m").layout)
    at_32k = serving_cost(stacked)["cache_bytes"]["32768"]
    assert over_max_kv(stacked, (at_32k, 32_768)) is None
    said = over_max_kv(stacked, (at_32k - 1, 32_768))  # over by one byte: the bytes say it, not 2 equal MiB
    assert said == f"cache@32K at target {at_32k:,} B > --max-kv {at_32k - 1:,} B"
    assert over_max_kv(stacked, (at_32k // 2, 32_768)) == "cache@32K at target 72.0 MiB > --max-kv 36.0 MiB"


def test_a_search_skips_candidates_over_max_kv_before_training_them(tmp_path, monkeypatch):
    log = tmp_path / "trained.txt"
    monkeypatch.setenv("TOY_EVAL_LOG", str(log))
    config = SearchConfig(evaluator=TOY, budget="smoke", wandb="off", out=str(tmp_path / "out"), sampler="random",
                          trials=4, primitives="AMS", max_kv="1MiB@32K", target="demo-4m")
    result = run_search(config, echo=lambda _: None)
    trained = log.read_text().split()
    assert trained and not any("A" in pattern for pattern in trained)  # any attention layer is over 1 MiB at 32K
    skipped = json.loads((Path(result["out"]) / "failures.json").read_text())
    assert any(f["state"] == "skipped" and "> --max-kv 1.0 MiB" in f["reason"] for f in skipped)
    for row in result["leaderboard"]:
        assert row["cost"]["cache_bytes"]["32768"] <= 1024**2 and row["grown"]["layout"]
    assert "max_kv" in config.score_settings() and config.settings_digest()  # another study than without it


def test_a_skip_over_max_kv_is_shown_whole_and_starts_no_wandb_run(tmp_path, monkeypatch):
    """Issue 47: --max-kv 10MB@32K skipped candidates with their reasons cut mid-number ("holds 12,582,912"), never
    saying the limit, and started a W&B run per skip. The reason fits a progress line and says the limit as the
    reports do (10MB is 10^6 bytes: 9.5 MiB); a skip trains nothing and logs no run."""
    wandb = pytest.importorskip("wandb")
    runs: list[dict] = []

    class Run:
        summary: dict = {}

        def log(self, data):
            pass

        def finish(self):
            pass

    monkeypatch.setattr(wandb, "init", lambda **kwargs: runs.append(kwargs) or Run())
    monkeypatch.setattr(wandb, "Table", lambda **_: None)
    monkeypatch.setattr(wandb, "Image", lambda *_: None)
    lines = io.StringIO()  # the progress lines a person reads
    monkeypatch.setattr("search.run.SearchProgress", functools.partial(SearchProgress, stream=lines))
    config = SearchConfig(evaluator=TOY, budget="smoke", wandb="offline", out=str(tmp_path / "out"), sampler="random",
                          trials=4, widths="tiny", target="tiny", max_kv="10MB@32K", known=False)
    result = run_search(config, echo=lambda _: None)
    printed = lines.getvalue()
    skipped = [f for f in json.loads((Path(result["out"]) / "failures.json").read_text()) if f["state"] == "skipped"]
    assert skipped and all(f["reason"].endswith("> --max-kv 9.5 MiB") for f in skipped)
    assert all(f"skipped: {f['reason']} " in printed for f in skipped), printed
    trials = [run["config"]["pattern"] for run in runs if run["job_type"] == "trial"]
    assert trials and not set(trials) & {f["pattern"] for f in skipped}


def test_only_a_layer_that_keeps_every_token_counts_as_able_to_recall_them():
    assert keeps_every_token(DEMO.with_pattern("SMAM"), 1_024)  # full attention keeps them all
    assert not keeps_every_token(DEMO.with_pattern("SMDM"), 1_024)  # fixed states compress them
    window = DEMO.with_pattern("WMSM")
    assert keeps_every_token(window.replace(options={"W": {"window": 1_024}}), 1_024)
    assert not keeps_every_token(window.replace(options={"W": {"window": 1_023}}), 1_024)  # one token short


def test_recall_under_max_kv_counts_the_patterns_that_fit_and_keep_every_token():
    patterns = ["AMAMAM", "AMMMMM", "SMSMSM", "SDMMSD"]
    one_attention = analyze(DEMO.with_pattern(grow("AMMMMM", "demo-4m").layout), seq_len=32_768)
    found = recall_under_max_kv(patterns, "demo-4m", (one_attention.cache_bytes_per_sequence, 32_768), 1_024)
    assert found == {"patterns": 4, "fit": 3, "fit_and_keep": 1,
                     "cheapest_keeping": ("AMMMMM", one_attention.cache_bytes_per_sequence)}
    tighter = recall_under_max_kv(patterns, "demo-4m", (one_attention.cache_bytes_per_sequence - 1, 32_768), 1_024)
    assert tighter["fit"] == 2 and tighter["fit_and_keep"] == 0 and tighter["cheapest_keeping"][0] == "AMMMMM"


@pytest.fixture
def each_layout_costed_once(monkeypatch):
    """The refusal and the three checks after it enumerate AMSD's 4,096 patterns six times (each rule twice over;
    5-6 s apiece on 2 cores): each pattern is grown at the target once (``search.growth.grow`` keeps what it grew)
    and costed (``composer.accounting.analyze``) once per test here, then read back. Both are pure functions of
    their arguments, so every figure is the one the search computes (a wrong one still reaches every assertion)."""
    import composer.accounting

    analyzed, analyze_once = {}, composer.accounting.analyze

    def cached(arch, *args, **kwargs):
        key = (repr(arch), args, tuple(sorted(kwargs.items())))
        if key not in analyzed:
            analyzed[key] = analyze_once(arch, *args, **kwargs)
        return analyzed[key]

    monkeypatch.setattr(composer.accounting, "analyze", cached)


def test_min_recall_known_under_a_max_kv_no_attention_fits_is_refused_before_anything_is_written(
        tmp_path, each_layout_costed_once):
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
        assert row["grown"]["layout"].count("A") == 1 and row["cost"]["cache_bytes"]["32768"] <= 9 * 1024**2
        stacked = DEMO.with_pattern(grow(row["pattern"], "demo-4m").layout)
        assert "> --max-kv 9.0 MiB" in over_max_kv(stacked, (9 * 1024**2, 32_768))  # the default would skip it
    with pytest.raises(ConfigError, match="--max-kv 9MiB@32K admits none of the 192 patterns within the shares: "
                       r"the least, AMMMMM, holds 16.0 MiB on its model at demo-4m; raise --max-kv to 16MiB@32K or "
                       "pass --attention-at-target keep"):  # and does: refused before anything trains
        run_search(SearchConfig(**common, out=str(tmp_path / "stacked")), echo=lambda _: None)
    assert not (tmp_path / "stacked").exists()
    assert log.read_text().split() == trained
