"""W&B for searches: one run per trial that trained or failed (none for a candidate a constraint skipped), grouped by
study, and a summary run with the leaderboard.

Runs offline (in ``<out>/wandb``) unless an API key is configured; ``wandb: off`` disables it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from composer.training.config import wandb_settings
from search.config import SearchConfig


def _mode(config: SearchConfig) -> str:
    from composer.training.config import wandb_mode

    return wandb_mode(config.wandb)


class WandbTrialLogger:
    """Optuna callback: log each finished trial as its own W&B run in the study's group."""

    def __init__(self, config: SearchConfig, study_name: str) -> None:
        self.config = config
        self.study_name = study_name
        self.mode = _mode(config)

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        # a candidate skipped by a constraint trained nothing: a run of its own per skip buried the trials that
        # trained (issue 47); failures.json lists the skips with their reasons
        if self.mode == "off" or "skip_reason" in trial.user_attrs:
            return
        import wandb

        attrs = trial.user_attrs
        run = wandb.init(
            project=self.config.wandb_project,
            group=self.study_name,
            job_type="trial",
            name=f"trial-{trial.number}",
            dir=str(Path(self.config.out)),
            mode=self.mode,
            config={"pattern": attrs.get("pattern"), **trial.params, **self.config.to_dict()},
            settings=wandb_settings(),
        )
        metrics: dict[str, Any] = {"state": trial.state.name.lower()}
        if trial.values:
            metrics.update({f"objective_{i}": value for i, value in enumerate(trial.values)})
            metrics["score"] = trial.values[0]
        for key in ("params", "non_embedding_params", "kv_cache_bytes_per_token", "seconds", "fail_reason",
                    "skip_reason", "cached_from"):
            if key in attrs:
                metrics[key] = attrs[key]
        for task, accuracy in attrs.get("details", {}).get("accuracy", {}).items():
            metrics[f"accuracy/{task}"] = accuracy
        run.log(metrics)
        run.finish()


def log_summary(config: SearchConfig, study_name: str, rows: list[dict[str, Any]], plots: list[Path]) -> None:
    mode = _mode(config)
    if mode == "off":
        return
    import wandb

    run = wandb.init(project=config.wandb_project, group=study_name, job_type="summary", name=f"{study_name}-summary",
                     dir=str(Path(config.out)), mode=mode, config=config.to_dict(), settings=wandb_settings())
    columns = ["rank", "pattern", "score", "params", "attention_share", "trial"]
    run.log({
        "leaderboard": wandb.Table(columns=columns, data=[[row[c] for c in columns] for row in rows]),
        **{plot.stem: wandb.Image(str(plot)) for plot in plots},
    })
    if rows:
        run.summary.update({"best_pattern": rows[0]["pattern"], "best_score": rows[0]["score"]})
    run.finish()


def runs_line(config: SearchConfig) -> str | None:
    """Where the search's W&B runs are, for its closing lines (issue 69: the smoke search wrote 7 offline runs it
    never mentioned; W&B's own lines are silenced, composer.training.config.wandb_settings). None with W&B off."""
    mode = _mode(config)
    if mode == "off":
        return None
    if mode == "online":
        return f"W&B: the trials and the summary logged online to project {config.wandb_project}"
    folder = Path(config.out) / "wandb"
    runs = sorted(folder.glob("offline-run-*"))
    if not runs:
        return None
    return (f"W&B: {len(runs)} offline run{'s' * (len(runs) != 1)} in {folder} (`wandb sync {folder}/offline-run-*` "
            "uploads them)")
