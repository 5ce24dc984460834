"""Leaderboard rows with their evidence records (``search.evidence_record``), for the verdict's and the front's tests:
a difference is taken only between records, so a test's rows carry one, at one made-up setting."""

from __future__ import annotations

from search.evidence_record import Evidence, SeedNoise, Setting

SETTING = Setting("lm", "rung-test", "demo-4m")


def recorded(row: dict, seed: int = 0, selected_on=None, setting: Setting = SETTING) -> dict:
    """``row`` with its record rebuilt from its ``score`` and ``details["losses"]`` (seed ``seed`` when it has none),
    ranked on all its seeds unless ``selected_on`` says otherwise."""
    row = {key: value for key, value in row.items() if key != "evidence"}
    row["evidence"] = Evidence.of_row(row, setting, seed, selected_on).as_dict()
    return row


def noise(sd: float, dof: int = 4, setting: Setting = SETTING) -> SeedNoise:
    """A seed spread measured at ``setting``."""
    return SeedNoise(sd, dof, "made up", setting)


def check_answer(vs_known: dict) -> None:
    """The answer a search wrote is the one its own interval reads (``new`` only when the interval of new - known
    lies below 0, ``known`` only above, else ``tie``, which recommends the known layout), over the seeds it names."""
    ci, answer = vs_known["ci"], vs_known["answer"]
    if answer == "new":
        assert ci is not None and ci[1] < 0 and vs_known["recommended"] == vs_known["best_new"]["pattern"], vs_known
    elif answer == "known":
        assert ci is not None and ci[0] > 0 and vs_known["recommended"] == vs_known["best_known"]["pattern"], vs_known
    else:
        assert answer == "tie" and (ci is None or ci[0] <= 0 <= ci[1]), vs_known
        assert vs_known["recommended"] == vs_known["best_known"]["pattern"], vs_known
    assert vs_known["new_seeds"] and vs_known["known_seeds"] and vs_known["setting"]["budget"], vs_known
