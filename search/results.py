"""A finished search read back from its ``--out`` directory, without re-running it (issue 49).

``composer report`` prints what :func:`read_search` returns; ``composer train --from-search`` and ``composer
extrapolate --from-search`` take the answer, its rate and its growth rule from :func:`answer_of`. Only the files
``search.run`` wrote are read (config.json, best.json, leaderboard.json, rungs.json, failures.json, the plots)
and, for the list of studies, its SQLite storage through the standard library: no Optuna, no torch model, so a
report takes a fraction of a second beyond the interpreter's start.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from composer.errors import ConfigError

# the keys of best.json that summary_text (search.summary) reads from a search's result beside its leaderboard
SUMMARY_KEYS = ("min_recall", "front", "recall_probe", "confirmation", "cost_limits", "equal_cost")
TRIAL_STATES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "WAITING")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path} cannot be read ({err}); the search that wrote it may have been stopped while "
                          "writing: re-run its command with the same --out (it resumes) to write it again") from None


def is_search_dir(path: Path) -> bool:
    """A ``composer search --out``: its best.json, or the config.json a search writes first (a ``composer train``
    --out has a config.json too, with ``train`` and ``arch`` in it)."""
    if (path / "best.json").is_file():
        return True
    config = path / "config.json"
    if not config.is_file():
        return False
    try:
        data = json.loads(config.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and "evaluator" in data and "strategy" in data


def other_output(path: Path) -> str | None:
    """What ``path`` is where it is not a search's --out but another command's, or nothing (issue 61: a command that
    reads a search names what it was given instead): a composer train run's --out, a model directory, a pipeline's
    --out, or an empty directory. None for anything else."""
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        config = None
    if isinstance(config, dict) and "evaluator" not in config:
        if "train" in config:
            return "a composer train run's --out (its config.json holds a training), not a search's"
        if "arch" in config:
            return "a Composer model directory (its config.json holds a model), not a search's --out"
    if (path / "pipeline.json").is_file():
        return f"a composer pipeline's --out, not a search's (the search it ran is {path / 'search'})"
    if path.is_dir() and not any(path.iterdir()):
        return "an empty directory, not a search's --out"
    return None


def find_searches(directory: str | Path) -> list[Path]:
    """``directory`` when it is a search's ``--out``, else the searches in its subdirectories (``runs/``)."""
    path = Path(directory)
    if not path.exists():
        raise ConfigError(f"{path} does not exist: give the --out directory of a composer search (default "
                          "runs/search)")
    if not path.is_dir():
        raise ConfigError(f"{path} is a file, not a search's --out directory: give the directory that holds its "
                          "best.json and config.json")
    if is_search_dir(path):
        return [path]
    found = sorted(sub for sub in path.iterdir() if sub.is_dir() and is_search_dir(sub))
    if found:
        return found
    what = other_output(path)
    if what is not None:
        raise ConfigError(f"{path} is {what}: give a search's --out (default runs/search), or run one with composer "
                          f"search --out DIR")
    raise ConfigError(f"{path} is not the output of a composer search (no best.json or search config.json in it or "
                      f"in its subdirectories): give a search's --out (default runs/search), or run one with "
                      f"composer search --out {path}")


def storage_url(out: Path, config: dict[str, Any]) -> str:
    """The search's Optuna storage: its ``--storage``, else the SQLite file in ``--out`` (search.storage)."""
    return config.get("storage") or f"sqlite:///{out.resolve() / 'study.db'}"


def list_studies(url: str) -> list[dict[str, Any]] | None:
    """The studies in a local SQLite storage with their trials by state, read with sqlite3 (Optuna's own tables:
    ``studies``, ``trials``); None for another storage (a server, a journal file) or one that cannot be read."""
    if not url.startswith("sqlite:///"):
        return None
    path = Path(url.removeprefix("sqlite:///"))
    if not path.is_file():
        return None
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as connection:
            counts = connection.execute(
                "SELECT s.study_name, t.state, COUNT(t.trial_id) FROM studies s "
                "LEFT JOIN trials t ON t.study_id = s.study_id GROUP BY s.study_id, t.state ORDER BY s.study_id"
            ).fetchall()
    except sqlite3.Error:
        return None
    studies: dict[str, dict[str, int]] = {}
    for name, state, count in counts:
        trials = studies.setdefault(name, {})
        if state is not None:
            trials[str(state).lower()] = count
    return [{"study": name, "trials": trials} for name, trials in studies.items()]


def read_search(out: str | Path) -> dict[str, Any]:
    """Everything a finished (or running) search wrote to ``out``, as plain data: its settings, studies, the
    rungs' rankings, the final leaderboard, the answer (best.json) and the plots. ``finished``: best.json exists."""
    out = Path(out)
    config = _json(out / "config.json") or {}
    best = _json(out / "best.json")
    url = storage_url(out, config)
    return {
        "out": str(out),
        "finished": best is not None,
        "config": config,
        "storage": url,
        "dashboard": f"optuna-dashboard {url}",
        "studies": list_studies(url),
        "rungs": _json(out / "rungs.json"),
        "leaderboard": _json(out / "leaderboard.json") or [],
        "best": best,
        "failures": _json(out / "failures.json") or [],
        "plots": [str(path) for path in sorted(out.glob("*.png"))],
    }


def summary_result(search: dict[str, Any]) -> dict[str, Any]:
    """The result ``search.run.run_search`` returned, rebuilt from the files (what ``search.summary.summary_text``
    reads)."""
    best = search["best"] or {}
    result = {"leaderboard": search["leaderboard"], "best": best, "out": search["out"],
              "vs_known": best.get("vs_known") or {}, "rungs": search["rungs"]}
    result.update({key: best[key] for key in SUMMARY_KEYS if key in best})
    return result


def answer_of(out: str | Path) -> dict[str, Any]:
    """The answer of the search in ``out`` as the model to train: its pattern (best.json's ``recommended``), the
    known layout it is (if any), the rate the search chose for it and where, and the search's growth rule
    (config.json's ``attention_at_target``). One-line errors for a directory that holds no answer."""
    path = Path(out)
    if not path.is_dir():
        raise ConfigError(f"--from-search {path}: no such directory; give the --out of a finished composer search")
    best = _json(path / "best.json")
    config = _json(path / "config.json")
    what = other_output(path) if best is None else None
    if what is not None:
        raise ConfigError(f"--from-search {path}: this is {what}; give the --out of a finished composer search")
    if best is None:
        started = config is not None
        raise ConfigError(f"--from-search {path}: no best.json, " + (
            "the search has not finished: re-run its command (it resumes), then this one" if started else
            "not a composer search's --out: give the directory a finished search wrote (default runs/search)"))
    pattern = best.get("recommended", best.get("pattern"))
    if not pattern:
        why = (best.get("vs_known") or {}).get("note") or "no pattern was scored"
        raise ConfigError(f"--from-search {path}: the search gave no answer ({why}); train a pattern of its "
                          f"leaderboard with --arch PATTERN instead")
    rows = [row for row in _json(path / "leaderboard.json") or [best] if row.get("pattern") == pattern]
    row = rows[0] if rows else {}
    config = config or {}
    known = row.get("known") or known_layout_named(best, pattern)
    setting = (row.get("evidence") or {}).get("setting") or {}
    return {
        "out": str(path),
        "pattern": pattern,
        "known": known,
        "answer": best.get("answer"),
        "verdict": (best.get("vs_known") or {}).get("verdict"),
        "lr": row.get("lr"),
        "lr_at": ", ".join(str(setting[key]) for key in ("preset", "budget") if setting.get(key)) or None,
        "attention_at_target": config.get("attention_at_target") or "repeat",
        "depth_at_target": config.get("depth_at_target"),
        # growth to equal cost (scaling.equal_cost), as the flags that give it: None where the search grew to size
        "equal_cost_rule": {name: config.get(name) for name in ("equal_cost", "deployed_at", "cost_device",
                                                                 "equal_cost_figure")}
        if config.get("equal_cost") else None,
        "evaluator": best.get("evaluator") or config.get("evaluator"),
        "study": best.get("study"),
    }


def known_in_search(pattern: str, out: str | Path) -> str | None:
    """The known layout ``pattern`` is among those the search in ``out`` entered (best.json's ``known_layouts``),
    else None: the search grew a published family in its own layout, so whatever grows it afterwards must know."""
    return known_layout_named(_json(search_dir_of(out) / "best.json") or {}, pattern)


def known_layout_named(best: dict[str, Any], pattern: str) -> str | None:
    """The name best.json's ``known_layouts`` gives ``pattern``, or None."""
    return next((layout.get("name") for layout in best.get("known_layouts") or []
                 if layout.get("pattern") == pattern), None)


def search_dir_of(source: str | Path) -> Path:
    """The directory of a search source: itself, or the one its file (leaderboard.json, study.db) or storage
    URL is in."""
    text = str(source)
    for prefix in ("sqlite:///", "journal:"):
        text = text.removeprefix(prefix)
    path = Path(text)
    return path if path.is_dir() else path.parent
