"""search.trained_recall: the recall of the model a search trains, its figure over seeds, and what --min-recall and
the front read where the last rung measured it (issue 48)."""

import pytest

from composer.statistics import seed_summary
from search.config import SearchConfig
from search.strategies.base import Answer
from search.strategies.halving_answer import mark_eligible, weigh_front
from search.trained_recall import combined, describe, seed_averaged
from tests.search.records import recorded

SETTINGS = {"seq_len": 64, "span": 16, "lead": 16, "distances": [16, 32], "ngram": 8, "sequences": 4, "seed": 0}
# a search at the smoke ladder, where the last rung (rung-smoke-1) measures the trained models' recall
TRAINED = {"evaluator": "lm", "strategy": "successive-halving", "budget": "smoke", "widths": "tiny"}


def report(gains, settings=SETTINGS, seconds=0.5):
    """A seed's compact report as ``search.trained_recall.compact`` keeps it, with these per-sequence gains of random
    spans at the longest distance."""
    return {"settings": dict(settings), "copy": [], "ar_slice": {}, "random_gains": list(gains), "seconds": seconds}


def test_the_seed_averaged_figure_averages_each_sequence_over_seeds_then_takes_its_interval_over_sequences():
    # the two seeds disagree sequence by sequence in opposite directions: averaged per sequence, the spread vanishes
    # but for one sequence, which pooling the 8 gains as if independent would not show
    per_seed = {"0": report([1.0, 0.0, 2.0, 1.0]), "1": report([0.0, 1.0, 0.0, 1.4])}
    figure = seed_averaged(per_seed)
    averaged = [0.5, 0.5, 1.0, 1.2]
    expected = seed_summary(averaged)
    assert figure["value"] == pytest.approx(expected["mean"]) and figure["ci"] == pytest.approx(expected["ci"])
    pooled = seed_summary([1.0, 0.0, 2.0, 1.0, 0.0, 1.0, 0.0, 1.4])
    assert figure["ci"] != pytest.approx(pooled["ci"]), "the interval must be over sequences, not seed x sequence"
    assert figure["sequences"] == 4 and figure["seeds"] == [0, 1] and figure["distance"] == 32
    assert figure["kind"] == "random" and figure["seq_len"] == 64 and figure["seconds"] == pytest.approx(1.0)
    assert describe(figure) == f"recall (random copy gain at 32 tokens) {expected['mean']:+.2f} " \
                               f"[{expected['ci'][0]:+.2f}, {expected['ci'][1]:+.2f}]"
    # seeds scored on other sequences (another span, say) are not averaged together
    other = {**SETTINGS, "span": 8}
    assert seed_averaged({"0": report([1.0, 0.0, 2.0, 1.0]), "1": report([0.0, 1.0, 0.0, 1.4], other)}) is None
    assert seed_averaged({}) is None
    # a confirmation's seeds join the rung's: the figure over all of them
    merged, joined = combined({"0": per_seed["0"]}, {"1": per_seed["1"]})
    assert set(merged) == {"0", "1"} and merged["1"] == per_seed["1"] and joined["seeds"] == [0, 1]
    assert joined["value"] == pytest.approx(0.8) and joined["ci"] == pytest.approx(expected["ci"])  # by hand above
    assert joined["sequences"] == 4 and joined["seconds"] == pytest.approx(1.0)
    assert combined({"0": per_seed["0"]}, {}) is None, "nothing to join"
    assert combined({"0": per_seed["0"]}, {"1": report([0.0, 1.0, 0.0, 1.4], other)}) is None, "scored unalike"
    again = combined({"0": per_seed["0"]}, {"0": report([9.0, 9.0, 9.0, 9.0])})
    assert again[1]["seeds"] == [0] and again[1]["value"] == pytest.approx(1.0), "a seed the record has is its own"
    assert combined({"0": per_seed["0"]}, None) is None


def trained_row(pattern, loss, gains, known=None):
    """A last-rung row whose trained model copied random spans with these per-sequence gains (one seed)."""
    per_seed = {"0": report(gains)}
    details = {"losses": {"0": loss}, "recall": per_seed, "trained_recall": seed_averaged(per_seed)}
    return recorded({"pattern": pattern, "score": loss, "known": known, "details": details,
                     "trained_recall": details["trained_recall"]})


# AMAMAM (Llama) retrieves; MMAMMM a little, its interval reaching Llama's low end; MMMMMM (no attention) nothing
ROWS = [trained_row("MMMMMM", 1.30, [0.0, 0.01, -0.01, 0.0]),
        trained_row("MMAMMM", 1.31, [0.2, 0.9, 0.1, 1.0]),
        trained_row("AMAMAM", 1.33, [1.0, 1.2, 0.9, 1.1], known="llama")]


def test_min_recall_known_reads_the_trained_models_recall_where_the_last_rung_measured_it():
    config = SearchConfig(**TRAINED, min_recall="known", objectives="score,recall")
    assert config.reads_trained_recall and config.recall_source == "trained" and not config.probes_recall
    rows = [dict(row) for row in ROWS]
    answer = Answer(study=None, rows=rows)
    mark_eligible(config, answer, probed=None)
    weigh_front(config, answer)
    llama, some, none = rows[2], rows[1], rows[0]
    assert llama["recall_source"] == "trained" and llama["recall"] == llama["trained_recall"]["value"]
    said = answer.summary["min_recall"]
    # the bar is the low end of the interval of the known layout with the best loss over its held-out sequences; a finalist whose own
    # interval reaches it is eligible, as the probe's within_noise rule
    assert said["source"] == "trained" and said["threshold"] == pytest.approx(llama["trained_recall"]["ci"][0])
    assert some["trained_recall"]["ci"][1] >= said["threshold"] > some["trained_recall"]["value"]
    assert none["trained_recall"]["ci"][1] < said["threshold"]
    assert said["eligible"] == ["MMAMMM", "AMAMAM"] and [row["pattern"] for row in answer.eligible] == said["eligible"]
    assert said["recall"]["MMMMMM"]["value"] == none["trained_recall"]["value"]
    assert said["recall"]["AMAMAM"]["ci"] == llama["trained_recall"]["ci"] and said["recall"]["AMAMAM"]["length"] == 32
    assert said["why"].startswith("--min-recall known: llama AMAMAM (the best loss of the known layouts with "
                                  "attention): its trained model copies random spans at 32 tokens")
    assert "recall_probe" not in answer.summary
    assert answer.summary["front"]["recall_source"] == "trained"
    # one seed each and no measured seed spread: the losses are even, so Llama's recall, beyond MMMMMM's interval,
    # takes MMMMMM off the front; MMAMMM's interval overlaps Llama's (even)
    assert answer.summary["front"]["patterns"] == ["MMAMMM", "AMAMAM"]


def test_a_row_without_a_trained_recall_is_unmeasured_not_zero():
    rows = [dict(row) for row in ROWS]
    rows[1] = {key: value for key, value in rows[1].items() if key != "trained_recall"}  # scored before the measure
    answer = Answer(study=None, rows=rows)
    mark_eligible(SearchConfig(**TRAINED, min_recall="known"), answer, probed=None)
    assert answer.summary["min_recall"]["eligible"] == ["AMAMAM"] and rows[1].get("recall") is None


def test_a_numeric_min_recall_is_a_fraction_of_queries_and_reads_the_probe():
    """A number is the probe's measure (MQAR queries answered); trained recall is a copy gain in nats, compared with
    the best known layout's by ``known``: a number asks for the probe, also where the last rung measured recall."""
    numeric = SearchConfig(**TRAINED, min_recall=0.5)
    assert numeric.probes_recall and not numeric.reads_trained_recall and numeric.recall_source == "probe"
    assert SearchConfig(**TRAINED, objectives="score,recall").recall_source == "trained"
    assert SearchConfig(**TRAINED).recall_source is None  # not asked for
    assert SearchConfig(**TRAINED).trained_recall_sequences == 4  # rung-smoke-1's, measured all the same


def test_the_cpu_ladder_records_trained_recall_but_its_probe_decides():
    """At the cpu ladder's target no trained model retrieves (docs/recall.md), so --min-recall known reads the probe
    there and the trained figure is recorded beside it; the gpu ladder's target reads the trained models'."""
    cpu = SearchConfig(**{**TRAINED, "budget": "cpu"}, min_recall="known")
    assert cpu.trained_recall_sequences == 32 and not cpu.trained_recall_decides
    assert cpu.recall_source == "probe" and cpu.probes_recall
    gpu = SearchConfig(**{**TRAINED, "budget": "gpu"}, min_recall="known")
    assert gpu.trained_recall_decides and gpu.recall_source == "trained" and not gpu.probes_recall
    assert "does not decide at this budget" in cpu.why_probe and gpu.why_probe is None


def test_a_numeric_min_recall_says_it_reads_the_probe_for_its_unit_not_for_the_ladder():
    """On the gpu ladder, where the trained models' recall decides `known`, a numeric --min-recall still reads the
    probe: the reason printed is its unit (a share of MQAR queries), not the cpu ladder's finding."""
    numeric = SearchConfig(**{**TRAINED, "budget": "gpu"}, min_recall=0.5)
    assert numeric.recall_source == "probe"
    assert "share of MQAR queries" in numeric.why_probe and "cpu ladder" not in numeric.why_probe


def test_where_the_probe_decides_the_summary_says_what_it_is_not():
    from search.summary import PROBE_LIMITS, tradeoff_lines

    said = {"leaderboard": [], "min_recall": {"why": "--min-recall known: llama AMAMAM recalls 0.9", "eligible": [],
                                              "source": "probe", "why_probe": "the reason"}}
    assert PROBE_LIMITS + "; the reason" in tradeoff_lines(said)
    assert PROBE_LIMITS not in tradeoff_lines({**said, "min_recall": {**said["min_recall"], "source": "trained"}})


def test_the_confirmation_joins_recall_but_the_pair_it_confirmed_stays_the_pair_compared():
    """Suspected (issue 60): eligibility was recomputed from the confirmation's joined recall, so the verdict could
    move to an unconfirmed finalist while the summary listed the confirmed pair. It is decided once, on the seeds
    the pair was chosen on; a finalist whose standing the joined seeds would change is named in the summary."""
    from search.strategies.halving_answer import recheck_eligible
    from search.trained_recall import combined

    config = SearchConfig(**TRAINED, min_recall="known")
    rows = [dict(row) for row in ROWS]
    answer = Answer(study=None, rows=rows)
    mark_eligible(config, answer, probed=None)
    before = [row["pattern"] for row in answer.eligible]
    assert before == ["MMAMMM", "AMAMAM"]
    some = rows[1]  # the confirmation's seed of MMAMMM recalls nothing: joined, its interval misses the bar
    joined = combined(some["details"]["recall"], {"1": report([0.0, 0.0, 0.0, 0.0])})
    some["details"] = {**some["details"], "recall": joined[0], "trained_recall": joined[1]}
    some["trained_recall"] = joined[1]
    recheck_eligible(config, answer)
    assert [row["pattern"] for row in answer.eligible] == before, "the pair the confirmation chose stays eligible"
    changed = answer.summary["min_recall"]["changed_by_confirmation"]
    assert changed["patterns"] == [{"pattern": "MMAMMM", "meets_on_joined_seeds": False}]
    assert answer.summary["min_recall"]["recall"]["MMAMMM"]["value"] == pytest.approx(joined[1]["value"])
    from search.summary import tradeoff_lines

    lines = tradeoff_lines({"leaderboard": rows, "min_recall": answer.summary["min_recall"]})
    assert any(line.startswith("over the confirmation's joined seeds, MMAMMM would miss the bar") for line in lines)
