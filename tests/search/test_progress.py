"""Progress lines of a search: a rung's label counts as the summary, rungs.json and the study names count."""

from __future__ import annotations

import re

from search.progress import stage_label
from search.run import summary_text


def test_rung_labels_count_from_zero_like_the_summary():
    """Issue 34: the smoke search printed ``rung 1/2`` and ``rung 2/2`` above a summary of ``rungs: 0: ..., 1: ...``,
    so one rung had two numbers."""
    row = {"rank": 1, "pattern": "AMAM", "compact": "(AM)x2", "score": 1.5, "lr": 1e-3, "params": 10,
           "attention_share": 0.5, "trial": 0, "known": None}
    rungs = [{"rung": index, "candidates": 3 - index, "budget": f"rung-smoke-{index}", "seconds": 60.0}
             for index in range(2)]
    summary = summary_text({"leaderboard": [row], "best": row, "out": "runs/search", "rungs": rungs})
    summarised = [int(n) for n in re.findall(r"(\d+): \d+ at rung-smoke", summary)]
    labels = [stage_label("rung", index, len(rungs)) for index in range(len(rungs))]
    assert labels == ["rung 0 of 0-1", "rung 1 of 0-1"]
    assert [int(label.split()[1]) for label in labels] == summarised == [0, 1]

