"""The placement search of ``composer hybridize --search``: train the supernet, rank every placement, distil the
best, and resume after a kill in any stage (composer/experiments/placement_search.py)."""

from __future__ import annotations

import json

import pytest

from composer.cli import main


@pytest.mark.slow
def test_hybridize_search_ranks_every_placement_and_distils_the_best(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    common = ["--seq-len", "64", "--batch-size", "8", "--max-documents", "200", "--wandb", "off",
              "--precision", "32-true"]
    assert main(["train", "--arch", "(AM)x3", "--preset", "tiny", "--tokens", str(20 * 512),
                 "--out", str(tmp_path / "teacher"), *common]) == 0
    capsys.readouterr()
    argv = ["hybridize", "--init-from", str(tmp_path / "teacher" / "model"), "--arch", "DMSMDM", "--search",
            "--keep", "1", "--tokens", str(4 * 512), "--score-tokens", "1024", "--out", str(tmp_path / "search"),
            *common]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = report["placements"]
    assert [row["rank"] for row in rows] == [1, 2, 3] and {tuple(row["kept"]) for row in rows} == {(0,), (2,), (4,)}
    assert rows == sorted(rows, key=lambda row: row["val_loss"]) and sum(row["uniform"] for row in rows) == 1
    assert report["distilled"]["pattern"] == rows[0]["pattern"]
    for name in ("placements.json", "placements.csv", "placements.md", "placements.png", "distill/summary.json"):
        assert (tmp_path / "search" / name).is_file(), name
    assert main(argv) == 0  # everything finished: nothing is trained again
    err = capsys.readouterr().err
    assert err.count("finished before, kept") == 2 and "scored before, kept" in err
    assert main(["hybridize", "--init-from", str(tmp_path / "teacher" / "model"), "--arch", "DMSMDM", "--search",
                 "--out", str(tmp_path / "x")]) == 2
    assert "--search-placement needs --keep" in capsys.readouterr().err

    # kill -9 during the supernet, again during placement scoring, then the same command: the same ranking, with
    # the supernet resumed from its checkpoint and no placement scored twice (issue 27)
    killed = tmp_path / "killed"
    kill_argv = [arg if arg != str(tmp_path / "search") else str(killed) for arg in argv]
    run_killed = _kill_when(kill_argv, tmp_path, lambda: list((killed / "supernet" / "checkpoints").glob("*.ckpt"))
                            and not (killed / "supernet" / "summary.json").is_file())
    assert run_killed, "the supernet finished before it could be killed"
    scores = killed / "placement-scores.json"
    assert _kill_when(kill_argv, tmp_path, lambda: scores.is_file() and 1 <= len(json.loads(scores.read_text())[
        "scores"]) < 3), "placement scoring finished before it could be killed"
    scored_before = len(json.loads(scores.read_text())["scores"])
    capsys.readouterr()
    assert main(kill_argv) == 0  # the same command, here: a third process would only import torch again
    said = capsys.readouterr()
    assert f"{scored_before} placement(s) scored before the last run stopped, kept" in said.out + said.err
    assert (said.out + said.err).count(": val_loss ") == 3 - scored_before  # the rest, once each
    resumed = json.loads((killed / "placements.json").read_text())["placements"]
    assert [row["kept"] for row in resumed] == [row["kept"] for row in rows]
    for ours, theirs in zip(resumed, rows, strict=True):
        assert ours["val_loss"] == pytest.approx(theirs["val_loss"], rel=1e-5)


def _start_cli(argv, tmp_path, delays):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "COMPOSER_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
           **{key: str(value) for key, value in delays.items()}}
    command = [sys.executable, str(Path(__file__).with_name("hybridize_with_delays.py")), *argv]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _kill_when(argv, tmp_path, ready) -> bool:
    """Start ``composer argv`` slowed down, SIGKILL it once ``ready()`` holds; False if it ended first."""
    import signal
    import time

    process = _start_cli(argv, tmp_path, {"HYBRIDIZE_STEP_DELAY": 0.3, "HYBRIDIZE_SCORE_DELAY": 1.0})
    deadline = time.time() + 300
    while process.poll() is None and time.time() < deadline and not ready():
        time.sleep(0.05)
    alive = process.poll() is None
    process.send_signal(signal.SIGKILL)
    process.wait()
    return alive
