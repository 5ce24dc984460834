"""The aggregator: one architecture from the best cluster of a search, voted layer by layer (N_c clustering).

Composer does not return the single best trial: proxy scores are noisy, so it takes the *top cluster* of a
1-D K-means (k = 5) over the trial scores as the candidate set C and builds a pattern position by position,
each layer getting the primitive most frequent among the members of C whose previous ``c`` layers equal the
choices already made. ``c = 0`` is a plain per-layer majority vote (the paper's best), ``c = 1`` conditions on
the previous layer, ``c = "all"`` on the whole prefix.

Decisions the paper leaves open (docs/aggregate.md gives the reasons):

* **Population.** Only completed, genuinely scored trials vote: cached repeats (``cached_from``), pruned,
  skipped (constraint-violating) and failed trials are excluded, exactly as on the leaderboard. Each *distinct
  pattern* counts once, with the mean of its genuine scores (two workers may race to train the same pattern);
  a pattern answered from the cache does not vote twice.
* **Learning rate.** The ``lm`` and ``recall`` evaluators train each candidate at a few rates and record the best
  (trial attribute ``lr``, leaderboard key ``lr``); each pattern carries the rate of its best-scoring trial
  (a tie to the lower rate), so ``composer transfer`` and ``composer pipeline`` can start it there. Patterns
  scored without a rate (``mad``) carry None.
* **K-means.** Exact, globally optimal 1-D K-means by dynamic programming over the sorted scores (the method
  of R's Ckmeans.1d.dp, Wang & Song 2011), not Lloyd iterations: deterministic without a seed and never stuck
  in a local optimum. Equal scores always share a cluster (the DP runs over distinct scores weighted by their
  multiplicity) and with fewer distinct scores than k, k drops to that number. The top cluster is the one with
  the best centroid: highest when the study maximises (accuracy), lowest when it minimises (loss).
* **Ties** at a position go, in order, to the symbol whose supporters have the better mean score, then the
  better single best score, then the earlier symbol in the primitive registry (A before M).
* **Context.** The supporters of the symbol chosen at position i-1 always match the context at position i (it
  is at most one layer longer than theirs and ends with their own symbol), so the set of matching members is
  never empty and no fallback to a shorter context is needed; :func:`vote` asserts this invariant.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from composer.errors import ConfigError, PatternError
from composer.pattern import compact_pattern, parse_pattern
from composer.pattern import layers as layer_tokens
from search.results import other_output, search_dir_of

DIRECTIONS = ("maximize", "minimize")


class Member(NamedTuple):
    """One candidate of the top cluster: a distinct pattern and its score."""

    pattern: str
    score: float


@dataclass(frozen=True)
class Scored:
    """A distinct, genuinely scored pattern of the population (mean over its trials when scored twice)."""

    pattern: str
    score: float
    trials: tuple[int, ...] = ()
    lr: float | None = None  # the learning rate its best-scoring trial chose; None when the evaluator has none


@dataclass(frozen=True)
class Cluster:
    low: float
    high: float
    centroid: float
    size: int  # number of distinct patterns in it

    def to_dict(self) -> dict[str, Any]:
        return {"centroid": self.centroid, "low": self.low, "high": self.high, "size": self.size}


@dataclass(frozen=True)
class Vote:
    """How one position was decided."""

    position: int
    symbol: str
    votes: dict[str, int]  # symbol -> number of supporters voting for it
    context: int  # previous layers the supporters had to match (min(c, position))
    supporters: int
    tie_break: str | None = None  # None, "mean score", "best score" or "registry order"

    def to_dict(self) -> dict[str, Any]:
        return {"position": self.position, "symbol": self.symbol, "votes": self.votes,
                "context": self.context, "supporters": self.supporters, "tie_break": self.tie_break}


@dataclass(frozen=True)
class Population:
    """Everything the aggregator reads from a source: the scored patterns and where they came from."""

    scored: tuple[Scored, ...]
    direction: str
    source: dict[str, Any]
    excluded: dict[str, int] = field(default_factory=dict)  # reason -> number of trials left out


@dataclass(frozen=True)
class Aggregation:
    """The aggregated pattern, the top cluster it was voted from, and how every layer was decided."""

    pattern: str
    members: tuple[Member, ...]  # the top cluster C, best first
    c: int | str
    k: int  # requested clusters
    k_used: int  # clusters actually formed (fewer with fewer distinct scores)
    clusters: tuple[Cluster, ...]  # ascending by centroid
    top_cluster: int  # index into clusters
    direction: str
    layers: tuple[Vote, ...]
    best: Member  # the single best scored pattern, for comparison
    score: float | None  # the aggregated pattern's own score when it was scored in the search, else None
    trials: dict[str, tuple[int, ...]] = field(default_factory=dict)  # member pattern -> its trial numbers
    # every scored pattern's chosen learning rate (those that have one): the pipeline starts the composite and
    # its baselines from them without reading the search again
    rates: dict[str, float] = field(default_factory=dict)
    population: int = 0  # distinct scored patterns clustered
    excluded: dict[str, int] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def compact(self) -> str:
        return compact_pattern(self.pattern)

    @property
    def lr(self) -> float | None:
        """The aggregated pattern's own search rate when the search scored it with one."""
        return self.rates.get(self.pattern)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "compact": self.compact,
            "score": self.score,
            "lr": self.lr,
            "c": self.c,
            "k": self.k,
            "k_used": self.k_used,
            "direction": self.direction,
            "best": {"pattern": self.best.pattern, "score": self.best.score},
            "members": [
                {"pattern": m.pattern, "score": m.score, "trials": list(self.trials.get(m.pattern, ())),
                 "lr": self.rates.get(m.pattern)}
                for m in self.members
            ],
            "clusters": [cluster.to_dict() for cluster in self.clusters],
            "top_cluster": self.top_cluster,
            "layers": [vote.to_dict() for vote in self.layers],
            "population": self.population,
            "excluded": self.excluded,
            "source": self.source,
            "rates": self.rates,
        }


# ------------------------------------------------------------------------------------------- K-means (1-D)


def kmeans_1d(values: Sequence[float], k: int = 5) -> list[Cluster]:
    """Optimal 1-D K-means of ``values`` (least within-cluster sum of squares), clusters ascending.

    Dynamic programming over the distinct sorted values weighted by multiplicity, O(k m^2) for m distinct
    values (vectorised: milliseconds for hundreds of trials, about a second for 4,096). Optimal 1-D clusters
    are contiguous in sorted order, so D[q][i] = min_j D[q-1][j] + SSE(j..i) is exact; ties between equal-cost
    splits go to the leftmost split, so the result is a pure function of the multiset of values.
    """
    if k < 1:
        raise ConfigError(f"k must be at least 1, got {k}")
    data = np.asarray(list(values), dtype=np.float64)
    if data.size == 0:
        raise ConfigError("no scores to cluster")
    if not np.all(np.isfinite(data)):
        raise ConfigError("scores must be finite to cluster them")
    x, weight = np.unique(data, return_counts=True)
    m, kk = len(x), min(k, len(x))
    centred = x - np.average(x, weights=weight)  # fewer cancellation errors in the prefix sums
    w = np.concatenate([[0.0], np.cumsum(weight)])
    s1 = np.concatenate([[0.0], np.cumsum(weight * centred)])
    s2 = np.concatenate([[0.0], np.cumsum(weight * centred * centred)])

    def sse(start, stop):  # within-cluster sum of squares of x[start:stop] (start < stop; arrays broadcast)
        n = w[stop] - w[start]
        return np.maximum(s2[stop] - s2[start] - (s1[stop] - s1[start]) ** 2 / n, 0.0)

    cost = np.full((kk + 1, m + 1), np.inf)
    cut = np.zeros((kk + 1, m + 1), dtype=np.int64)
    cost[1, 1:] = sse(0, np.arange(1, m + 1))
    for q in range(2, kk + 1):
        for i in range(q, m + 1):
            starts = np.arange(q - 1, i)  # the last cluster is x[start:i]
            total = cost[q - 1, starts] + sse(starts, i)
            best = int(np.argmin(total))
            cost[q, i], cut[q, i] = total[best], starts[best]
    bounds, stop = [], m
    for q in range(kk, 0, -1):
        start = int(cut[q, stop]) if q > 1 else 0
        bounds.append((start, stop))
        stop = start
    clusters = []
    for start, stop in reversed(bounds):
        members, counts = x[start:stop], weight[start:stop]
        low = float(members[0])  # centroid as low + mean offset: exact when the cluster holds one value
        centroid = low + math.fsum((members - low) * counts) / float(counts.sum())
        clusters.append(Cluster(low=low, high=float(members[-1]), centroid=centroid, size=int(counts.sum())))
    return clusters


def top_cluster(clusters: Sequence[Cluster], direction: str = "maximize") -> int:
    """Index of the cluster with the best centroid."""
    centroids = [cluster.centroid for cluster in clusters]
    return int(np.argmax(centroids) if direction == "maximize" else np.argmin(centroids))


# ------------------------------------------------------------------------------------------------ N_c voting


def _registry_rank() -> dict[str, int]:
    from primitives.registry import REGISTRY

    return {symbol: i for i, symbol in enumerate(REGISTRY.symbols)}


def _check_c(c: int | str) -> int | str:
    if c == "all":
        return c
    if isinstance(c, str) and c.isdigit():
        c = int(c)
    if isinstance(c, bool) or not isinstance(c, int) or c < 0:
        raise ConfigError(f"c must be a non-negative integer or 'all', got {c!r}")
    return c


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"--clusters (k) must be a positive integer, got {k!r}")
    return k


def vote(members: Sequence[Member], c: int | str = 0, direction: str = "maximize") -> tuple[str, list[Vote]]:
    """N_c clustering of ``members`` (same-length patterns): the voted pattern and each position's tally.

    Position i considers the members whose layers ``i - min(c, i) .. i-1`` equal the pattern chosen so far
    (``c = "all"``: the whole prefix) and takes their most frequent symbol; ties as in the module docstring.
    """
    c = _check_c(c)
    if not members:
        raise ConfigError("no members to vote")
    tokens = {m.pattern: layer_tokens(m.pattern) for m in members}  # one token per layer ("A", "[AS]")
    lengths = sorted({len(t) for t in tokens.values()})
    if len(lengths) > 1:
        raise ConfigError(f"members have different lengths ({', '.join(map(str, lengths))} layers); "
                          "aggregate patterns of one study (one stage of an incremental search) at a time")
    sign = 1.0 if direction == "maximize" else -1.0
    registry = _registry_rank()
    chosen: list[str] = []
    layers = []
    for i in range(lengths[0]):
        context = i if c == "all" else min(c, i)
        supporters = [m for m in members if tokens[m.pattern][i - context : i] == chosen[i - context :]]
        if not supporters:  # cannot happen: the previous winner's supporters match (see the module docstring)
            raise RuntimeError(f"no member matches the context {''.join(chosen[i - context:])!r} at position {i}")
        scores: dict[str, list[float]] = defaultdict(list)
        for member in supporters:
            scores[tokens[member.pattern][i]].append(member.score)
        # sort keys, all "higher is better": votes, mean score, best score, earlier in the registry
        keys = {
            symbol: (len(s), sign * math.fsum(s) / len(s), max(sign * v for v in s),
                     -registry.get(symbol, len(registry) + sum(map(ord, symbol))))
            for symbol, s in scores.items()
        }
        ranked = sorted(keys, key=lambda symbol: keys[symbol], reverse=True)
        winner, tie_break = ranked[0], None
        if len(ranked) > 1 and keys[ranked[1]][0] == keys[winner][0]:
            tied = [symbol for symbol in ranked if keys[symbol][0] == keys[winner][0]]
            for level, name in ((1, "mean score"), (2, "best score"), (3, "registry order")):
                if sum(keys[symbol][level] == keys[winner][level] for symbol in tied) == 1:
                    tie_break = name
                    break
                tied = [symbol for symbol in tied if keys[symbol][level] == keys[winner][level]]
        chosen.append(winner)
        votes = {symbol: keys[symbol][0] for symbol in sorted(keys, key=lambda s: keys[s][3], reverse=True)}
        layers.append(Vote(i, winner, votes, context, len(supporters), tie_break))
    return "".join(chosen), layers


# ---------------------------------------------------------------------------------------------------- sources


def _canonical(text: Any, where: str) -> str:
    if not isinstance(text, str) or not text:
        raise ConfigError(f"{where}: 'pattern' must be a non-empty string, got {text!r}")
    if text.isascii() and text.isalpha() and text.isupper():
        return text  # canonical already (how the engine writes it); symbols need not be registered here
    try:
        return parse_pattern(text)  # a shorthand such as "2A4M" or "(AM)x3"
    except PatternError as err:
        raise ConfigError(f"{where}: {err}") from None


class Row(NamedTuple):
    """One genuinely scored trial as a source gives it."""

    pattern: str
    score: float
    trial: int | None = None
    lr: float | None = None


def _rate(value: Any, where: str) -> float | None:
    """A recorded learning rate: None when absent, else a positive finite number (anything else is an error,
    so a corrupt rate never becomes a run's rate)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{where}: 'lr' must be a positive learning rate or null, got {value!r}")
    return float(value)


def _best_rate(rows: Sequence[Row], maximize: bool) -> float | None:
    """The rate of the best-scoring of a pattern's trials that recorded one (a tie to the lower rate): the rate
    that earned the pattern its best score is the one worth starting from."""
    rated = [row for row in rows if row.lr is not None]
    if not rated:
        return None
    sign = -1.0 if maximize else 1.0
    return min(rated, key=lambda row: (sign * row.score, row.lr)).lr


def _fold(rows: Iterable[Row], maximize: bool = True) -> tuple[Scored, ...]:
    """One entry per distinct pattern: the mean of its genuine scores, all its trial numbers and the rate of
    its best-scoring trial."""
    by_pattern: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_pattern[row.pattern].append(Row(*row))
    return tuple(
        Scored(p, math.fsum(r.score for r in group) / len(group),
               tuple(sorted(r.trial for r in group if r.trial is not None)), _best_rate(group, maximize))
        for p, group in by_pattern.items()
    )


def _infer_direction(scores: list[float], where: str) -> str:
    """A leaderboard is ranked best first: descending scores maximise, ascending ones minimise."""
    if all(a >= b for a, b in pairwise(scores)):
        return "maximize"
    if all(a <= b for a, b in pairwise(scores)):
        return "minimize"
    raise ConfigError(f"{where} is not sorted by score, so whether higher or lower is better is unknown; "
                      "pass direction='maximize' or 'minimize' (--direction)")


def read_leaderboard(path: str | Path, direction: str | None = None) -> Population:
    """A ``leaderboard.json`` as ``composer search`` writes it (or a hand-made list of {pattern, score})."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"cannot read {path} as JSON: {err}") from None
    if isinstance(data, dict):  # {"direction": ..., "leaderboard": [...]}
        direction = direction or data.get("direction")
        data = data.get("leaderboard")
    return _leaderboard_population(data, str(path), direction or _best_direction(path.parent),
                                   {"kind": "leaderboard", "path": str(path.resolve())})


def _best_direction(out: Path) -> str | None:
    """The direction best.json in ``out`` records, if any: a search's leaderboards do not carry their own."""
    best = out / "best.json"
    if not best.is_file():
        return None
    try:
        return json.loads(best.read_text()).get("direction")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None


def _leaderboard_population(data: Any, where: str, direction: str | None, source: dict[str, Any]) -> Population:
    """Leaderboard rows (as ``composer search`` writes them, or hand-made {pattern, score}) as a population; one
    parser for leaderboard.json and rungs.json's per-rung leaderboards, so both read and fail alike."""
    if not isinstance(data, list):
        raise ConfigError(f"{where} must hold a list of leaderboard rows ({{'pattern': ..., 'score': ...}})")
    if not data:
        raise ConfigError(f"{where} has no scored patterns (no trial completed)")
    rows = []
    for i, row in enumerate(sorted(data, key=lambda r: r.get("rank", 0) if isinstance(r, dict) else 0)):
        at = f"{where} row {i + 1}"
        if not isinstance(row, dict):
            raise ConfigError(f"{at}: expected an object with 'pattern' and 'score', got {row!r}")
        score = row.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise ConfigError(f"{at}: 'score' must be a finite number, got {score!r}")
        rows.append(Row(_canonical(row.get("pattern"), at), float(score), row.get("trial"), _rate(row.get("lr"), at)))
    direction = direction or _infer_direction([row.score for row in rows], where)
    return Population(_fold(rows, direction == "maximize"), direction, source)


RUNGS_JSON = "rungs.json"  # a successive-halving search's per-rung records (search.strategies.successive_halving)


def read_rungs(out: str | Path) -> list[dict[str, Any]] | None:
    """The rung records of a successive-halving search directory, rung 0 first; None for a search without rungs
    (one-shot or incremental, or not a directory)."""
    path = Path(out) / RUNGS_JSON
    if not path.is_file():
        return None
    try:
        records = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"cannot read {path} as JSON: {err}") from None
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        raise ConfigError(f"{path} must hold a list of rung records (composer search --strategy "
                          "successive-halving writes it)")
    return records


def read_rung(out: str | Path, rung: int | str, direction: str | None = None) -> Population:
    """One rung's leaderboard of a successive-halving search (``rung``: an index, or "last") as a population.

    Why: each rung ranks its own candidates at its own budget, and only the last rung reaches leaderboard.json
    and best.json, so a reader that wants the whole ranking (rung 0: every candidate) must read rungs.json."""
    out = Path(out)
    records = read_rungs(out)
    if records is None:
        raise ConfigError(f"{out} holds no {RUNGS_JSON} (not a successive-halving search): leave out --rung")
    index = len(records) - 1 if rung == "last" else rung
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(records):
        raise ConfigError(f"rung must be 0 to {len(records) - 1} or 'last' ({out / RUNGS_JSON} holds "
                          f"{len(records)} rungs), got {rung!r}")
    record = records[index]
    return _leaderboard_population(record.get("leaderboard"), f"{out / RUNGS_JSON} rung {index}",
                                   direction or _best_direction(out),
                                   {"kind": "rung", "path": str((out / RUNGS_JSON).resolve()), "rung": index,
                                    "rungs": len(records), "study": record.get("study"),
                                    "budget": record.get("budget")})


def _reason(trial) -> str | None:
    """Why a trial does not vote (None: it was genuinely scored); the categories of failures.json."""
    from optuna.trial import TrialState

    attrs = trial.user_attrs
    if "cached_from" in attrs:
        return "cached"
    if "fail_reason" in attrs or trial.state == TrialState.FAIL:
        return "failed"
    if "skip_reason" in attrs:
        return "skipped"
    if "pruned_at" in attrs or trial.state == TrialState.PRUNED:
        return "pruned"
    if trial.state != TrialState.COMPLETE:
        return trial.state.name.lower()  # running / waiting
    if "pattern" not in attrs:
        return "no pattern"
    return None


class StorageUnavailable(ConfigError):
    """The storage cannot be opened (missing file, server down); a search directory falls back to its JSON."""


def _storage_exists(url: str) -> bool:
    from search.storage import JOURNAL_SUFFIXES

    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///")).is_file()
    if url.startswith("journal:") or url.endswith(JOURNAL_SUFFIXES):
        return Path(url.removeprefix("journal:")).is_file()
    return True  # a server: opening it says whether it is there


def read_study(storage: str, study: str | None = None, preferred: Sequence[str] = (),
               direction: str | None = None) -> Population:
    """Scored trials of an Optuna study (``composer search``'s storage); ``study`` may be left out if alone.

    ``preferred``: study names to try, in order, when ``study`` is not given (e.g. the one best.json names).
    """
    import optuna

    from search.leaderboard import leaderboard
    from search.storage import make_storage

    if not _storage_exists(storage):
        raise StorageUnavailable(f"no such storage: {storage}")
    try:
        backend = make_storage(storage, ".")
        names = sorted(optuna.get_all_study_names(backend))
    except ConfigError as err:
        raise StorageUnavailable(str(err)) from None
    if study is None:
        study = next((name for name in preferred if name in names), None)
        if study is None and len(names) == 1:
            study = names[0]
        if study is None:
            listed = ", ".join(names) if names else "none"
            raise ConfigError(f"storage {storage} holds several studies or none ({listed}); "
                              "name one with --study")
    if study not in names:
        raise ConfigError(f"no study {study!r} in {storage} (studies: {', '.join(names) or 'none'})")
    loaded = optuna.load_study(study_name=study, storage=backend)
    direction = direction or ("maximize" if loaded.directions[0] == optuna.study.StudyDirection.MAXIMIZE
                              else "minimize")
    trials = loaded.get_trials(deepcopy=False)
    excluded: dict[str, int] = defaultdict(int)
    for trial in trials:
        reason = _reason(trial)
        if reason:
            excluded[reason] += 1
    # the leaderboard's own filter, so aggregation and leaderboard.json never disagree on who was scored
    rows = leaderboard(loaded, direction == "maximize")
    if not rows:
        raise ConfigError(f"study {study!r} in {storage} has no completed, scored trials "
                          f"({len(trials)} trial(s): {dict(excluded) or 'none ran'})")
    rates = {trial.number: trial.user_attrs.get("lr") for trial in trials}  # the evaluator's chosen rate
    scored = _fold((Row(_canonical(r["pattern"], f"trial {r['trial']}"), float(r["score"]), r["trial"],
                        _rate(rates.get(r["trial"]), f"trial {r['trial']}")) for r in rows),
                   direction == "maximize")
    return Population(scored, direction, {"kind": "storage", "storage": storage, "study": study},
                      dict(sorted(excluded.items())))


def read_search_dir(path: str | Path, study: str | None = None, direction: str | None = None) -> Population:
    """A ``composer search --out DIR``: its study (storage from config.json, default DIR/study.db), else
    DIR/leaderboard.json. The storage is preferred: it also holds trials run after the leaderboard was
    written.
    """
    from search.storage import default_storage_url

    out = Path(path)
    if not out.is_dir():
        raise ConfigError(f"no such search output directory: {out}")
    config = _read_json(out / "config.json")
    best = _read_json(out / "best.json")
    storage = config.get("storage") or default_storage_url(out)
    preferred = [name for name in (best.get("study"), config.get("study")) if name]
    leaderboard_json = out / "leaderboard.json"
    if _storage_exists(storage):
        try:
            return read_study(storage, study, preferred, direction)
        except StorageUnavailable as err:  # e.g. a database server that is down: the leaderboard answers
            if not leaderboard_json.is_file():
                raise
            note = str(err)
    else:
        note = f"no storage at {storage}"
    if not leaderboard_json.is_file():
        what = other_output(out)
        raise ConfigError(f"{out} " + (f"is {what}: it holds no search results; give a search's --out" if what else
                                       f"holds no search results (no study.db, no leaderboard.json); run `composer "
                                       f"search --out {out}` first"))
    if study is not None and best.get("study") not in (None, study):
        raise ConfigError(f"{leaderboard_json} is of study {best.get('study')!r}, not {study!r}")
    population = read_leaderboard(leaderboard_json, direction or best.get("direction"))
    return Population(population.scored, population.direction,
                      {**population.source, "study": best.get("study"), "note": note}, population.excluded)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def search_attention(source: str | Path) -> tuple[str | None, Path | None]:
    """The ``--attention-at-target`` a search ran with, its config.json's ``attention_at_target``, and that file.

    ``source`` as the readers here take it: a ``composer search --out`` directory, a file in one (leaderboard.json,
    rungs.json, study.db) or a sqlite or journal URL of its storage. (None, None) where no config.json beside it
    names a rule: a hand-made leaderboard, a database server, a search from before the option. Why: the search
    scored and costed each pattern as grown by that rule (``search.growth.grow``), so what grows its
    patterns afterwards (``composer pipeline``, ``composer transfer``) grows them the same way by default."""
    from scaling.extrapolate import ATTENTION_RULES

    config = search_dir_of(source) / "config.json"
    rule = _read_json(config).get("attention_at_target")
    return (rule, config) if rule in ATTENTION_RULES else (None, None)


def refuse_depth_search(source: str | Path, command: str) -> None:
    """Refuse a search that grew its models at ``--depth-at-target`` (by width) or to ``--equal-cost``: ``command``
    grows by depth at the target's widths, so it would train models the search never scored. One line naming what
    does train them."""
    config = _read_json(search_dir_of(source) / "config.json")
    depth = config.get("depth_at_target")
    if config.get("equal_cost"):
        raise ConfigError(f"{source}: the search grew its models to {config['equal_cost']}'s cost (--equal-cost); "
                          f"{command} grows to the target's size and would train other models: train the answer "
                          "with composer train --from-search DIR --target P (it grows it as the search did)")
    if depth is not None:
        raise ConfigError(f"{source}: the search grew its models to {depth} layers by width (--depth-at-target); "
                          f"{command} grows by depth at the target's widths and would train other models: train the "
                          "answer with composer train --from-search DIR --target P (it grows it as the search did)")


def load_population(source: str | Path, study: str | None = None, direction: str | None = None) -> Population:
    """Dispatch on ``source``: an Optuna storage URL, a search output directory, a leaderboard.json or a
    storage file (``study.db``, a journal ``.log``)."""
    from search.storage import JOURNAL_SUFFIXES

    if direction is not None and direction not in DIRECTIONS:
        raise ConfigError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
    text = str(source)
    if "://" in text or text.startswith("journal:"):
        return read_study(text, study, direction=direction)
    path = Path(text)
    if path.is_dir():
        return read_search_dir(path, study, direction)
    if not path.exists():
        raise ConfigError(f"no such file or directory: {path}")
    if path.suffix == ".db":
        return read_study(f"sqlite:///{path.resolve()}", study, direction=direction)
    if path.name.endswith(JOURNAL_SUFFIXES):
        return read_study(str(path), study, direction=direction)
    if study is not None:
        raise ConfigError(f"--study applies to a storage or a search directory, not to {path}")
    return read_leaderboard(path, direction)


# -------------------------------------------------------------------------------------------------- aggregate


def aggregate_population(population: Population, *, c: int | str = 0, k: int = 5) -> Aggregation:
    """K-means over the population's scores, then N_c voting among the top cluster."""
    c, k = _check_c(c), _check_k(k)
    scored = population.scored
    if not scored:
        raise ConfigError("no scored patterns to aggregate")
    lengths = sorted({len(layer_tokens(s.pattern)) for s in scored})
    if len(lengths) > 1:
        raise ConfigError(f"the scored patterns have different lengths ({', '.join(map(str, lengths))} "
                          "layers); aggregate one study (one stage of an incremental search) at a time; a "
                          "--space mixers search varies its depth, and voting layer by layer needs one depth")
    maximize = population.direction == "maximize"
    clusters = kmeans_1d([s.score for s in scored], k)
    top = top_cluster(clusters, population.direction)
    low, high = clusters[top].low, clusters[top].high
    # best first; equal scores by pattern so the member order (and the table) never depends on storage order
    ranked = sorted(scored, key=lambda s: (-s.score if maximize else s.score, s.pattern))
    members = tuple(Member(s.pattern, s.score) for s in ranked if low <= s.score <= high)
    pattern, layers = vote(members, c, population.direction)
    own = {s.pattern: s.score for s in scored}
    return Aggregation(
        pattern=pattern,
        members=members,
        c=c,
        k=k,
        k_used=len(clusters),
        clusters=tuple(clusters),
        top_cluster=top,
        direction=population.direction,
        layers=tuple(layers),
        best=Member(ranked[0].pattern, ranked[0].score),
        score=own.get(pattern),
        trials={s.pattern: s.trials for s in ranked if low <= s.score <= high},
        rates={s.pattern: s.lr for s in ranked if s.lr is not None},
        population=len(scored),
        excluded=dict(population.excluded),
        source=dict(population.source),
    )


def aggregate(source: str | Path | Population, *, c: int | str = 0, k: int = 5, study: str | None = None,
              direction: str | None = None) -> Aggregation:
    """Aggregate a search into one pattern.

    ``source``: a ``composer search`` output directory, a leaderboard.json, an Optuna storage URL (``study``
    names the study when the storage holds several) or a storage file; ``c``: 0 (per-layer majority, default),
    1, ..., or "all"; ``k``: K-means clusters; ``direction`` overrides the study's (or leaderboard's) own.
    """
    _check_c(c), _check_k(k)  # before reading anything
    population = source if isinstance(source, Population) else load_population(source, study, direction)
    return aggregate_population(population, c=c, k=k)
