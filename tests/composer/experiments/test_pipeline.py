"""The end-to-end pipeline (composer/experiments/pipeline/): recipe validation, the CPU demo at its smallest budget, resume."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from composer.cli import main
from composer.errors import ConfigError
from composer.experiments.pipeline import Pipeline, PipelineConfig, read_loss_curve

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "recipes" / "pipeline" / "cpu-demo.yaml"
RECIPES = sorted((ROOT / "recipes" / "pipeline").glob("*.yaml"))


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_every_pipeline_recipe_loads_and_its_target_extrapolates(recipe):
    from scaling.extrapolate import extrapolate
    from scaling.matching import matched_baselines

    config = PipelineConfig.from_recipe(recipe)
    result = extrapolate("AAMMMM", config.extrapolate["target"], method=config.extrapolate.get("method", "auto"))
    assert set(matched_baselines(result.arch, tuple(config.baselines))) == set(config.baselines)
    pipeline = Pipeline(config)
    if config.lr_sweep is not None:  # every sweep run's TrainConfig is valid; the seeds then use the chosen rate
        from composer.experiments.lr_sweep import plan_sweep

        sweep = plan_sweep({"composite": result.pattern}, config.lr_sweep, Path("unused"), config.base_train,
                           config.extrapolate["target"], seed=config.seeds[0])
        assert [r.config.lr for r in sweep] == list(config.lr_sweep.rates)
        pipeline._sweep = {"models": {"composite": {"chosen_lr": config.lr_sweep.rates[0]}}}
    plan = pipeline.plan({"composite": result.pattern})  # TrainConfig accepts the shared train section
    assert [r.seed for r in plan] == config.seeds and len(set(config.seeds)) >= 3, "comparisons need seeds"


@pytest.mark.parametrize("name", ["halving-answer-vs-published", "default-answer-vs-published"])
def test_the_answer_recipes_read_their_search_instead_of_a_hand_written_aggregate(name):
    text = (ROOT / "recipes" / "pipeline" / f"{name}.yaml").read_text()
    config = PipelineConfig.from_recipe(ROOT / "recipes" / "pipeline" / f"{name}.yaml")
    assert config.from_search and f"--out {config.from_search}" in text, "the header runs the search it reads"
    assert "aggregate.json" not in text and not config.search and not config.aggregate


@pytest.mark.parametrize(
    "recipe, message",
    [
        ({"serach": {}}, "unknown option(s) ['serach']"),
        ({"search": {"trails": 3}, "extrapolate": {"target": "tiny"}}, "search has unknown option(s) ['trails']"),
        ({"train": {"arch": "AM"}, "extrapolate": {"target": "tiny"}}, "train has unknown option(s) ['arch']"),
        ({"extrapolate": {"method": "stack"}}, "needs 'target'"),
        ({"extrapolate": {"target": "tiny"}, "seeds": [0, 0]}, "seeds must be distinct"),
        ({"extrapolate": {"target": "tiny"}, "seeds": "0,x"}, "comma-separated seeds such as 0,1,2"),
        ({"extrapolate": {"target": "tiny"}, "seeds": []}, "seeds must be a non-empty list"),
        ({"extrapolate": {"target": "tiny"}, "train": {"seed": 3}}, "train has unknown option(s) ['seed']"),
        ({"from_search": "runs/search", "search": {"trials": 3}, "extrapolate": {"target": "tiny"}},
         "a search section (a search it runs under out; --trials and --budget set it) or from_search"),
        ({"from_search": "runs/search", "aggregate": {"c": 0}, "extrapolate": {"target": "tiny"}},
         "from_search trains the search's answer, so nothing is voted: drop the aggregate section"),
    ],
)
def test_bad_recipes_name_the_problem(tmp_path, recipe, message):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        PipelineConfig.from_recipe(path)


def test_cli_usage_errors_exit_2(tmp_path, capsys):
    assert main(["pipeline", "--recipe", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["pipeline", "--recipe", str(DEMO), "--out", str(tmp_path), "--stages", "serch"]) == 2
    assert "unknown stage" in capsys.readouterr().err
    assert main(["pipeline", "--recipe", str(DEMO), "--out", str(tmp_path / "empty"), "--stages", "train"]) == 2
    assert "aggregate.json does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_cpu_demo_pipeline_runs_end_to_end_with_seeds_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "pipeline"
    recipe = yaml.safe_load(DEMO.read_text())
    recipe["train"]["val_tokens"] = 8 * 128  # the test's budget; the recipe scores the whole held-out split
    recipe["search"]["preset"] = "tiny"  # MAD's smoke tasks at tiny widths: 11 s a candidate, not 35 s
    recipe["baselines"] = ["llama"]  # the reference alone: each model costs 4 runs here (2 rates, 2 seeds)
    small = tmp_path / "cpu-demo.yaml"
    small.write_text(yaml.safe_dump(recipe))
    # recall on 4 sequences: test_pipeline_recall.py tests the measurement, here it need only run
    argv = ["pipeline", "--recipe", str(small), "--out", str(out), "--recall-sequences", "4", "--trials", "2",
            "--lr-sweep", "2e-3,6e-3", "--lr-sweep-fraction", "0.5", "--tokens", "4096", "--seeds", "0,1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out

    aggregate = json.loads((out / "aggregate.json").read_text())
    extrapolation = json.loads((out / "extrapolate.json").read_text())
    assert extrapolation["source_pattern"] == aggregate["pattern"]
    assert extrapolation["method"] == "stack" and extrapolation["target"] == "demo-4m"
    comparison = json.loads((out / "comparison.json").read_text())
    rows = comparison["models"]
    assert comparison["seeds"] == [0, 1] and comparison["reference"] == "llama"
    assert comparison["validation"]["same"], "every run is scored on the same held-out text"
    assert rows[0]["model"] == "composite" and rows[0]["pattern"] == extrapolation["compact"]
    names = [row["model"] for row in rows]
    for row in rows:
        losses = [row["val_losses"][str(seed)] for seed in (0, 1)]
        assert row["val_loss"] == pytest.approx(sum(losses) / 2) and row["tokens_per_s"] > 0 and row["params"] > 0
        assert row["val_loss_ci"][0] < row["val_loss"] < row["val_loss_ci"][1]
        assert row["tokens"] == rows[0]["tokens"], "every model trains on the same number of tokens"
        assert set(row["spiked_seeds"]) <= {0, 1}  # seeds whose training spiked (issue 16), marked in the table
        assert (row["state_bytes"] > 0) == any(symbol in row["pattern"] for symbol in "SD") and 0 < row["active_params"] <= row["params"]
        assert row["chosen_lr"] in (2e-3, 6e-3) and set(row["lr_sweep"]) == {"0.002", "0.006"}
        chosen = min((loss, float(lr)) for lr, loss in row["lr_sweep"].items() if loss is not None)[1]
        assert row["chosen_lr"] == chosen, "each model trains its seeds at its best swept rate"
        assert f"| {row['model']} |" in printed
        if row["model"] == "llama":
            assert row["verdict"] == "reference" and row["diff_vs_reference"] == 0
        else:
            reference = next(r for r in rows if r["model"] == "llama")["val_losses"]
            for seed in ("0", "1"):
                assert row["diff_per_seed"][seed] == pytest.approx(row["val_losses"][seed] - reference[seed])
            assert row["verdict"] in ("lower", "higher", "within noise")
        for seed in (0, 1):
            summary = json.loads((out / "train" / row["model"] / f"seed-{seed}" / "summary.json").read_text())
            assert summary["seed"] == seed and summary["val_fingerprint"] == comparison["validation"]["val_fingerprint"]
    assert set(names) - {"composite"} <= set(extrapolation["baselines"])
    markdown = (out / "comparison.md").read_text()
    assert markdown.startswith("| model |") and "Seeds 0, 1" in markdown and "| KV B/token | state B |" in markdown
    with open(out / "comparison.csv") as f:
        assert len(f.read().splitlines()) == len(rows) + 1
    assert (out / "loss_curves.png").stat().st_size > 1000
    assert read_loss_curve(out / "train" / "composite" / "seed-0"), "the validation curve is read from the CSV logs"
    for name in names:  # one W&B run per (model, seed), not one run reused by all
        assert list((out / "train" / name / "seed-1" / "wandb").glob("offline-run-*")), name

    assert comparison["lr_sweep"]["rates"] == [2e-3, 6e-3] and "power" in comparison and comparison["conclusion"]
    assert (out / "lr_sweep.md").is_file() and (out / "lr_sweep.png").stat().st_size > 1000

    # Re-running resumes: the search study is complete, and no sweep point or (model, seed) is trained again.
    summaries = sorted((out / "train").glob("*/seed-*/summary.json"))
    swept = sorted((out / "lr-sweep").glob("*/lr-*/summary.json"))
    assert len(summaries) == 2 * len(names) and len(swept) == 2 * len(names)
    before = {path: os.stat(path).st_mtime_ns for path in summaries + swept}
    assert main(argv) == 0
    assert f"{len(summaries)} of {len(summaries)} runs already finished" in capsys.readouterr().err
    assert before == {path: os.stat(path).st_mtime_ns for path in summaries + swept}
    # Changed settings are refused instead of being mixed into the table.
    assert main([*argv[:-3], "8192", "--seeds", "1"]) == 2
    assert "was trained with other settings: tokens=2048 (now 4096)" in capsys.readouterr().err  # a sweep point

    # kill -9 during the learning-rate sweep, then the same command (issue 27): no finished sweep point is trained
    # again, and the comparison equals the unkilled run's
    import shutil
    import signal
    import subprocess
    import sys
    import time

    killed = tmp_path / "killed"
    shutil.copytree(out / "search", killed / "search")  # finished (its resume is checked above): start at the sweep
    command = [sys.executable, "-m", "composer", *argv[:4], str(killed), *argv[5:]]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while process.poll() is None and time.time() < deadline and not list((killed / "lr-sweep").glob("*/lr-*/summary.json")):
        time.sleep(0.05)
    assert process.poll() is None, "the pipeline left its sweep before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    done = {path: os.stat(path).st_mtime_ns for path in (killed / "lr-sweep").glob("*/lr-*/summary.json")}
    assert 1 <= len(done) < len(swept) and not (killed / "train").exists()
    capsys.readouterr()
    assert main(command[3:]) == 0  # the same command, here: a third process would only import torch again
    said = capsys.readouterr()
    assert f"{len(done)} of {len(swept)} runs already finished" in said.out + said.err
    assert done == {path: os.stat(path).st_mtime_ns for path in done}, "a finished sweep point was trained again"
    resumed = json.loads((killed / "comparison.json").read_text())
    assert {row["model"]: row["chosen_lr"] for row in resumed["models"]} == {row["model"]: row["chosen_lr"] for row in rows}
    for ours, theirs in zip(resumed["models"], rows, strict=True):
        assert ours["val_losses"] == pytest.approx(theirs["val_losses"], rel=1e-5), ours["model"]


def test_the_conclusion_names_a_winner_only_when_the_budget_can_decide():
    from composer.experiments.pipeline import conclusion, format_comparison
    from composer.statistics import seed_separation

    def row(model, losses, verdict, diff=None, ci=None):
        return {"model": model, "pattern": "AM", "layers": 2, "val_loss": sum(losses) / len(losses),
                "val_loss_std": 0.01, "val_loss_ci": [1.0, 3.0], "diff_vs_reference": diff, "diff_ci": ci,
                "verdict": verdict, "tokens_per_s": 1.0, "tokens_per_s_ratio": 1.0, "params": 1,
                "kv_cache_bytes_per_token": 1, "chosen_lr": 3e-3, "val_losses": dict(enumerate(losses))}

    decided = [row("composite", [2.00, 2.01], "lower", -0.5, [-0.6, -0.4]), row("llama", [2.50, 2.51], "reference"),
               row("sandwich", [3.00, 3.02], "higher", 0.5, [0.4, 0.6])]
    power = seed_separation({r["model"]: r["val_losses"] for r in decided})
    answer = conclusion(decided, "llama", power)
    assert not answer["underpowered"] and "lower than llama's by -0.5000 ([-0.6000, -0.4000]" in answer["conclusion"]
    table = format_comparison({"models": decided, "reference": "llama", "confidence": 0.95, "seeds": [0, 1],
                               "validation": {"same": False}, "notes": [], "power": power, **answer})
    assert "2.0050 ± 0.0100 *" in table and "**Conclusion:** the composite's validation loss is lower" in table

    close = [row("composite", [2.00, 2.40], "within noise", -0.05, [-0.9, 0.8]), row("llama", [2.45, 2.05], "reference"),
             row("sandwich", [3.00, 3.02], "higher", 0.8, [0.1, 1.5])]
    power = seed_separation({r["model"]: r["val_losses"] for r in close})
    answer = conclusion(close, "llama", power)
    assert answer["underpowered"] and answer["conclusion"].startswith("underpowered: raise --tokens or --seeds")
    assert "interval containing 0 (within noise)" in answer["conclusion"]
    table = format_comparison({"models": close, "reference": "llama", "confidence": 0.95, "seeds": [0, 1],
                               "validation": {"same": False}, "notes": [], "power": power, **answer})
    assert " *" not in table, "no winner is starred when the budget cannot decide"
    assert "**Conclusion:** underpowered" in table and "Power: seed std within a model" in table


def test_a_spiked_seed_is_marked_in_the_table():
    from composer.experiments.pipeline import format_comparison

    row = {"model": "hybrid", "pattern": "AM", "layers": 2, "val_loss": 2.0, "val_loss_std": 0.1,
           "val_loss_ci": [1.9, 2.1], "diff_vs_reference": None, "diff_ci": None, "verdict": "reference",
           "tokens_per_s": 100.0, "tokens_per_s_ratio": 1.0, "params": 10, "kv_cache_bytes_per_token": 4,
           "spiked_seeds": [1]}
    comparison = {"models": [row], "reference": "hybrid", "confidence": 0.95, "seeds": [0, 1],
                  "validation": {"same": False}, "notes": []}
    assert "reference (spiked: seed 1)" in format_comparison(comparison)


# ------------------------------------------------------------------------------ starting rates from the search


def rated_aggregation(pattern: str, rates: dict[str, float]) -> dict:
    """The parts of aggregate.json the starting rates read: the voted pattern, its members and the search rates."""
    return {"pattern": pattern, "rates": rates,
            "members": [{"pattern": "AAMMMM", "score": 0.9}, {"pattern": "AAMMAM", "score": 0.8}]}


@pytest.mark.parametrize(
    "pattern, train, composite, llama",
    [
        ("AAMMAM", {}, (6e-3, "search", "AAMMAM"), (3e-3, "search")),  # the composite's own pattern was scored
        ("AAAMAM", {}, (1e-3, "search", "AAMMMM"), (3e-3, "search")),  # voted, never scored: the best member's
        ("AAAMAM", {"lr": 5e-4}, (5e-4, "shared", "AAMMMM"), (5e-4, "shared")),  # an explicit train.lr wins
        ("AAAMAM", {"lr": 5e-4, "lr_sweep": [1e-3, 2e-3]}, (2e-3, "sweep", "AAMMMM"), (1e-3, "sweep")),  # a sweep
    ],
    ids=["own", "best-member", "explicit-lr", "sweep"],
)
def test_the_composite_starts_at_its_search_rate_unless_the_recipe_decides(tmp_path, pattern, train, composite,
                                                                             llama):
    config = PipelineConfig(out=str(tmp_path), extrapolate={"target": "tiny"}, baselines=["llama", "sandwich"],
                            train={"tokens": 4096, "seq_len": 64, "batch_size": 8, **train})
    pipeline = Pipeline(config, echo=lambda line: None)
    pipeline._sweep = {"models": {"composite": {"chosen_lr": 2e-3}, "llama": {"chosen_lr": 1e-3},
                                  "sandwich": {"chosen_lr": 1e-3}}}
    models = {"composite": "AAMMA", "llama": "AMAM", "sandwich": "AAMMM"}
    pipeline.use_search_rates(rated_aggregation(pattern, {"AAMMMM": 1e-3, "AAMMAM": 6e-3, "AMAMAM": 3e-3}), models)
    rates = pipeline.starting_rates(models)
    assert (rates["composite"].lr, rates["composite"].source, rates["composite"].search.pattern) == composite
    assert (rates["llama"].lr, rates["llama"].source) == llama and rates["llama"].search.pattern == "AMAMAM"
    assert rates["sandwich"].search is None, "a sandwich has no layout of its own at the search depth"
    planned = {(r.name, r.seed): r.config.lr for r in pipeline.plan(models)}
    assert planned[("composite", 0)] == planned[("composite", 2)] == composite[0]
    assert planned[("llama", 1)] == llama[0]


def test_a_pipeline_from_a_rated_search_trains_and_reports_the_search_rates(tmp_path, monkeypatch):
    """aggregate -> extrapolate -> train (a fake trainer that writes what a run writes) -> compare, from a
    leaderboard.json whose rows carry the rate each trial chose."""
    out = tmp_path / "pipeline"
    (out / "search").mkdir(parents=True)
    scores = {"AAMMMM": (0.95, 1e-3), "AMAMAM": (0.60, 5e-4), "MAMAMA": (0.40, 6e-3), "MMAAMM": (0.25, None),
              "MMMMAM": (0.10, 1e-3), "MMMMMM": (0.01, None)}  # striped-1:3's 6-layer AMMMAM was not scored
    rows = [{"rank": i, "pattern": p, "score": s, "trial": i, "lr": lr}
            for i, (p, (s, lr)) in enumerate(scores.items())]
    (out / "search" / "leaderboard.json").write_text(json.dumps(rows))

    def train(config, resume=False):
        run = Path(config.out)
        run.mkdir(parents=True, exist_ok=True)
        (run / "config.json").write_text(json.dumps({"train": config.to_dict()}))
        summary = {"pattern": config.arch, "val_loss": 5.0 + 0.1 * config.seed + len(config.arch) / 100,
                   "tokens": config.tokens, "tokens_per_s": 100.0, "params": 1000, "non_embedding_params": 500,
                   "val_fingerprint": "v", "val_tokens": 64, "loss_spikes": 0, "seed": config.seed}
        (run / "summary.json").write_text(json.dumps(summary))
        return summary

    monkeypatch.setattr("composer.training.run.train", train)
    config = PipelineConfig(out=str(out), extrapolate={"target": "tiny"}, baselines=["llama", "striped-1:3"],
                            seeds=[0, 1], train={"tokens": 4096, "seq_len": 64, "batch_size": 8})
    result = Pipeline(config, echo=lambda line: None).run(("aggregate", "extrapolate", "train", "compare"))
    aggregate = json.loads((out / "aggregate.json").read_text())
    assert aggregate["pattern"] == "AAMMMM" and aggregate["lr"] == 1e-3 and aggregate["rates"]["AMAMAM"] == 5e-4
    rows = {row["model"]: row for row in json.loads((out / "comparison.json").read_text())["models"]}
    assert rows == {row["model"]: row for row in result["comparison"]["models"]}
    expected = {"composite": (1e-3, "search", "AAMMMM"), "llama": (5e-4, "search", "AMAMAM"),
                "striped-1:3": (3e-3, "shared", None)}  # TrainConfig's default rate
    assert set(rows) == set(expected)
    for name, (lr, source, searched) in expected.items():
        row = rows[name]
        assert (row["chosen_lr"], row["lr_source"], row["search_lr_pattern"]) == (lr, source, searched), name
        for seed in (0, 1):  # the rate each run was actually trained at
            trained = json.loads((out / "train" / name / f"seed-{seed}" / "config.json").read_text())["train"]
            assert trained["lr"] == lr, (name, seed)
    notes = result["comparison"]["notes"]
    assert any("from the search for composite, llama" in note for note in notes)
    assert any("not a rate tuned at the target" in note for note in notes)
    assert "lr_source" in (out / "comparison.csv").read_text().splitlines()[0]


# ------------------------------------------------------------------------- attention at the target (issue 47, 7)


def searched_with(out: Path, attention: str | None, known: dict[str, str] | None = None) -> None:
    """``out/search`` as ``composer search --attention-at-target ATTENTION`` leaves it: config.json with the rule
    and best.json with the known layouts it entered (name -> pattern); None: no search ran there."""
    (out / "search").mkdir(parents=True, exist_ok=True)
    if attention is not None:
        (out / "search" / "config.json").write_text(json.dumps({"attention_at_target": attention}))
        layouts = [{"name": name, "pattern": p, "fit": "whole periods"} for name, p in (known or {}).items()]
        (out / "search" / "best.json").write_text(json.dumps({"pattern": "SDDMAS", "known_layouts": layouts}))


@pytest.mark.parametrize(
    "search_rule, options, rule",
    [
        ("keep", {}, "keep"),  # the search scored and costed the kept model: the winner grows as it did
        ("repeat", {}, "repeat"),
        ("keep", {"attention": "repeat"}, "repeat"),  # an explicit setting wins
        ("repeat", {"attention": "keep"}, "keep"),
        (None, {}, "repeat"),  # no search in out: the extrapolator's default
    ],
    ids=["search-keep", "search-repeat", "explicit-repeat", "explicit-keep", "no-search"],
)
def test_the_winner_grows_to_the_target_by_the_rule_its_search_used(tmp_path, search_rule, options, rule):
    from scaling.extrapolate import extrapolate

    searched_with(tmp_path, search_rule)
    config = PipelineConfig(out=str(tmp_path), extrapolate={"target": "demo-4m", **options}, baselines=["llama"])
    data = Pipeline(config, echo=lambda line: None).run_extrapolate("SDDMAS")
    assert data["attention"] == rule
    assert data["pattern"] == extrapolate("SDDMAS", "demo-4m", attention=rule).pattern
    assert json.loads((tmp_path / "extrapolate.json").read_text())["pattern"] == data["pattern"]


def test_the_search_section_names_the_rule_before_its_search_has_run(tmp_path):
    config = PipelineConfig(out=str(tmp_path), search={"attention_at_target": "keep"},
                            extrapolate={"target": "demo-4m"}, baselines=[])
    data = Pipeline(config, echo=lambda line: None).run_extrapolate("SDDMAS")
    assert data["attention"] == "keep" and data["pattern"].count("A") == 1


def test_a_known_layout_from_a_kept_search_is_stacked_as_the_search_trained_it(tmp_path):
    """search.growth.grow stacks Llama's and the paper's layouts whatever --attention-at-target says."""
    from scaling.extrapolate import extrapolate

    searched_with(tmp_path, "keep", {"llama": "AMAMAM", "composer-paper": "AAMMMM"})
    config = PipelineConfig(out=str(tmp_path), extrapolate={"target": "demo-4m"}, baselines=[])
    lines: list[str] = []
    data = Pipeline(config, echo=lines.append).run_extrapolate("AMAMAM")
    assert data["attention"] == "repeat" and data["pattern"] == extrapolate("AMAMAM", "demo-4m").pattern
    assert "known layout llama" in "\n".join(lines)
    assert Pipeline(config).run_extrapolate("SDDMAS")["attention"] == "keep", "a new pattern keeps its attention"
    searched_with(tmp_path, "keep", {"nemotron-h": "SMSAMS"})  # trained in its own layout, as the search did
    lines.clear()
    family = Pipeline(config, echo=lines.append).run_extrapolate("SMSAMS")
    assert family["method"] == "family" and family["pattern"].count("A") == 1 and family["known"] == "nemotron-h"
    assert "the search's known layout nemotron-h: nemotron-h's own layout at" in "\n".join(lines)


def test_a_changed_rule_grows_the_winner_again(tmp_path):
    searched_with(tmp_path, "repeat")
    config = PipelineConfig(out=str(tmp_path), extrapolate={"target": "demo-4m"}, baselines=[])
    stacked = Pipeline(config, echo=lambda line: None).run_extrapolate("SDDMAS")
    config.extrapolate["attention"] = "keep"
    kept = Pipeline(config, echo=lambda line: None).run_extrapolate("SDDMAS")
    assert (stacked["attention"], kept["attention"]) == ("repeat", "keep") and kept["pattern"] != stacked["pattern"]


def test_a_bad_attention_rule_is_refused():
    with pytest.raises(ConfigError, match="extrapolate.attention must be one of repeat, keep"):
        PipelineConfig(extrapolate={"target": "demo-4m", "attention": "kept"})


def test_the_cli_overrides_the_attention_rule(tmp_path, capsys):
    searched_with(tmp_path, "repeat")
    (tmp_path / "aggregate.json").write_text(json.dumps({"pattern": "AAMMMM", "members": []}))
    assert main(["pipeline", "--recipe", str(DEMO), "--out", str(tmp_path), "--stages", "extrapolate",
                 "--attention-at-target", "keep", "--json"]) == 0
    extrapolation = json.loads((tmp_path / "extrapolate.json").read_text())
    assert extrapolation["attention"] == "keep" and extrapolation["attention_from"] == "extrapolate.attention"
    assert extrapolation["pattern"].count("A") == 2
