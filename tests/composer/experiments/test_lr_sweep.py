"""The learning-rate sweep before a seeded comparison (composer/experiments/lr_sweep.py): parsing, the choice rule, resume,
diverged rates, the reports, and the pipeline and transfer using each architecture's chosen rate."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from composer.errors import ComposerRunError, ConfigError
from composer.experiments.lr_sweep import (
    LRSweep,
    choose,
    parse_rates,
    plan_sweep,
    rate_label,
    run_sweep,
    split_sweep,
    sweep_notes,
)

# a loss surface with a different best rate per architecture; "fragile" diverges above 3e-3
BEST = {"AAMM": 3e-3, "AMAM": 1e-3, "fragile": 2e-3}


def fake_loss(arch: str, lr: float) -> float | None:
    if arch == "fragile" and lr > 3e-3:
        return None
    return 2.0 + abs(math.log(lr / BEST[arch])) + 0.001 * len(arch)


class FakeTrain:
    """Stands in for composer.training.run.train: writes what a finished (or diverged) run leaves behind, and can
    be told to die (like a killed process) after some runs."""

    def __init__(self, die_after: int | None = None) -> None:
        self.calls: list[tuple[str, float, int, int]] = []
        self.die_after = die_after

    def __call__(self, config, resume=False):
        if self.die_after is not None and len(self.calls) >= self.die_after:
            raise KeyboardInterrupt
        self.calls.append((config.arch, config.lr, config.tokens, config.seed))
        out = Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps({"train": config.to_dict()}))
        loss = fake_loss(config.arch, config.lr)
        summary = {"pattern": config.arch, "val_loss": loss, "tokens": config.tokens, "tokens_per_s": 1000.0,
                   "val_fingerprint": "abc", "val_tokens": 128, "diverged": loss is None,
                   "loss_spikes": 1 if config.lr > 5e-3 else 0, "params": 10, "non_embedding_params": 5}
        (out / "summary.json").write_text(json.dumps(summary))
        if loss is None:
            raise ComposerRunError(f"training diverged at step 3 (non-finite loss) at lr {config.lr:g}")
        return summary


@pytest.fixture
def fake(monkeypatch):
    train = FakeTrain()
    monkeypatch.setattr("composer.training.run.train", train)
    return train


@pytest.mark.parametrize("given, rates", [([3e-3, 1e-3], (1e-3, 3e-3)), ("1e-3, 6e-3,2e-3", (1e-3, 2e-3, 6e-3)),
                                          (2e-3, (2e-3,))])
def test_rates_parse_from_recipes_and_flags_in_ascending_order(given, rates):
    assert parse_rates(given) == rates


@pytest.mark.parametrize("given, message", [("1e-3,x", "comma-separated learning rates"), ([], "non-empty list"),
                                            ([1e-3, -1.0], "positive"), ([1e-3, 1e-3], "repeated rate")])
def test_bad_rates_name_the_problem(given, message):
    with pytest.raises(ConfigError, match=message):
        parse_rates(given)


def test_the_sweep_keys_are_split_from_the_train_section():
    base, sweep = split_sweep({"tokens": 8192, "lr": 3e-3, "lr_sweep": "1e-3,2e-3", "lr_sweep_fraction": 0.5})
    assert base == {"tokens": 8192, "lr": 3e-3} and sweep == LRSweep((1e-3, 2e-3), 0.5, None)
    assert split_sweep({"tokens": 8192}) == ({"tokens": 8192}, None)
    with pytest.raises(ConfigError, match="lr_sweep_fraction is set but train.lr_sweep is not"):
        split_sweep({"lr_sweep_fraction": 0.5})
    with pytest.raises(ConfigError, match=r"lr_sweep_fraction must be in \(0, 1\]"):
        split_sweep({"lr_sweep": [1e-3], "lr_sweep_fraction": 2})


def test_the_choice_is_the_lowest_finite_loss_with_ties_to_the_lower_rate_and_edges_flagged():
    assert choose({1e-3: 2.5, 2e-3: 2.1, 4e-3: 2.3}) == (2e-3, None)
    assert choose({1e-3: 2.0, 2e-3: 2.1}) == (1e-3, "lowest")
    assert choose({1e-3: 2.5, 2e-3: None, 4e-3: 2.2}) == (4e-3, "highest")  # a diverged rate is skipped
    assert choose({1e-3: 2.0, 2e-3: 2.0, 4e-3: 2.5}) == (1e-3, "lowest")
    assert choose({3e-3: 2.0}) == (3e-3, None)  # one rate has no edge to speak of
    with pytest.raises(ComposerRunError, match="every rate of the sweep diverged"):
        choose({1e-3: None, 2e-3: float("nan")})


def test_sweep_runs_get_the_stated_fraction_and_one_directory_per_rate(tmp_path):
    sweep = LRSweep((1e-3, 3e-3), fraction=0.25)
    plan = plan_sweep({"a": "AM", "b": "AAMM"}, sweep, tmp_path, {"tokens": 8192, "seq_len": 64, "batch_size": 8},
                      "tiny", seed=4)
    assert [(r.config.arch, r.config.lr) for r in plan] == [("AM", 1e-3), ("AAMM", 1e-3), ("AM", 3e-3),
                                                            ("AAMM", 3e-3)], "rate-major"
    assert {r.config.tokens for r in plan} == {2048} and {r.seed for r in plan} == {4}
    assert plan[3].out == tmp_path / "b" / f"lr-{rate_label(3e-3)}"
    assert rate_label(2e-3) == "2e-03" and rate_label(2.5e-3) == "2.500e-03"
    with pytest.raises(ConfigError, match="less than one optimizer step of 512; raise lr_sweep_fraction"):
        plan_sweep({"a": "AM"}, LRSweep((1e-3,), 0.01), tmp_path, {"tokens": 8192, "seq_len": 64, "batch_size": 8},
                   "tiny", seed=0)


def test_each_architecture_gets_its_best_rate_and_a_killed_sweep_retrains_nothing_finished(tmp_path, monkeypatch):
    models = {"hybrid": "AAMM", "llama": "AMAM", "fragile": "fragile"}
    sweep = LRSweep((1e-3, 2e-3, 3e-3, 6e-3), fraction=0.5)
    base = {"tokens": 8192, "seq_len": 64, "batch_size": 8}
    killed = FakeTrain(die_after=5)
    monkeypatch.setattr("composer.training.run.train", killed)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(models, sweep, tmp_path, base, "tiny", seeds=[0], echo=lambda line: None)
    assert len(killed.calls) == 5

    resumed = FakeTrain()
    monkeypatch.setattr("composer.training.run.train", resumed)
    lines: list[str] = []
    report = run_sweep(models, sweep, tmp_path, base, "tiny", seeds=[0], echo=lines.append)
    assert len(resumed.calls) == 12 - 5 and not set(resumed.calls) & set(killed.calls), "finished points are kept"
    assert "5 of 12 runs already finished" in "\n".join(lines)
    assert {name: row["chosen_lr"] for name, row in report["models"].items()} == {
        "hybrid": 3e-3, "llama": 1e-3, "fragile": 2e-3}
    assert report["models"]["llama"]["at_edge"] == "lowest" and report["models"]["hybrid"]["at_edge"] is None
    fragile = {p["lr"]: p for p in report["models"]["fragile"]["points"]}
    assert fragile[6e-3]["diverged"] and fragile[6e-3]["val_loss"] is None
    assert report["tokens"] == 4096 and report["fraction"] == 0.5

    markdown = (tmp_path / "lr_sweep.md").read_text()
    assert "| fragile |" in markdown and "diverged" in markdown and "| 1e-03 (lowest of the sweep) |" in markdown
    assert len((tmp_path / "lr_sweep.csv").read_text().splitlines()) == 1 + 12
    assert (tmp_path / "lr_sweep.png").stat().st_size > 1000
    notes = sweep_notes(report, 3e-3)
    assert "learning rate per architecture" in notes[0] and any("llama's best rate is the lowest" in n for n in notes)
    assert "all architectures shared one learning rate (0.003)" in sweep_notes(None, 3e-3)[0]


def test_the_pipeline_trains_every_seed_at_its_models_chosen_rate_and_reports_it(tmp_path, fake):
    from composer.experiments.pipeline import Pipeline, PipelineConfig

    config = PipelineConfig(out=str(tmp_path), extrapolate={"to": "tiny"}, seeds=[0, 1],
                            train={"tokens": 8192, "seq_len": 64, "batch_size": 8, "lr_sweep": [1e-3, 3e-3],
                                   "lr_sweep_fraction": 0.5})
    pipeline = Pipeline(config, echo=lambda line: None)
    models = {"composite": "AAMM", "llama": "AMAM"}
    summaries = pipeline.run_train(models)
    trained = [call for call in fake.calls if call[2] == 8192]
    assert sorted(trained) == [("AAMM", 3e-3, 8192, 0), ("AAMM", 3e-3, 8192, 1), ("AMAM", 1e-3, 8192, 0),
                               ("AMAM", 1e-3, 8192, 1)]
    comparison = pipeline.compare(models, summaries)
    rows = {row["model"]: row for row in comparison["models"]}
    assert rows["composite"]["chosen_lr"] == 3e-3 and rows["llama"]["chosen_lr"] == 1e-3
    assert rows["llama"]["lr_sweep"] == {"0.001": pytest.approx(fake_loss("AMAM", 1e-3)),
                                         "0.003": pytest.approx(fake_loss("AMAM", 3e-3))}
    assert comparison["lr_sweep"]["rates"] == [1e-3, 3e-3]
    assert any("learning rate per architecture" in note for note in comparison["notes"])
    for name in ("json", "csv", "md", "png"):
        assert (tmp_path / f"lr_sweep.{name}").is_file()
    # a later --stages compare reads the chosen rates back from lr_sweep.json
    again = Pipeline(config, echo=lambda line: None)
    assert [r.config.lr for r in again.plan(models)] == [3e-3, 1e-3, 3e-3, 1e-3]


def test_without_a_sweep_the_comparison_says_every_model_shared_one_rate(tmp_path, fake):
    from composer.experiments.pipeline import Pipeline, PipelineConfig

    config = PipelineConfig(out=str(tmp_path), extrapolate={"to": "tiny"}, seeds=[0, 1],
                            train={"tokens": 8192, "seq_len": 64, "batch_size": 8, "lr": 2e-3})
    pipeline = Pipeline(config, echo=lambda line: None)
    models = {"composite": "AAMM", "llama": "AMAM"}
    comparison = pipeline.compare(models, pipeline.run_train(models))
    assert {row["chosen_lr"] for row in comparison["models"]} == {2e-3}
    assert comparison["lr_sweep"] is None and not (tmp_path / "lr_sweep.json").exists()
    assert any("shared one learning rate (0.002)" in note for note in comparison["notes"])


def test_bad_sweeps_on_the_command_line_are_one_line_and_exit_2(tmp_path, capsys):
    from composer.cli import main

    assert main(["transfer", "--from-search", str(tmp_path / "none"), "--lr-sweep", "1e-3,x"]) == 2
    assert "lr_sweep must be comma-separated learning rates" in capsys.readouterr().err
    recipe = Path(__file__).resolve().parents[3] / "recipes" / "pipeline" / "cpu-demo.yaml"
    assert main(["pipeline", "--recipe", str(recipe), "--out", str(tmp_path / "p"), "--lr-sweep-fraction", "3"]) == 2
    err = capsys.readouterr().err
    assert "lr_sweep_fraction must be in (0, 1]" in err and err.count("\n") == 1
