"""W&B for searches (search/tracking.py): one run per trial in the study's group, and a summary run."""

from __future__ import annotations

import pytest

from search.config import SearchConfig
from search.run import run_search


def test_a_search_logs_one_wandb_run_per_trial_and_a_summary_run(tmp_path, monkeypatch):
    """README: "W&B gets one run per trial grouped by study, and a summary run with the leaderboard". Real offline
    runs (their directories are counted); ``wandb.init`` is wrapped only to read what each run was given."""
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    calls: list[dict] = []
    real_init = wandb.init

    def recording_init(**kwargs):
        run = real_init(**kwargs)
        entry = {"kwargs": kwargs, "logged": {}}
        real_log = run.log

        def log(data, *args, **kw):
            entry["logged"].update(data)
            return real_log(data, *args, **kw)

        run.log = log
        calls.append(entry)
        return run

    monkeypatch.setattr(wandb, "init", recording_init)
    out = tmp_path / "out"
    config = SearchConfig(evaluator="toy_evaluator:make", budget="smoke", wandb="offline", out=str(out),
                          known=False, sampler="random", trials=2)
    result = run_search(config, echo=lambda _: None)
    assert len(list((out / "wandb").glob("offline-run-*"))) == len(calls) == 2 + 1
    trials = [c for c in calls if c["kwargs"]["job_type"] == "trial"]
    summary = [c for c in calls if c["kwargs"]["job_type"] == "summary"]
    assert len(trials) == 2 and len(summary) == 1
    assert {c["kwargs"]["group"] for c in calls} == {result["study"]}
    assert all(c["kwargs"]["mode"] == "offline" for c in calls)
    assert sorted(c["logged"]["score"] for c in trials) == sorted(row["score"] for row in result["leaderboard"])
    assert {c["kwargs"]["config"]["pattern"] for c in trials} == {row["pattern"] for row in result["leaderboard"]}
    assert "leaderboard" in summary[0]["logged"]


def test_wandb_off_logs_nothing(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setattr(wandb, "init", lambda **_: pytest.fail("wandb.init called with wandb off"))
    config = SearchConfig(evaluator="toy_evaluator:make", budget="smoke", wandb="off", out=str(tmp_path / "out"),
                          known=False, sampler="random", trials=2)
    run_search(config, echo=lambda _: None)
    assert not (tmp_path / "out" / "wandb").exists()
