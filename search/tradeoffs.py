"""What a deployer trades against the loss: recall at length and the inference cache, for a search's finalists.

Why: the last rung ranks validation loss on 128-token text, where a fixed-state mixer loses nothing, so the best
loss can come from a layout with no attention, which recalls 38-53x less than attention at 1,024 tokens
(docs/recall.md) and which no shipped hybrid would choose. So successive halving can probe its finalists' recall
(``search.recall``'s ``probe``: each finalist's mixers alone on MQAR up to 1,024 tokens), and then:

* ``--min-recall X`` keeps as answers only the finalists that recall at least ``X`` at the probe's longest length
  (``known``: at least as much as the known layout with attention the answer is weighed against, the one with the
  best loss among the finalists, within the two recalls' 95% intervals over the test sequences);
* ``--objectives score,recall,kv`` returns the finalists no other beats on every objective (loss lower, recall
  higher, cache per sequence at 32K tokens lower), with the known layouts placed among them, and says for each
  known layout whether the answer dominates it.

Where the last rung measures the trained models' recall (``search.trained_recall``, issue 48), ``known`` and the
recall objective read that instead, and the probe is not trained (:func:`attach_trained_recall`): the copy gain of
random spans at the longest distance of the context, with its t interval over the held-out sequences. A numeric
``--min-recall`` is a fraction of MQAR queries, the probe's measure, and reads the probe.

Dominance weighs the noise (``compare``): a loss is better only when the interval of the difference between the
two rows' evidence records lies below 0 (paired over common seeds, else each side's mean with the seed spread
measured at their setting standing in, as for the answer's verdict, ``search.verdict``; no interval: even), a
recall only when the two 95% intervals over the test sequences do not overlap; the cache is analytic and compared
as it is. A difference the noise can explain is "even", so a
finalist that leads a known layout by less than the seed noise does not dominate it.
"""

from __future__ import annotations

from typing import Any

from composer.pattern import attention_share
from composer.statistics import clustered_proportion_interval
from search.evidence_record import is_finite_score
from search.verdict import SeedNoise, difference_interval

CACHE_LENGTH = "32768"  # the cache the kv objective and the plot read: one sequence of 32K tokens


def attach_recall(rows: list[dict[str, Any]], recall_rows: list[dict[str, Any]]) -> None:
    """Copy each finalist's probe result (``recall_rows``: the recall stage's leaderboard) into its row:
    ``recall`` (accuracy at the longest length), ``recall_mean`` (over the lengths), ``recall_details``, and what
    :func:`recall_interval` reads at the longest length: ``recall_queries``, ``recall_sequences`` (the test
    sequences the queries came in; for a probe recorded before it counted them, its queries over its pairs per
    sequence, ``kv_pairs``) and ``recall_sequence_sd`` (the sd of their accuracies; None where not recorded)."""
    by_pattern = {row["pattern"]: row for row in recall_rows}
    for row in rows:
        probed = by_pattern.get(row["pattern"])
        if probed is None:
            continue
        details = probed.get("details") or {}
        by_length = details.get("accuracy_by_length") or {}
        longest = max(by_length, key=int) if by_length else None
        row["recall"] = by_length[longest] if longest else probed["score"]
        row["recall_length"] = int(longest) if longest else None
        row["recall_mean"] = probed["score"]
        queries = (details.get("test_queries") or {}).get(longest)
        sequences = (details.get("test_sequences") or {}).get(longest)
        per_sequence = (details.get("kv_pairs") or {}).get(longest)  # MQAR queries every pair once per sequence
        if sequences is None and queries and per_sequence:
            sequences = queries // per_sequence
        row["recall_queries"] = queries
        row["recall_sequences"] = sequences
        row["recall_sequence_sd"] = (details.get("sequence_accuracy_sd") or {}).get(longest)
        row["recall_details"] = details


def attach_trained_recall(rows: list[dict[str, Any]]) -> None:
    """Each finalist's trained recall (its row's ``trained_recall``, recorded by the last rung) as the recall the
    constraint and the front read: ``recall`` (the seed-averaged random copy gain at the longest distance, nats),
    ``recall_ci`` (its 95% interval over the held-out sequences), ``recall_length`` (that distance, in tokens),
    ``recall_sequences`` and ``recall_source`` ``"trained"``. A row without one (a trial scored before the
    measure existed) stays unmeasured: it meets no recall bar and is off the front's recall axis."""
    for row in rows:
        figure = row.get("trained_recall") or {}
        if figure.get("value") is None:
            continue
        row.update(recall=figure["value"], recall_ci=figure.get("ci"), recall_length=figure.get("distance"),
                   recall_sequences=figure.get("sequences"), recall_seeds=figure.get("seeds"),
                   recall_source="trained")


# which known layout --min-recall known holds the answer to, as the summary says it
BAR_LAYOUT = "the best loss of the known layouts with attention"


def recall_threshold(rows: list[dict[str, Any]], min_recall: float | str) -> tuple[float | None, str]:
    """The recall an answer needs, and where it comes from: a fraction as given, or (``known``) the recall of the
    known layout with attention that has the best loss among the finalists (None when none was probed).

    Why that layout and not the one that recalls most: it is the layout a user would deploy instead of the answer,
    so "recalls as well as the known layouts" means as well as that one. The best recall of any known layout held
    the answer to a bar the best known layout itself failed: in the equal-cost search of 2026-11-29 linear-7to1's
    probe (1.000) set it at 0.9995, which dropped Nemotron-H (0.993, the better loss by 0.034) and made the search
    recommend linear-7to1 (docs/reports/equal-cost-2026-11-29.md). Equal losses go to the higher recall.

    ``known`` asks for the lower end of that layout's 95% interval over its test sequences
    (:func:`recall_interval`), not its point estimate: where the known layouts recall 0.9996 and 0.9999 of 16,384
    queries, a finalist at 0.9994 is not worse, and the point estimate would reject it on which sequences were
    drawn. The interval is the test sample's noise at the one training seed the probe trains, not what another
    seed would recall, and the reason says so."""
    if min_recall != "known":
        return float(min_recall), f"--min-recall {float(min_recall):g}"
    with_attention = [row for row in rows if row.get("known") and attention_share(row["pattern"]) > 0
                      and row.get("recall") is not None]
    trained = any(row.get("recall_source") == "trained" for row in rows)
    if not with_attention:
        return None, ("--min-recall known: no known layout with attention has a trained recall recorded (scored "
                      "before it was measured: re-run with another --out)" if trained else
                      "--min-recall known: no known layout with attention was probed")
    best = min(with_attention, key=lambda row: (_loss(row), -row["recall"]))
    if best.get("recall_source") == "trained":
        interval = recall_interval(best)
        said = (f"--min-recall known: {best['known']} {best['pattern']} ({BAR_LAYOUT}): its trained model copies "
                f"random spans at "
                f"{best['recall_length']} tokens with a gain of {best['recall']:+.3f} nats")
        if interval is None:
            return best["recall"], said
        return interval[0], (f"{said}, at least {interval[0]:+.4f} (95% interval over its {best['recall_sequences']:,} "
                             "held-out sequences, averaged over its seeds: the sequences' noise, not another training "
                             "seed's)")
    said = f"--min-recall known: {best['known']} {best['pattern']} ({BAR_LAYOUT}) recalls {best['recall']:.3f}"
    interval = recall_interval(best)
    if interval is None:
        return best["recall"], said
    low = interval[0]
    return low, (f"{said}, at least {low:.4f} (95% interval over its {best['recall_sequences']:,} test sequences "
                 f"({best['recall_queries']:,} queries): the test sample's noise at one training seed, not another "
                 "training seed's)")


def _loss(row: dict[str, Any]) -> float:
    """A finalist's loss for choosing the known layout ``known`` reads; none recorded ranks last."""
    score = row.get("score")
    return float(score) if is_finite_score(score) else float("inf")


def meets(row: dict[str, Any], threshold: float | None, within_noise: bool = False) -> bool:
    """Whether a probed finalist recalls at least ``threshold`` (an unprobed one never does).

    ``within_noise`` (``--min-recall known``, whose threshold is the lower end of the best known layout's interval):
    the finalist's own interval over its test sequences (:func:`recall_interval`) reaching the threshold is
    enough, as the front counts two recalls whose intervals overlap as even: 16,372 of 16,384 queries, one miss in
    each of 12 of the 256 sequences, is not worse than 16,379, whose interval's lower end (about 16,372.3) its own
    interval reaches."""
    if threshold is None or row.get("recall") is None:
        return False
    interval = recall_interval(row) if within_noise else None
    return (interval[1] if interval is not None else row["recall"]) >= threshold


def objective_values(row: dict[str, Any], objectives: list[str]) -> tuple[float, ...] | None:
    """The row's objectives, each to minimise (recall negated); None when one is missing (not probed)."""
    values = []
    for name in objectives:
        if name == "score":
            values.append(row["score"])
        elif name == "recall":
            if row.get("recall") is None:
                return None
            values.append(-row["recall"])
        elif name == "kv":
            cache = ((row.get("cost") or {}).get("cache_bytes") or {}).get(CACHE_LENGTH)
            if cache is None:
                return None
            values.append(float(cache))
    return tuple(values)


def dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """``a`` is no worse than ``b`` on every objective and better on one (all minimised; point estimates)."""
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(x < y for x, y in zip(a, b, strict=True))


def recall_interval(row: dict[str, Any]) -> list[float] | None:
    """The 95% interval of a row's recall over its test sequences, or None where the probe did not count its
    queries and the sequences they came in.

    Why sequences: the queries of one MQAR test sequence share its keys and the model's state along it, so the
    probe's 16,384 queries at 1,024 tokens are 256 sequences' worth of evidence, not 16,384 independent trials;
    Wilson over the queries called "worse recall" on misses that a few sequences explain. The interval is Wilson's
    over the queries' effective number (``composer.statistics.clustered_proportion_interval``): the queries divided
    by the design effect the sequences' spread of accuracy (``recall_sequence_sd``) measures, between 1 (misses
    spread one per sequence) and the queries per sequence (misses in whole sequences). A probe that did not record
    that spread gets the widest interval its misses allow (packed into as few sequences as they fill), and a recall
    of exactly 0 or 1 Wilson's over its sequences. It covers the test sample only: the probe trains one seed, and
    another training seed could recall more or less."""
    if row.get("recall_source") == "trained":  # a copy gain's t interval over sequences (attach_trained_recall)
        return row.get("recall_ci")
    queries, sequences = row.get("recall_queries"), row.get("recall_sequences")
    if not queries or not sequences:
        return None
    return clustered_proportion_interval(row["recall"], queries, sequences, row.get("recall_sequence_sd"))["ci"]


def compare(a: dict[str, Any], b: dict[str, Any], objective: str, noise: SeedNoise | None) -> int | None:
    """-1 when ``a`` is better than ``b`` on ``objective`` beyond the noise, 1 when worse, 0 when the noise can
    explain the difference (or there is none); None when either lacks it. See the module docstring."""
    values = objective_values(a, [objective]), objective_values(b, [objective])
    if values[0] is None or values[1] is None:
        return None
    if objective == "score":
        ci = difference_interval(a, b, noise)["ci"]
        return 0 if ci is None or ci[0] <= 0 <= ci[1] else (-1 if ci[1] < 0 else 1)
    if objective == "recall":
        ours, theirs = recall_interval(a), recall_interval(b)
        if ours is not None and theirs is not None and ours[0] <= theirs[1] and theirs[0] <= ours[1]:
            return 0  # the intervals overlap
    return (values[0] > values[1]) - (values[0] < values[1])


def dominates_row(a: dict[str, Any], b: dict[str, Any], objectives: list[str], noise: SeedNoise | None) -> bool:
    """``a`` is worse than ``b`` on no objective and better on one, each beyond its noise (``compare``)."""
    said = [compare(a, b, name, noise) for name in objectives]
    return None not in said and 1 not in said and -1 in said


def front(rows: list[dict[str, Any]], objectives: list[str], noise: SeedNoise | None = None,
          point_estimates: bool = False) -> list[dict[str, Any]]:
    """The rows no other row dominates on ``objectives`` beyond the noise (rows with a missing objective are left
    out), best score first; ``point_estimates``: on the point values (the plot's drawn line)."""
    scored = [(row, objective_values(row, objectives)) for row in rows]
    scored = [(row, values) for row, values in scored if values is not None]
    if point_estimates:
        return [row for row, values in scored if not any(dominates(other, values) for _, other in scored)]
    return [row for row, _ in scored if not any(dominates_row(other, row, objectives, noise) for other, _ in scored)]


def known_against(answer: dict[str, Any], rows: list[dict[str, Any]], objectives: list[str],
                  noise: SeedNoise | None = None) -> list[dict[str, Any]]:
    """For each known layout among ``rows``: whether ``answer`` dominates it, it dominates the answer, the two are
    even within the noise, or neither (a trade-off), on ``objectives``, each weighed as ``compare`` does; with the
    answer's side of each objective (better, worse, even)."""
    words = {-1: "better", 0: "even", 1: "worse", None: "not measured"}
    said = []
    for row in rows:
        if not row.get("known") or row["pattern"] == answer["pattern"]:
            continue
        sides = [compare(answer, row, name, noise) for name in objectives]
        if None in sides:
            relation = "not comparable (an objective was not measured)"
        elif -1 in sides and 1 not in sides:
            relation = "dominated by the answer"
        elif 1 in sides and -1 not in sides:
            relation = "dominates the answer"
        elif -1 not in sides:
            relation = "even within the noise"
        else:
            relation = "neither dominates: a trade-off"
        entry = {"name": row["known"], "pattern": row["pattern"], "relation": relation,
                 "answer_is": {name: words[side] for name, side in zip(objectives, sides, strict=True)}}
        if "score" in objectives:  # how the loss was weighed: its seeds, setting and noise (search.evidence_record)
            weighed = difference_interval(answer, row, noise)
            entry["score_difference"] = {key: weighed[key] for key in ("difference", "ci", "seeds", "new_seeds",
                                                                        "known_seeds", "setting", "noise", "method")}
        said.append(entry)
    return said


__all__ = ["CACHE_LENGTH", "attach_recall", "attach_trained_recall", "compare", "dominates", "dominates_row", "front", "known_against", "meets",
           "objective_values", "recall_interval", "recall_threshold"]
