"""The aggregator: exact 1-D K-means, N_c voting and its tie rule, reading searches, studies, leaderboards."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections import Counter
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState, create_trial

from composer.cli import main
from composer.errors import ConfigError
from search.aggregate import (
    Member,
    aggregate,
    kmeans_1d,
    load_population,
    read_leaderboard,
    top_cluster,
    vote,
)

TOY = "toy_evaluator:make"


# ------------------------------------------------------------------------------------------------ K-means


def sse(groups: list[list[float]]) -> float:
    return sum(float(np.sum((np.asarray(g) - np.mean(g)) ** 2)) for g in groups)


def brute_force_sse(values: list[float], k: int) -> float:
    """Least SSE over every split of the sorted values into k contiguous non-empty groups."""
    x = sorted(values)
    return min(sse([x[a:b] for a, b in zip((0, *cuts), (*cuts, len(x)), strict=True)])
               for cuts in itertools.combinations(range(1, len(x)), k - 1))


def test_kmeans_finds_obvious_groups():
    clusters = kmeans_1d([0.91, 0.1, 0.5, 0.11, 0.9, 0.52, 0.12], k=3)
    assert [(c.low, c.high, c.size) for c in clusters] == [(0.1, 0.12, 3), (0.5, 0.52, 2), (0.9, 0.91, 2)]
    assert clusters[2].centroid == pytest.approx(0.905)
    assert top_cluster(clusters, "maximize") == 2 and top_cluster(clusters, "minimize") == 0


def test_kmeans_is_globally_optimal_on_random_sets():
    """Equal to exhaustive search over contiguous splits (optimal 1-D clusters are contiguous)."""
    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(5, 10))
        values = list(np.round(rng.random(n), 2))  # rounding creates repeated scores
        k = int(rng.integers(1, 5))
        clusters = kmeans_1d(values, k)
        groups = [[v for v in values if c.low <= v <= c.high] for c in clusters]
        assert sum(len(g) for g in groups) == n and [c.size for c in clusters] == [len(g) for g in groups]
        distinct = len(set(values))
        assert len(clusters) == min(k, distinct)
        assert sse(groups) == pytest.approx(brute_force_sse(values, len(clusters)), abs=1e-12)


def test_kmeans_with_fewer_distinct_scores_than_k():
    clusters = kmeans_1d([0.5, 0.5, 0.7, 0.7, 0.7], k=5)
    assert [(c.centroid, c.size) for c in clusters] == [(0.5, 2), (0.7, 3)]
    (single,) = kmeans_1d([0.25] * 4, k=5)
    assert (single.low, single.high, single.size) == (0.25, 0.25, 4)


def test_kmeans_keeps_equal_scores_together_and_is_order_free():
    values = [0.0, 0.0, 0.5, 0.5, 0.5, 1.0, 1.0]
    first = kmeans_1d(values, k=2)
    assert first == kmeans_1d(values[::-1], k=2)
    assert all(c.low in (0.0, 0.5, 1.0) for c in first)  # no cluster boundary inside a run of equal scores
    assert sum(c.size for c in first) == len(values)


@pytest.mark.parametrize("values, k, message", [([], 5, "no scores"), ([0.1], 0, "k must be at least 1"),
                                                ([0.1, float("nan")], 2, "finite")])
def test_kmeans_bad_input(values, k, message):
    with pytest.raises(ConfigError, match=message):
        kmeans_1d(values, k)


# ------------------------------------------------------------------------------------------------ N_c voting

# N_0, N_1 and N_all give three different answers on these five members (worked through by hand):
#   N_0:   per-layer majority                                          -> A A A M
#   N_1:   layer 1 among A..: M 2:1; layer 2 among .M: A (m2) vs M (m3), tie, m3 has the better mean -> M;
#          layer 3 among ..M.: M (m1 .90) vs A (m3 .89), tie -> M                             -> A M M M
#   N_all: prefixes narrow to AM (m2, m3), tie at layer 2 -> M (m3), then m3 alone            -> A M M A
FIVE = [Member("AAMM", 0.90), Member("AMAM", 0.88), Member("AMMA", 0.89), Member("MAAA", 0.87),
        Member("MAAM", 0.86)]


def test_n0_is_the_per_layer_majority():
    pattern, layers = vote(FIVE, c=0)
    assert pattern == "AAAM"
    assert [v.votes for v in layers] == [{"A": 3, "M": 2}] * 3 + [{"A": 2, "M": 3}]
    assert all(v.context == 0 and v.supporters == 5 and v.tie_break is None for v in layers)


def test_n1_conditions_on_the_previous_layer():
    pattern, layers = vote(FIVE, c=1)
    assert pattern == "AMMM"
    assert [v.supporters for v in layers] == [5, 3, 2, 2]
    assert [v.context for v in layers] == [0, 1, 1, 1]
    assert [v.tie_break for v in layers] == [None, None, "mean score", "mean score"]


def test_n_all_conditions_on_the_whole_prefix_and_returns_a_member():
    pattern, layers = vote(FIVE, c="all")
    assert pattern == "AMMA"
    assert [v.supporters for v in layers] == [5, 3, 2, 1]
    assert [v.context for v in layers] == [0, 1, 2, 3]
    assert vote(FIVE, c=3)[0] == pattern  # c >= length - 1 is the whole prefix
    assert vote(FIVE, c="2")[0] == vote(FIVE, c=2)[0]


def test_context_never_empties_so_no_fallback_is_needed():
    """The previous winner's supporters always match the next context: every position has supporters."""
    rng = np.random.default_rng(1)
    for _ in range(100):
        size = int(rng.integers(1, 9))
        members = [Member("".join(rng.choice(list("AM"), 6)), float(rng.random())) for _ in range(size)]
        for c in (0, 1, 2, "all"):
            pattern, layers = vote(members, c)
            assert all(v.supporters >= 1 and v.votes[v.symbol] >= 1 for v in layers)
            if c == "all":
                assert pattern in {m.pattern for m in members}


def test_ties_go_to_the_better_mean_then_best_score_then_registry_order():
    # equal votes, better mean (0.6 vs 0.5) wins though M has the single best score
    assert vote([Member("A", 0.6), Member("A", 0.6), Member("M", 0.75), Member("M", 0.25)])[0] == "A"
    # equal votes and means (0.5), the better single best score wins
    pattern, (layer,) = vote([Member("M", 0.625), Member("A", 0.75), Member("A", 0.25), Member("M", 0.375)])
    assert (pattern, layer.tie_break) == ("A", "best score")
    # everything equal: registry order (A before M), whatever the input order
    for members in ([Member("M", 0.5), Member("A", 0.5)], [Member("A", 0.5), Member("M", 0.5)]):
        pattern, (layer,) = vote(members)
        assert (pattern, layer.tie_break) == ("A", "registry order")


def test_ties_respect_a_minimised_score():
    members = [Member("A", 2.9), Member("M", 2.8)]  # losses: lower is better
    assert vote(members, direction="minimize")[0] == "M"
    assert vote(members, direction="maximize")[0] == "A"


@pytest.mark.parametrize("c", [-1, "two", 1.5, True])
def test_bad_c(c):
    with pytest.raises(ConfigError, match="c must be a non-negative integer or 'all'"):
        vote(FIVE, c=c)


def test_members_of_different_lengths_are_refused():
    with pytest.raises(ConfigError, match="different lengths"):
        vote([Member("AAM", 0.5), Member("AAMM", 0.5)])


# ---------------------------------------------------------------------------------------------- leaderboards


def write_rows(path: Path, rows: list[tuple[str, float]]) -> Path:
    path.write_text(json.dumps([{"rank": i + 1, "pattern": p, "score": s, "trial": i}
                                for i, (p, s) in enumerate(rows)]))
    return path


def test_top_cluster_of_a_leaderboard_is_voted(tmp_path):
    rows = [("AAMMMM", 0.95), ("AAMMAM", 0.93), ("AMAMMM", 0.92), ("AAAMMM", 0.91),  # top cluster
            ("MAMMAM", 0.70), ("AMMAAM", 0.68), ("MMAAMM", 0.50), ("MMMAAA", 0.48), ("MMMMAA", 0.20),
            ("MAMAMA", 0.05)]
    result = aggregate(write_rows(tmp_path / "leaderboard.json", rows))
    assert [m.pattern for m in result.members] == ["AAMMMM", "AAMMAM", "AMAMMM", "AAAMMM"]
    assert result.pattern == "AAMMMM" and result.score == 0.95 and result.best == Member("AAMMMM", 0.95)
    assert result.direction == "maximize" and result.k_used == 5 and result.population == 10
    top = result.clusters[result.top_cluster]
    assert (top.low, top.high) == (0.91, 0.95)
    assert result.trials["AAMMAM"] == (1,)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["pattern"] == "AAMMMM" and data["compact"] == "AA4M" and data["c"] == 0
    assert [m["pattern"] for m in data["members"]] == [m.pattern for m in result.members]
    assert data["source"]["kind"] == "leaderboard"


def test_voted_pattern_may_be_one_no_trial_scored(tmp_path):
    rows = [("AAMM", 0.9), ("AMAM", 0.9), ("MAAM", 0.9), ("MMMM", 0.1)]
    result = aggregate(write_rows(tmp_path / "lb.json", rows), k=2)
    assert result.pattern == "AAAM" and result.score is None  # majority of A at layers 0-2, never trained
    assert len(result.members) == 3 and result.k_used == 2


def test_fewer_distinct_scores_than_k_and_duplicate_trials(tmp_path):
    """Two trials of one pattern are one member with their mean score; k drops to the distinct count."""
    path = tmp_path / "lb.json"
    rows = [("AM", 0.75, 3), ("AM", 0.25, 7), ("MA", 0.5, 4), ("MM", 0.1, 5)]
    path.write_text(json.dumps([{"pattern": p, "score": s, "trial": t} for p, s, t in rows]))
    result = aggregate(path, direction="maximize")
    assert result.population == 3 and result.k_used == 2  # distinct scores: 0.5 (AM and MA), 0.1
    assert [tuple(m) for m in result.members] == [("AM", 0.5), ("MA", 0.5)]
    assert result.trials["AM"] == (3, 7)
    assert result.pattern == "AA" and [v.tie_break for v in result.layers] == ["registry order"] * 2


def test_minimising_leaderboard_takes_the_lowest_cluster(tmp_path):
    rows = [("AMMM", 2.70), ("AAMM", 2.71), ("MMMM", 3.50), ("AAAA", 3.60)]  # validation loss, best first
    result = aggregate(write_rows(tmp_path / "leaderboard.json", rows), k=2)
    assert result.direction == "minimize"
    assert [m.pattern for m in result.members] == ["AMMM", "AAMM"] and result.best.pattern == "AMMM"


def test_leaderboard_direction_and_shorthands(tmp_path):
    path = tmp_path / "lb.json"
    rows = [{"pattern": "2A2M", "score": 1.0}, {"pattern": "(AM)x2", "score": 3.0}]
    path.write_text(json.dumps({"direction": "minimize", "leaderboard": rows}))
    population = read_leaderboard(path)
    assert population.direction == "minimize" and [s.pattern for s in population.scored] == ["AAMM", "AMAM"]
    (tmp_path / "best.json").write_text(json.dumps({"direction": "maximize"}))
    write_rows(path, [("AAMM", 1.0), ("AMAM", 3.0)])
    assert read_leaderboard(path).direction == "maximize"  # best.json beside it says so


@pytest.mark.parametrize(
    "content, message",
    [
        ("[]", "no scored patterns"),
        ("{not json", "cannot read"),
        ('[{"pattern": "AM", "score": "high"}]', "'score' must be a finite number"),
        ('[{"pattern": "", "score": 0.5}]', "'pattern' must be a non-empty string"),
        ('[{"pattern": "A-M", "score": 0.5}]', "row 1: .*at position 1 in pattern 'A-M'"),
        (json.dumps([{"pattern": p, "score": s} for p, s in [("AM", 0.5), ("MA", 0.7), ("MM", 0.6)]]),
         "not sorted by score"),
        ('[{"pattern": "AM", "score": 0.5}, {"pattern": "AMM", "score": 0.4}]', "different lengths"),
    ],
)
def test_bad_leaderboards(tmp_path, content, message):
    path = tmp_path / "lb.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        aggregate(path)


def test_leaderboard_rows_carry_the_rate_of_each_patterns_best_trial(tmp_path):
    """lm/recall searches record each trial's chosen rate (leaderboard key "lr"); mad rows have none."""
    path = tmp_path / "leaderboard.json"
    rows = [("AAMM", 0.9, 3e-3), ("AMAM", 0.8, 1e-3), ("AAMM", 0.7, 1e-3), ("MMMM", 0.1, None)]
    path.write_text(json.dumps([{"rank": i + 1, "pattern": p, "score": s, "trial": i, "lr": lr}
                                for i, (p, s, lr) in enumerate(rows)]))
    population = read_leaderboard(path)
    lrs = {s.pattern: s.lr for s in population.scored}
    assert lrs == {"AAMM": 3e-3, "AMAM": 1e-3, "MMMM": None}  # AAMM: its 0.9 trial's rate, not its 0.7 one's
    assert next(s for s in population.scored if s.pattern == "AAMM").score == pytest.approx(0.8)
    result = aggregate(population, k=2)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["rates"] == {"AAMM": 3e-3, "AMAM": 1e-3}
    assert {m["pattern"]: m["lr"] for m in data["members"]} == {"AAMM": 3e-3, "AMAM": 1e-3}
    assert result.pattern == "AAAM" and data["lr"] is result.lr is None  # voted, never scored: no rate of its own
    for direction, best in (("maximize", 3e-3), ("minimize", 1e-3)):  # whatever the rows' order
        unordered = tmp_path / f"{direction}.json"
        unordered.write_text(json.dumps({"direction": direction, "leaderboard": [
            {"pattern": "AM", "score": 2.0, "lr": 1e-3}, {"pattern": "AM", "score": 3.0, "lr": 3e-3},
            {"pattern": "MA", "score": 2.0, "lr": 6e-3}, {"pattern": "MA", "score": 2.0, "lr": 2e-3}]}))
        lrs = {s.pattern: s.lr for s in read_leaderboard(unordered).scored}
        assert lrs == {"AM": best, "MA": 2e-3}, direction  # equal scores: the lower rate
    assert read_leaderboard(write_rows(tmp_path / "old.json", [("AM", 0.5)])).scored[0].lr is None


@pytest.mark.parametrize("lr", ["fast", -1e-3, 0, True, float("inf")])
def test_a_bad_recorded_rate_is_refused(tmp_path, lr):
    path = tmp_path / "lb.json"
    path.write_text(json.dumps([{"pattern": "AM", "score": 0.5, "lr": lr}]))
    with pytest.raises(ConfigError, match="row 1: 'lr' must be a positive learning rate or null"):
        read_leaderboard(path)


# -------------------------------------------------------------------------------------------- Optuna studies


def crafted_study(url: str, name: str = "crafted") -> optuna.Study:
    """Every kind of trial the engine writes: scored, cached repeat, GP-pruned, skipped, failed, pruned."""
    study = optuna.create_study(storage=url, study_name=name, direction="maximize")
    add = study.add_trial
    for pattern, score in [("AAMM", 0.9), ("AMAM", 0.85), ("MAAM", 0.88), ("MMMM", 0.2), ("MMAA", 0.3)]:
        add(create_trial(value=score, user_attrs={"pattern": pattern}))
    add(create_trial(value=0.9, user_attrs={"pattern": "AAMM", "cached_from": 0}))  # must not vote twice
    add(create_trial(value=0.99, user_attrs={"pattern": "MMMA", "pruned_at": {"step": 0, "value": 0.99}}))
    add(create_trial(value=0.95, user_attrs={"pattern": "AAAA", "skip_reason": "A share above the maximum"}))
    add(create_trial(value=0.97, user_attrs={"pattern": "MAMA", "fail_reason": "RuntimeError: boom"}))
    add(create_trial(state=TrialState.PRUNED, user_attrs={"pattern": "AMMA"}))
    add(create_trial(state=TrialState.FAIL, user_attrs={"pattern": "MAMM"}))
    return study


def test_study_substitutes_do_not_vote(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    crafted_study(url)
    result = aggregate(url, k=2)
    assert result.population == 5
    assert result.excluded == {"cached": 1, "failed": 2, "pruned": 2, "skipped": 1}
    assert [m.pattern for m in result.members] == ["AAMM", "MAAM", "AMAM"]
    assert result.pattern == "AAAM"  # layer 1: A 2 (AAMM, MAAM) vs M 1; layer 2: A 2 vs M 1
    assert result.source == {"kind": "storage", "storage": url, "study": "crafted"}
    assert aggregate(tmp_path / "study.db", k=2).pattern == "AAAM"  # the file itself


def test_storage_with_several_studies_needs_a_name(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    crafted_study(url, "one")
    optuna.create_study(storage=url, study_name="empty")
    with pytest.raises(ConfigError, match=r"several studies or none .*empty, one.*--study"):
        aggregate(url)
    assert aggregate(url, study="one", k=2).pattern == "AAAM"
    with pytest.raises(ConfigError, match="no completed, scored trials"):
        aggregate(url, study="empty")
    with pytest.raises(ConfigError, match="no study 'two'"):
        aggregate(url, study="two")
    with pytest.raises(ConfigError, match="no such storage"):
        aggregate(f"sqlite:///{tmp_path / 'missing.db'}")
    assert not (tmp_path / "missing.db").exists(), "reading must not create a database"


def test_study_trials_carry_their_chosen_rate(tmp_path):
    """The trial attribute "lr": each pattern keeps its best trial's; cached repeats and pruned trials give none."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(storage=url, study_name="lm", direction="maximize")
    for pattern, score, attrs in [("AAMM", 0.6, {"lr": 1e-3}), ("AAMM", 0.9, {"lr": 3e-3}),
                                  ("AMAM", 0.8, {"lr": 1e-3}), ("MMMM", 0.2, {}),
                                  ("AMAM", 0.8, {"lr": 6e-3, "cached_from": 2}),
                                  ("MAMA", 0.99, {"lr": 6e-3, "pruned_at": {"step": 0}})]:
        study.add_trial(create_trial(value=score, user_attrs={"pattern": pattern, **attrs}))
    population = load_population(url)
    assert {s.pattern: s.lr for s in population.scored} == {"AAMM": 3e-3, "AMAM": 1e-3, "MMMM": None}
    assert aggregate(population, k=2).rates == {"AAMM": 3e-3, "AMAM": 1e-3}
    study.add_trial(create_trial(value=0.5, user_attrs={"pattern": "MAAM", "lr": "3e-3"}))
    with pytest.raises(ConfigError, match="trial 6: 'lr' must be a positive learning rate"):
        load_population(url)


# ------------------------------------------------------------------------- a search run, end to end (phase 2)


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """A toy search through `composer search` (the CLI code path), shared by the tests below."""
    out = tmp_path_factory.mktemp("agg") / "search"
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(Path(__file__).parent))
        mp.setenv("WANDB_SILENT", "true")
        code = main(["search", "--evaluator", TOY, "--budget", "smoke", "--sampler", "tpe", "--trials", "14",
                     "--wandb", "off", "--out", str(out), "--json"])
    assert code == 0
    return out


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_search_directory_reads_its_study(searched):
    result = aggregate(searched)
    rows = json.loads((searched / "leaderboard.json").read_text())
    best = json.loads((searched / "best.json").read_text())
    assert result.source["kind"] == "storage" and result.source["study"] == best["study"]
    assert result.population == len({r["pattern"] for r in rows})
    study = optuna.load_study(study_name=best["study"], storage=f"sqlite:///{searched / 'study.db'}")
    assert result.population + sum(result.excluded.values()) == len(study.trials)
    failures = json.loads((searched / "failures.json").read_text())
    stopped = ("failed", "pruned", "skipped")
    assert sum(result.excluded.get(reason, 0) for reason in stopped) == len(failures)
    # the members are exactly the scored patterns at or above the top cluster's lower bound
    low = result.clusters[result.top_cluster].low
    assert {m.pattern for m in result.members} == {r["pattern"] for r in rows if r["score"] >= low}
    # N_0: every layer's symbol is a majority among the members
    for i, symbol in enumerate(result.pattern):
        tally = Counter(m.pattern[i] for m in result.members)
        assert tally[symbol] == max(tally.values())
    # the leaderboard, the storage URL and the directory agree
    from_json = aggregate(searched / "leaderboard.json")
    from_url = aggregate(f"sqlite:///{searched / 'study.db'}", study=best["study"])
    assert from_json.pattern == from_url.pattern == result.pattern
    assert from_json.members == from_url.members == result.members


def test_search_directory_falls_back_to_its_leaderboard(searched, tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("leaderboard.json", "best.json", "config.json"):
        (copy / name).write_text((searched / name).read_text())
    result = aggregate(copy)
    assert result.source["kind"] == "leaderboard" and "no storage" in result.source["note"]
    assert result.members == aggregate(searched).members


def test_cli_writes_aggregate_json_without_touching_search_outputs(searched, capsys):
    outputs = {p.name: digest(p) for p in searched.iterdir() if p.is_file() and p.name != "aggregate.json"}
    assert main(["aggregate", "--out", str(searched), "--c", "1", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads((searched / "aggregate.json").read_text())
    assert printed["written"] == str(searched / "aggregate.json")
    assert {k: v for k, v in printed.items() if k != "written"} == written
    assert written["c"] == 1 and written["pattern"] == aggregate(searched, c=1).pattern
    assert {p.name: digest(p) for p in searched.iterdir() if p.name in outputs} == outputs


def test_incremental_search_aggregates_its_last_stage(tmp_path):
    from search.config import SearchConfig
    from search.run import run_search

    cfg = SearchConfig(evaluator=TOY, budget="smoke", wandb="off", out=str(tmp_path / "out"),
                       strategy="end-incremental", layers=2, depth=4, sampler="brute", trials=8)
    run_search(cfg, echo=lambda _: None)
    result = aggregate(tmp_path / "out")
    assert result.source["study"] == f"{cfg.study_name}-stage1"
    assert all(len(m.pattern) == 4 for m in result.members) and len(result.pattern) == 4


def test_voting_counts_a_parallel_layer_as_one_position():
    members = [Member("[AS]MM", 0.9), Member("[AS]MA", 0.8), Member("AM[AS]", 0.7)]
    pattern, votes = vote(members, c=0)
    assert pattern == "[AS]MM" and [v.symbol for v in votes] == ["[AS]", "M", "M"]
    assert votes[0].votes == {"A": 1, "[AS]": 2}


def test_a_search_grown_at_a_depth_is_refused_by_what_grows_by_depth(tmp_path):
    """composer pipeline/transfer grow a search's patterns by depth: a search that grew its models at
    --depth-at-target scored other models, so they refuse it in one line naming composer train --from-search."""
    import json

    from composer.errors import ConfigError
    from search.aggregate import refuse_depth_search

    (tmp_path / "config.json").write_text(json.dumps({"attention_at_target": "keep", "depth_at_target": 16}))
    with pytest.raises(ConfigError, match="grew its models to 16 layers by width.*composer train --from-search"):
        refuse_depth_search(tmp_path, "composer pipeline")
    (tmp_path / "config.json").write_text(json.dumps({"attention_at_target": "keep"}))
    refuse_depth_search(tmp_path, "composer pipeline")  # grown by depth: nothing to refuse
