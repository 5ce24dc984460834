"""composer transfer (composer/experiments/transfer.py): selection over the score range, every (pattern, seed) trained once,
the report's keys, resume after a kill, and one-line errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from composer.cli import main
from composer.errors import ConfigError
from composer.experiments.transfer import Transfer, TransferConfig, spread, verdict

# Six-layer patterns as a MAD search scores them (higher is better), written as composer search writes them.
SCORES = {"AAMMMM": 0.64, "AMAMAM": 0.61, "MAMAMA": 0.58, "MMAAMM": 0.55, "MMMMAM": 0.40, "MMMMMM": 0.07}
TRAIN = ["--target", "tiny", "--tokens", "1024", "--seq-len", "64", "--batch-size", "8", "--max-documents", "200",
         "--val-tokens", "512", "--wandb", "off", "--n-boot", "500"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def search_dir(tmp_path) -> Path:
    out = tmp_path / "search"
    out.mkdir()
    rows = [{"rank": i, "pattern": p, "score": s, "trial": i} for i, (p, s) in enumerate(SCORES.items(), 1)]
    (out / "leaderboard.json").write_text(json.dumps(rows))
    (out / "best.json").write_text(json.dumps({**rows[0], "direction": "maximize"}))
    return out


def test_spread_keeps_the_best_the_worst_and_evenly_between():
    assert spread(list("abcdefghij"), 4) == ["a", "d", "g", "j"]
    assert spread(list("abc"), 5) == ["a", "b", "c"]


def test_selection_spreads_over_the_scores_and_extrapolates_each(search_dir, tmp_path):
    config = TransferConfig(search=str(search_dir), k=3, target="demo-4m", out=str(tmp_path / "t"))
    candidates, search = Transfer(config, echo=lambda line: None).select()
    assert [c.source_pattern for c in candidates] == ["AAMMMM", "MAMAMA", "MMMMMM"]
    assert [c.search_rank for c in candidates] == [1, 3, 6] and search["direction"] == "maximize"
    from scaling.extrapolate import extrapolate

    for candidate in candidates:  # the project's extrapolator, at the target's widths
        assert candidate.target_pattern == extrapolate(candidate.source_pattern, "demo-4m").pattern
        assert candidate.layers == len(candidate.target_pattern) > 6
    named = TransferConfig(search=str(search_dir), patterns="MMMMAM, AMAMAM,AAMMMM", target="demo-4m", out="x")
    picked = Transfer(named, echo=lambda line: None).select()[0]
    assert [c.source_pattern for c in picked] == ["AAMMMM", "AMAMAM", "MMMMAM"]  # best first
    kept = TransferConfig(search=str(search_dir), patterns="MMMMAM, AMAMAM,AAMMMM", target="demo-4m", attention="keep",
                          out="x")
    grown = {c.source_pattern: c.target_pattern for c in Transfer(kept, echo=lambda line: None).select()[0]}
    assert {pattern: grown[pattern].count("A") for pattern in grown} == {"AAMMMM": 2, "AMAMAM": 3, "MMMMAM": 1}


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"patterns": "AAMMMM,AAAAAA,MMMMMM"}, "AAAAAA were not scored by the search"),
        ({"patterns": "AAMMMM,MMMMMM"}, "needs at least 3"),
        ({"k": 2}, "--patterns N must be an integer >= 3"),
        ({"seeds": "0,0"}, "seeds must be distinct"),
        ({"train": {"arch": "AM"}}, "train has unknown option(s) ['arch']"),
        ({"baseline": "sandwich"}, "baseline must be llama, striped-1:R"),
        ({"workers": 0}, "workers must be a positive integer"),
        ({"attention": "drop"}, "attention must be one of repeat, keep, got 'drop'"),
    ],
)
def test_bad_requests_name_the_problem(search_dir, tmp_path, changes, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        Transfer(TransferConfig(**{"search": str(search_dir), "out": str(tmp_path / "t"), **changes}),
                 echo=lambda line: None).run()


def test_cli_errors_are_one_line_and_exit_2(tmp_path, capsys):
    assert main(["transfer", "--out", str(tmp_path)]) == 2
    assert "needs a search" in capsys.readouterr().err
    assert main(["transfer", "--from-search", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_verdict_names_a_result_only_when_the_budget_can_decide():
    assert verdict([0.2, 0.9], 0.9, 3).startswith("transfers")
    assert verdict([-0.9, -0.1], 0.9, 3).startswith("anti-transfers")
    assert verdict([-0.3, 0.9], 0.9, 3).startswith("underpowered: raise --tokens or --seeds: the interval contains 0")
    noisy = verdict([0.2, 0.9], 0.6, 3)
    assert noisy.startswith("underpowered: raise --tokens or --seeds") and "Spearman 0.60 (< 0.7)" in noisy
    assert "one seed" in verdict([0.2, 0.9], None, 1) and verdict([0.2, 0.9], None, 1).startswith("underpowered")


def test_a_swept_transfer_trains_each_pattern_at_its_best_rate_and_flags_power(search_dir, tmp_path, monkeypatch):
    """With a fake trainer: pattern p's loss is its search rank (so the search transfers perfectly), bent by how
    far the rate is from p's own best rate, plus a small seed effect."""
    best_rate = {"AAMMMM": 1e-3, "MAMAMA": 3e-3, "MMMMMM": 3e-3}
    trained, baselines = [], set()

    def train(config, resume=False):
        import math

        out = Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps({"train": config.to_dict()}))
        name = out.parent.name  # <root>/<model>/seed-<s> or <root>/<model>/lr-<rate>
        if name.startswith("llama"):  # every pattern's matched Llama: best at 3e-3, worse than all by 0.5 + seed
            baselines.add(name)
            loss = len(SCORES) + 0.5 + abs(math.log(config.lr / 3e-3)) + 0.1 * config.seed
            trained.append((name, config.lr, config.tokens, config.seed))
            summary = {"pattern": config.arch, "val_loss": loss, "tokens": config.tokens, "val_fingerprint": "v",
                       "val_tokens": 64, "loss_spikes": 0}
            (out / "summary.json").write_text(json.dumps(summary))
            return summary
        loss = list(SCORES).index(name) + abs(math.log(config.lr / best_rate[name])) + 0.01 * config.seed
        trained.append((name, config.lr, config.tokens, config.seed))
        summary = {"pattern": config.arch, "val_loss": loss, "tokens": config.tokens, "val_fingerprint": "v",
                   "val_tokens": 64, "loss_spikes": 0}
        (out / "summary.json").write_text(json.dumps(summary))
        return summary

    monkeypatch.setattr("composer.training.run.train", train)
    config = TransferConfig(search=str(search_dir), k=3, target="tiny", seeds=[0, 1], out=str(tmp_path / "t"),
                            n_boot=200, train={"tokens": 4096, "seq_len": 64, "batch_size": 8,
                                               "lr_sweep": "1e-3,3e-3", "lr_sweep_fraction": 0.5})
    report = Transfer(config, echo=lambda line: None).run()
    assert baselines, "the matched Llama baselines are trained beside the patterns"
    expected = {**best_rate, **{name: 3e-3 for name in baselines}}
    assert {(p, lr) for p, lr, tokens, _ in trained if tokens == 4096} == set(expected.items())
    assert len([t for t in trained if t[2] == 2048]) == 2 * len(expected), "every model x 2 rates, seed 0 only"
    assert len([t for t in trained if t[2] == 4096]) == 2 * len(expected), "every model x 2 seeds"
    assert {row["source_pattern"]: row["lr"] for row in report["patterns"]} == best_rate
    assert {row["name"] for row in report["baselines"]} == baselines and report["baseline"] == "llama"
    for row in report["patterns"]:
        diff = row["vs_baseline"]
        assert row["baseline"] in baselines and diff["n"] == 2 and diff["mean"] < 0 and diff["verdict"] == "lower"
        assert diff["differences"][1] - diff["differences"][0] == pytest.approx(0.01 - 0.1)
    assert "vs llama (paired Δ)" in (tmp_path / "t" / "transfer.md").read_text()
    assert report["lr_sweep"]["rates"] == [1e-3, 3e-3] and report["noise_ceiling"] == 1.0
    assert not report["underpowered"] and report["verdict"].startswith("transfers")
    assert "learning rate per architecture" in report["notes"][0]
    assert "| lr |" in (tmp_path / "t" / "transfer.md").read_text()
    assert (tmp_path / "t" / "lr_sweep.md").is_file()


# The rates an lm/recall search chose per trial (issue 25); MMMMAM and MMMMMM were scored without one.
SEARCH_LR = {"AAMMMM": 1e-3, "AMAMAM": 3e-3, "MAMAMA": 6e-3, "MMAAMM": 1e-3}


def write_rated_search(out: Path, rates: dict[str, float] = SEARCH_LR, study: bool = False) -> Path:
    """A search directory whose trials recorded a rate: leaderboard.json rows with "lr", or (``study``) an Optuna
    study.db whose trials carry the user attribute "lr" and no leaderboard at all."""
    out.mkdir()
    if study:
        import optuna
        from optuna.trial import create_trial

        made = optuna.create_study(storage=f"sqlite:///{out / 'study.db'}", study_name="lm", direction="maximize")
        for pattern, score in SCORES.items():
            attrs = {"pattern": pattern, **({"lr": rates[pattern]} if pattern in rates else {})}
            made.add_trial(create_trial(value=score, user_attrs=attrs))
        return out
    rows = [{"rank": i, "pattern": p, "score": s, "trial": i, "lr": rates.get(p)}
            for i, (p, s) in enumerate(SCORES.items(), 1)]
    (out / "leaderboard.json").write_text(json.dumps(rows))
    (out / "best.json").write_text(json.dumps({**rows[0], "direction": "maximize"}))
    return out


def fake_train(trained: dict[tuple[str, int, int], float]):
    """A trainer that records each run's (model, tokens, seed) -> the lr of the TrainConfig it was given, and
    writes the config.json and summary.json a real run writes."""
    def train(config, resume=False):
        out = Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps({"train": config.to_dict()}))
        trained[(out.parent.name, config.tokens, config.seed)] = config.lr
        summary = {"pattern": config.arch, "val_loss": 5.0 + config.seed + len(trained) / 100, "tokens": config.tokens,
                   "val_fingerprint": "v", "val_tokens": 64, "loss_spikes": 0}
        (out / "summary.json").write_text(json.dumps(summary))
        return summary

    return train


def test_a_search_rate_is_carried_into_each_patterns_training(tmp_path, capsys):
    """Real training at the tiny preset: each pattern's run trains at the rate its search trial chose."""
    search = write_rated_search(tmp_path / "search")
    out = tmp_path / "transfer"
    argv = ["transfer", "--from-search", str(search), "--patterns", "AAMMMM,MAMAMA,MMMMMM", "--seeds", "1",
            "--baseline", "none", "--out", str(out), "--json", *TRAIN]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    trained = {row["source_pattern"]: json.loads((Path(row["runs"][0]) / "config.json").read_text())["train"]["lr"]
               for row in report["patterns"]}
    assert trained == {"AAMMMM": 1e-3, "MAMAMA": 6e-3, "MMMMMM": 2e-3}, "the search's rates, else the default"
    rows = {row["source_pattern"]: row for row in report["patterns"]}
    assert {p: (r["lr"], r["lr_source"], r["search_lr"]) for p, r in rows.items()} == {
        "AAMMMM": (1e-3, "search", 1e-3), "MAMAMA": (6e-3, "search", 6e-3), "MMMMMM": (2e-3, "shared", None)}
    assert any("not a rate tuned at the target" in note for note in report["notes"])
    table = (out / "transfer.md").read_text()
    assert "| 0.006 (search) |" in table and "| 0.002 (shared) |" in table


@pytest.mark.parametrize("source", ["leaderboard", "study"])
@pytest.mark.parametrize(
    "train, expected, source_of",
    [  # no rate chosen by the user: the search's; the matched Llama takes the rate of AMAMAM, its 6-layer layout
        ({}, {"AAMMMM": 1e-3, "MAMAMA": 6e-3, "MMMMMM": 2e-3, "llama": 3e-3}, {"AAMMMM": "search", "MMMMMM": "shared"}),
        # an explicit --lr wins over the search
        ({"lr": 5e-4}, {"AAMMMM": 5e-4, "MAMAMA": 5e-4, "MMMMMM": 5e-4, "llama": 5e-4}, {"AAMMMM": "shared"}),
        # --lr-sweep wins over both (the fake loss grows with every run, so the first, lower rate wins)
        ({"lr": 5e-4, "lr_sweep": "4e-3,8e-3", "lr_sweep_fraction": 0.5},
         {"AAMMMM": 4e-3, "MAMAMA": 4e-3, "MMMMMM": 4e-3, "llama": 4e-3}, {"AAMMMM": "sweep", "MMMMMM": "sweep"}),
    ],
    ids=["search", "explicit-lr", "sweep"],
)
def test_search_rates_yield_to_an_explicit_rate_and_to_a_sweep(tmp_path, monkeypatch, source, train, expected,
                                                               source_of):
    trained: dict[tuple[str, int, int], float] = {}
    monkeypatch.setattr("composer.training.run.train", fake_train(trained))
    search = write_rated_search(tmp_path / "search", study=source == "study")
    config = TransferConfig(search=str(search), patterns="AAMMMM,MAMAMA,MMMMMM", target="tiny", seeds=[0, 1],
                            out=str(tmp_path / "t"), n_boot=200,
                            train={"tokens": 4096, "seq_len": 64, "batch_size": 8, **train})
    report = Transfer(config, echo=lambda line: None).run()
    runs = {(name, seed): lr for (name, tokens, seed), lr in trained.items() if tokens == 4096}
    assert len(runs) == 2 * (3 + len(report["baselines"])) and report["baselines"]
    for (name, _), lr in runs.items():  # the rate each run was actually trained at
        assert lr == expected["llama" if name.startswith("llama") else name], name
    rows = {row["source_pattern"]: row for row in report["patterns"]}
    for name, lr_source in source_of.items():
        assert rows[name]["lr_source"] == lr_source and rows[name]["lr"] == expected[name]
        assert rows[name]["search_lr"] == SEARCH_LR.get(name), "the search's rate is always recorded"
    for row in report["baselines"]:
        assert row["lr"] == expected["llama"] and row["search_lr_pattern"] == "AMAMAM"


def test_a_baseline_layout_the_search_never_scored_shares_the_default_rate(tmp_path, monkeypatch):
    trained: dict[tuple[str, int, int], float] = {}
    monkeypatch.setattr("composer.training.run.train", fake_train(trained))
    search = write_rated_search(tmp_path / "search", {"AAMMMM": 1e-3, "MAMAMA": 6e-3})  # AMAMAM has no rate
    config = TransferConfig(search=str(search), patterns="AAMMMM,MAMAMA,MMMMMM", target="tiny", seeds=[0],
                            out=str(tmp_path / "t"), n_boot=200, train={"tokens": 4096, "seq_len": 64, "batch_size": 8})
    report = Transfer(config, echo=lambda line: None).run()
    assert {row["lr_source"] for row in report["baselines"]} == {"shared"}
    assert {lr for (name, _, _), lr in trained.items() if name.startswith("llama")} == {2e-3}
    assert "llama" in report["notes"][0] and "at the shared 0.002" in report["notes"][0]


@pytest.mark.slow
def test_transfer_trains_each_pattern_once_per_seed_and_resumes_after_a_kill(search_dir, tmp_path, capsys):
    out = tmp_path / "transfer"
    argv = ["transfer", "--from-search", str(search_dir), "--patterns", "3", "--seeds", "2", "--out", str(out),
            "--baseline", "none", *TRAIN]
    # kill -9 the first attempt as soon as one run has finished
    env = {**os.environ, "COMPOSER_CACHE": str(tmp_path / "cache"), "WANDB_MODE": "offline"}
    child = subprocess.Popen([sys.executable, "-m", "composer", *argv], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    while not list((out / "train").glob("*/seed-*/summary.json")) and time.monotonic() < deadline:
        assert child.poll() is None, "transfer ended before any run finished"
        time.sleep(0.2)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    survivors = {path: path.stat().st_mtime_ns for path in (out / "train").glob("*/seed-*/summary.json")}
    assert survivors and not (out / "transfer.json").exists()

    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert f"{len(survivors)} of 6 runs already finished" in captured.err
    for path, mtime in survivors.items():
        assert path.stat().st_mtime_ns == mtime, f"{path} was trained again"
    for key in ("spearman", "spearman_ci", "kendall", "kendall_ci", "noise_ceiling", "noise_ceiling_pairs",
                "verdict", "patterns", "seeds", "validation"):
        assert key in report, key
    assert json.loads((out / "transfer.json").read_text()) == report
    assert report["seeds"] == [0, 1] and report["n_patterns"] == 3 and report["validation"]["same"]
    assert [row["source_pattern"] for row in report["patterns"]] == ["AAMMMM", "MAMAMA", "MMMMMM"]
    for row in report["patterns"]:
        assert set(row["losses"]) == {"0", "1"} and all(loss > 0 for loss in row["losses"].values())
        assert row["mean_loss"] == pytest.approx(sum(row["losses"].values()) / 2)
    assert len(list((out / "train").glob("*/seed-*/summary.json"))) == 6
    assert -1 <= report["spearman"] <= 1 and report["spearman_ci"][0] <= report["spearman"] <= report["spearman_ci"][1]
    assert len(report["noise_ceiling_pairs"]) == 1
    assert (out / "transfer.png").stat().st_size > 1000 and "Spearman" in (out / "transfer.md").read_text()

    # once more: nothing is trained, the report is the same
    assert main(argv) == 0
    assert "6 of 6 runs already finished" in capsys.readouterr().err


@pytest.mark.parametrize("recipe", sorted((Path(__file__).resolve().parents[3] / "recipes" / "transfer").glob("*.yaml")),
                         ids=lambda p: p.stem)
def test_transfer_recipes_load_and_their_train_section_is_valid(recipe, search_dir):
    from composer.training.config import TrainConfig

    config = TransferConfig.from_recipe(recipe, search=str(search_dir), seeds="3")
    assert config.seeds == [0, 1, 2] and config.search == str(search_dir)  # flags win over the recipe
    TrainConfig(**config.base_train, arch="AM", preset=config.target)


# A successive-halving search as composer search writes it (search.run.run_rungs): rung 0 ranks every candidate at
# its budget, rung 1 retrains the best three at a dearer one, and only rung 1 reaches leaderboard.json, best.json
# and best.json's study. Each rung's rows carry the rate that rung's trial chose.
RUNG0_LR = {"AAMMMM": 1e-3, "AMAMAM": 3e-3, "MAMAMA": 6e-3, "MMAAMM": 1e-3, "MMMMAM": 3e-3, "MMMMMM": 1e-3}
RUNG1 = {"AMAMAM": (0.70, 1e-3), "AAMMMM": (0.66, 6e-3), "MAMAMA": (0.62, 3e-3)}


def write_halving_search(out: Path, rungs: bool = True, storage: bool = False) -> Path:
    """The search directory: leaderboard.json holds rung 1's 3 rows, rungs.json (``rungs``) rung 0's 6 and rung
    1's 3; ``storage`` adds the study.db both rungs' studies live in (best.json names rung 1's)."""
    rung0 = [{"rank": i, "pattern": p, "score": s, "trial": i - 1, "lr": RUNG0_LR[p]}
             for i, (p, s) in enumerate(SCORES.items(), 1)]
    rung1 = [{"rank": i, "pattern": p, "score": s, "trial": i - 1, "lr": lr, "rung": 1}
             for i, (p, (s, lr)) in enumerate(RUNG1.items(), 1)]
    out.mkdir()
    (out / "leaderboard.json").write_text(json.dumps(rung1))
    (out / "best.json").write_text(json.dumps({**rung1[0], "study": "s-rung1", "direction": "maximize"}))
    studies = [("s", "smoke", rung0), ("s-rung1", "search-1m", rung1)]
    if rungs:
        (out / "rungs.json").write_text(json.dumps([
            {"rung": r, "study": name, "budget": budget, "candidates": len(rows), "seconds": 1.0,
             "wall_seconds": 1.0, "leaderboard": rows, "failures": []}
            for r, (name, budget, rows) in enumerate(studies)]))
    if storage:
        import optuna
        from optuna.trial import create_trial

        for name, _, rows in studies:
            made = optuna.create_study(storage=f"sqlite:///{out / 'study.db'}", study_name=name,
                                       direction="maximize")
            for row in rows:
                made.add_trial(create_trial(value=row["score"], user_attrs={"pattern": row["pattern"],
                                                                            "lr": row["lr"]}))
    return out


@pytest.mark.parametrize("storage", [False, True], ids=["json", "with-study-db"])
def test_a_halving_search_spreads_k_over_rung_0_not_the_last_rungs_finalists(tmp_path, storage):
    """Issue 34: --k 4 after a halving search trained the last rung's 3 finalists; rung 0 ranks all 6."""
    search = write_halving_search(tmp_path / "search", storage=storage)
    transfer = Transfer(TransferConfig(search=str(search), k=4, target="demo-4m", out=str(tmp_path / "t")),
                        echo=lambda line: None)
    candidates, source = transfer.select()
    assert [c.source_pattern for c in candidates] == ["AAMMMM", "MAMAMA", "MMAAMM", "MMMMMM"]
    assert [c.search_rank for c in candidates] == [1, 3, 4, 6]
    assert [c.score for c in candidates] == [SCORES[c.source_pattern] for c in candidates], "rung 0's scores"
    assert transfer.rates == RUNG0_LR, "each pattern brings the rate its rung-0 trial chose"
    assert source["scored_patterns"] == 6 and source["source"]["rung"] == 0 and source["source"]["rungs"] == 2


def test_choose_spreads_k_over_the_chosen_rungs_ranking(tmp_path):
    from composer.experiments.transfer import choose, search_ranking

    search = str(write_halving_search(tmp_path / "search"))
    assert [s.pattern for s in choose(search_ranking(search), 4)] == ["AAMMMM", "MAMAMA", "MMAAMM", "MMMMMM"]
    assert [s.pattern for s in choose(search_ranking(search, rung=0), 6)] == list(SCORES)
    last = choose(search_ranking(search, rung="last"), 3)
    assert [(s.pattern, s.score, s.lr) for s in last] == [(p, s, lr) for p, (s, lr) in RUNG1.items()]


def test_a_rung_with_fewer_than_k_patterns_stops_with_one_line(tmp_path, capsys):
    search = write_halving_search(tmp_path / "search")
    expected = (f"rung 1 of {search} ranks only 3 distinct patterns, fewer than --patterns 4: lower --patterns to 3 "
                "or take --rung 0 (every candidate)")
    with pytest.raises(ConfigError) as raised:
        Transfer(TransferConfig(search=str(search), k=4, rung=1, target="demo-4m", out=str(tmp_path / "t")),
                 echo=lambda line: None).select()
    assert str(raised.value) == expected
    out = tmp_path / "cli"
    assert main(["transfer", "--from-search", str(search), "--rung", "1", "--patterns", "4", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and not out.exists(), "stopped before training anything"


def test_rung_last_takes_the_finalists_with_their_own_scores_and_rates(tmp_path):
    search = write_halving_search(tmp_path / "search")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("rung: last\nk: 3\n")
    for config in (TransferConfig(search=str(search), k=3, rung="1", target="demo-4m", out="x"),
                   TransferConfig.from_recipe(recipe, search=str(search), target="demo-4m", out="x")):
        transfer = Transfer(config, echo=lambda line: None)
        candidates, source = transfer.select()
        assert [(c.source_pattern, c.score, c.search_rank) for c in candidates] == [
            ("AMAMAM", 0.70, 1), ("AAMMMM", 0.66, 2), ("MAMAMA", 0.62, 3)]
        assert transfer.rates == {p: lr for p, (_, lr) in RUNG1.items()}, "the rates rung 1 scored them at"
        assert source["source"]["rung"] == 1 and source["source"]["study"] == "s-rung1"


def test_a_search_without_rungs_ranks_its_leaderboard_and_says_when_it_is_too_short(tmp_path):
    search = write_halving_search(tmp_path / "search", rungs=False)  # as a one-shot search leaves it
    candidates, source = Transfer(TransferConfig(search=str(search), k=3, target="demo-4m", out="x"),
                                  echo=lambda line: None).select()
    assert [c.source_pattern for c in candidates] == list(RUNG1) and source["source"]["kind"] == "leaderboard"
    with pytest.raises(ConfigError, match=r"ranks only 3 distinct patterns, fewer than --patterns 4: lower --patterns "
                                          r"to 3 or run "
                                          r"more trials$"):
        Transfer(TransferConfig(search=str(search), k=4, target="demo-4m", out="x"), echo=lambda line: None).select()


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"rung": "first"}, "rung must be a rung index (0, 1, ...) or 'last', got 'first'"),
        ({"rung": -1}, "rung must be a rung index (0, 1, ...) or 'last', got -1"),
        ({"rung": 2}, "rung must be 0 to 1 or 'last'"),
        ({"rung": 0, "study": "s"}, "give --rung or --study, not both"),
        ({"rung": 0, "search": "leaderboard.json"}, "--rung reads rungs.json in a composer search --out directory"),
        ({"rung": 0, "search": "one-shot"}, "holds no rungs.json (not a successive-halving search): leave out"),
    ],
)
def test_bad_rungs_name_the_problem(tmp_path, changes, message):
    search = write_halving_search(tmp_path / "search")
    write_halving_search(tmp_path / "one-shot", rungs=False)
    where = {"leaderboard.json": str(search / "leaderboard.json"), "one-shot": str(tmp_path / "one-shot")}
    changes = {**changes, "search": where.get(changes.get("search"), str(search))}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        Transfer(TransferConfig(**{"k": 3, "target": "demo-4m", "out": "x", **changes}), echo=lambda line: None).select()


# ------------------------------------------------------------------------- attention at the target (issue 47, 7)


@pytest.mark.parametrize("given", ["directory", "leaderboard.json"])
def test_the_patterns_grow_by_the_rule_their_search_scored_them_by(search_dir, tmp_path, given):
    """A search run with --attention-at-target keep scored and costed its patterns with their attention kept: the
    transfer grows them the same way unless --attention says otherwise."""
    (search_dir / "config.json").write_text(json.dumps({"evaluator": "lm", "attention_at_target": "keep"}))
    search = search_dir if given == "directory" else search_dir / "leaderboard.json"
    config = TransferConfig(search=str(search), patterns="MMMMAM,AMAMAM,AAMMMM", target="demo-4m", out="x")
    assert config.attention == "keep" and "--attention-at-target keep" in config.attention_from
    grown = {c.source_pattern: c.target_pattern for c in Transfer(config, echo=lambda line: None).select()[0]}
    assert {pattern: grown[pattern].count("A") for pattern in grown} == {"AAMMMM": 2, "AMAMAM": 3, "MMMMAM": 1}
    explicit = TransferConfig(search=str(search), patterns="MMMMAM,AMAMAM,AAMMMM", target="demo-4m", attention="repeat",
                              out="x")
    assert explicit.attention == "repeat" and "the search's was keep" in explicit.attention_from
    stacked = {c.source_pattern: c.target_pattern for c in Transfer(explicit, echo=lambda line: None).select()[0]}
    assert stacked["AMAMAM"].count("A") == 9


def test_a_search_without_its_rule_grows_by_repeat_and_says_so(tmp_path, monkeypatch):
    trained: dict[tuple[str, int, int], float] = {}
    monkeypatch.setattr("composer.training.run.train", fake_train(trained))
    search = write_rated_search(tmp_path / "search")  # a leaderboard and best.json, no config.json
    config = TransferConfig(search=str(search), patterns="AAMMMM,MAMAMA,MMMMMM", target="tiny", seeds=[0],
                            baseline=None, out=str(tmp_path / "t"), n_boot=200,
                            train={"tokens": 4096, "seq_len": 64, "batch_size": 8})
    lines: list[str] = []
    report = Transfer(config, echo=lines.append).run()
    assert report["attention"] == "repeat" and "default" in report["attention_from"]
    said = next(line for line in lines if "attention" in line)
    assert "repeat" in said and "--attention-at-target keep" in said
    from composer.experiments.transfer import format_report

    assert "attention repeated" in format_report(report)


def test_a_known_layout_of_a_kept_search_is_stacked_as_the_search_trained_it(search_dir):
    """The search stacks Llama's layout whatever its --attention-at-target (search.growth.grow)."""
    (search_dir / "config.json").write_text(json.dumps({"attention_at_target": "keep"}))
    best = json.loads((search_dir / "best.json").read_text())
    best["known_layouts"] = [{"name": "llama", "pattern": "AMAMAM", "fit": "1:1 alternation"}]
    (search_dir / "best.json").write_text(json.dumps(best))
    config = TransferConfig(search=str(search_dir), patterns="MMMMAM,AMAMAM,AAMMMM", target="demo-4m", out="x")
    transfer = Transfer(config, echo=lambda line: None)
    grown = {c.source_pattern: (c.attention, c.target_pattern.count("A")) for c in transfer.select()[0]}
    assert grown == {"AAMMMM": ("keep", 2), "AMAMAM": ("repeat", 9), "MMMMAM": ("keep", 1)}
    assert ["known layout llama" in note for note in transfer.attention_notes] == [True]  # run() echoes it
    asked = TransferConfig(search=str(search_dir), patterns="MMMMAM,AMAMAM,AAMMMM", target="demo-4m", attention="keep",
                           out="x")
    asked_grown = {c.source_pattern: c.attention for c in Transfer(asked, echo=lambda line: None).select()[0]}
    assert asked_grown == {"AAMMMM": "keep", "AMAMAM": "repeat", "MMMMAM": "keep"}, "a known layout by its own rule"
