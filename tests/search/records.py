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


def check_answer(vs_known: dict, leaderboard: list[dict]) -> None:
    """The answer a search wrote, recomputed from its leaderboard without ``search.verdict``: the best new and the
    best known rows are the leaderboard's first of each; the difference is new - known, paired over their common
    seeds where they have 2 or more (each side's scores from its record), else the two sides' means; the interval,
    where there is one, holds that difference; and the answer is the side of 0 the interval lies on (a tie,
    recommending the known layout, where it holds 0 or is absent). A verdict that picked another row, paired other
    seeds or misread its interval fails here, whatever the ladder."""
    new = next(row for row in leaderboard if not row.get("known"))
    known = next(row for row in leaderboard if row.get("known"))
    assert vs_known["best_new"]["pattern"] == new["pattern"], (vs_known["best_new"], new["pattern"])
    assert vs_known["best_known"]["pattern"] == known["pattern"], (vs_known["best_known"], known["pattern"])
    ours = {int(seed): score for seed, score in new["evidence"]["scores"].items()}
    theirs = {int(seed): score for seed, score in known["evidence"]["scores"].items()}
    common = sorted(set(ours) & set(theirs))
    if len(common) >= 2:
        expected = sum(ours[seed] - theirs[seed] for seed in common) / len(common)
        assert vs_known["seeds"] == common, (vs_known["seeds"], common)
    else:
        expected = sum(ours.values()) / len(ours) - sum(theirs.values()) / len(theirs)
    assert abs(vs_known["difference"] - expected) < 1e-9, (vs_known["difference"], expected)
    assert vs_known["new_seeds"] == sorted(ours) and vs_known["known_seeds"] == sorted(theirs), vs_known
    ci, answer = vs_known["ci"], vs_known["answer"]
    if ci is not None:
        assert ci[0] <= expected <= ci[1], (ci, expected)
    if ci is not None and ci[1] < 0:
        assert answer == "new" and vs_known["recommended"] == new["pattern"], vs_known
    elif ci is not None and ci[0] > 0:
        assert answer == "known" and vs_known["recommended"] == known["pattern"], vs_known
    else:
        assert answer == "tie" and vs_known["recommended"] == known["pattern"], vs_known
    assert vs_known["setting"]["budget"] == new["evidence"]["setting"]["budget"], vs_known
