"""The recall of every model ``composer pipeline`` trains (issue 48): measured once per run, kept in the run, and
summarized per model in the comparison.

Why: the comparison ranks the composite against its baselines by validation loss; a layout chosen for its loss may
still lose what attention is kept for, retrieving from the context. So after each (model, seed) training the
trained model is scored as ``composer eval --model DIR --tasks recall`` scores it
(:func:`search.trained_recall.measure_run`: the copy gain of text and random spans at every distance that fits the
context, and the associative-recall slice, each with a t interval over held-out sequences), on the run's
validation split, which no training seed changes: every model and seed is scored on the same sequences.

The measurement is kept in ``<run>/recall.json`` with the settings it was made with (``recall_sequences`` and the
context), so a resumed pipeline measures only the runs without one (a run trained before this module, or killed
between its training and its measurement) and a changed ``recall_sequences`` measures again. ``train:
recall_sequences: N`` in a recipe (``--recall-sequences``) sets the number of sequences per kind of span and of
AR windows: 32 by default, as the cpu ladder's last rung measures its runs (``search.lm``, rung-cpu-2), and 0
measures nothing.

Per model the comparison gives the random copy gain at the longest distance (only a copy predicts random tokens)
and the AR slice's two contrasts, each sequence averaged over the seeds and the interval over the sequences
(:func:`search.trained_recall.seed_averaged`): it says how the figure would move on other held-out text for these
trained models, not over training seeds. Beside them it says plainly when no model retrieves
(:func:`search.trained_recall.retrieval`): a table of small gains must not read as a ranking of recall the models
do not have (docs/reports/trained-recall-2026-11-28.md found none at the CPU target).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from composer.errors import ConfigError
from composer.experiments.replicates import Replicate
from composer.files import atomic_write_json
from composer.statistics import format_interval
from search.trained_recall import RETRIEVAL_SHARE, ar_averaged, describe, retrieval, seed_averaged

SETTING = "recall_sequences"  # the train: key (and --recall-sequences)
DEFAULT_SEQUENCES = 32  # the cpu ladder's last rung's (search.lm, rung-cpu-2): about a second a demo-4m model
RECORD = "recall.json"  # beside the run's summary.json
IDENTITY = "pipeline_recall"  # the record's key: what it was measured with
CSV_COLUMNS = ("recall_random_gain", "recall_random_gain_ci_low", "recall_random_gain_ci_high", "recall_distance",
               "recall_second_copy_share", "recall_ar_hit_advantage", "recall_ar_hit_advantage_ci_low",
               "recall_ar_hit_advantage_ci_high", "recall_ar_repeat_gain", "recall_ar_repeat_gain_ci_low",
               "recall_ar_repeat_gain_ci_high", "recall_retrieves")


def check_sequences(value: Any) -> int:
    """``recall_sequences``: 0 (not measured) or an integer of at least 2 (an interval needs two sequences)."""
    if isinstance(value, bool) or not isinstance(value, int) or value == 1 or value < 0:
        raise ConfigError(f"train.{SETTING} must be 0 (recall not measured) or an integer >= 2 (held-out sequences "
                          f"per kind of span and AR windows), got {value!r}")
    return value


def identity(sequences: int, seq_len: int) -> dict[str, int]:
    """What makes two measurements of one run the same: a record made otherwise is measured again."""
    return {"sequences": sequences, "seq_len": seq_len}


def read_record(replicate: Replicate, sequences: int) -> dict[str, Any] | None:
    """The run's recall record when it was measured with ``sequences`` at its context, else None."""
    path = replicate.out / RECORD
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    return record if record.get(IDENTITY) == identity(sequences, replicate.config.seq_len) else None


class RecallMeasurer:
    """``run_replicates``' ``after`` hook: measures a run's trained model unless its record is current. The held-out
    split and tokenizer are read once for all runs (:class:`composer.evaluation.loading.HeldOutCache`)."""

    def __init__(self, sequences: int, echo: Callable[[str], None] = print) -> None:
        self.sequences = sequences
        self.echo = echo
        self._cache: Any = None

    def __call__(self, replicate: Replicate, summary: Mapping[str, Any]) -> None:
        who = f"{replicate.name} seed {replicate.seed}"
        if summary.get("diverged") or read_record(replicate, self.sequences) is not None:
            return
        model_dir = replicate.out / "model"  # composer train's export; not the summary's path (a moved --out)
        if not (model_dir / "model.safetensors").is_file():
            self.echo(f"   {who}: no exported model in {model_dir}; recall not measured")
            return
        from composer.evaluation.loading import HeldOutCache
        from search.trained_recall import measure_run

        if self._cache is None:
            self._cache = HeldOutCache()
        seq_len = replicate.config.seq_len
        self.echo(f"== recall: {who} {replicate.pattern} on {self.sequences} held-out sequences at {seq_len} tokens")
        try:
            report = measure_run(model_dir, seq_len, self.sequences, self._cache)
        except ConfigError as err:  # a held-out split too small for the context: the losses still compare
            self.echo(f"   {who}: recall not measured: {err}")
            return
        atomic_write_json(replicate.out / RECORD, {IDENTITY: identity(self.sequences, seq_len),
                                                   "model": str(model_dir), **report})
        self.echo(f"   {who}: {describe(seed_averaged({str(replicate.seed): report}))} "
                  f"({report['seconds']:.1f} s)")


def records(plan: list[Replicate], sequences: int) -> dict[tuple[str, int], dict[str, Any]]:
    """Every run's current record, by (model, seed); runs without one are left out."""
    found = {}
    for replicate in plan:
        record = read_record(replicate, sequences)
        if record is not None:
            found[(replicate.name, replicate.seed)] = record
    return found


def summarize(per_seed: Mapping[str, dict[str, Any]]) -> dict[str, Any] | None:
    """A model's recall over its measured seeds: the random copy gain at the longest distance and the AR slice's
    contrasts (each sequence averaged over the seeds, the interval over the sequences), whether it retrieves, and
    each seed's copy rows and AR slice."""
    if not per_seed:
        return None
    verdict = retrieval(per_seed) or {"retrieves": None}
    return {"seeds": sorted(int(seed) for seed in per_seed), "random_copy_gain": seed_averaged(per_seed),
            "ar_hit_advantage": ar_averaged(per_seed, "hit_advantages"),
            "ar_repeat_gain": ar_averaged(per_seed, "repeat_gains"), **verdict,
            "per_seed": {seed: {"copy": report["copy"], "ar_slice": report["ar_slice"]}
                         for seed, report in per_seed.items()}}


def overview(rows: list[dict[str, Any]], sequences: int, seeds: list[int]) -> dict[str, Any]:
    """The comparison's ``recall`` block: the setting, what the intervals are over, which models retrieve, and the
    sentence that says so (:func:`statement`)."""
    measured = [row for row in rows if row.get("recall")]
    verdicts = {row["model"]: row["recall"].get("retrieves") for row in measured}
    unmeasured = [f"{row['model']} seed {seed}" for row in rows for seed in seeds
                  if seed not in (row.get("recall") or {}).get("seeds", [])]
    over = ("the held-out sequences (one seed)" if len(seeds) == 1 else
            f"the held-out sequences, each averaged over seeds {', '.join(map(str, seeds))} first (the same "
            "sequences for every seed): how the figure would move on other held-out text, not over training seeds")
    return {"sequences": sequences, "interval": f"95% t over {over}", "threshold": RETRIEVAL_SHARE,
            "retrieves": [name for name, verdict in verdicts.items() if verdict == "yes"],
            "unclear": [name for name, verdict in verdicts.items() if verdict == "unclear"],
            "none_retrieves": bool(verdicts) and all(verdict == "no" for verdict in verdicts.values()),
            "unmeasured": unmeasured, "statement": statement(measured)}


def statement(measured: list[dict[str, Any]]) -> str:
    """In words: whether any model retrieves, and whether the random copy gains' intervals can order the models."""
    if not measured:
        return ""
    verdicts = {row["model"]: row["recall"].get("retrieves") for row in measured}
    shares = [row["recall"]["second_copy_share"] for row in measured if row["recall"].get("second_copy_share")]
    figures = [row["recall"]["random_copy_gain"] for row in measured if row["recall"].get("random_copy_gain")]
    distance = figures[0]["distance"] if figures else None
    if all(verdict == "no" for verdict in verdicts.values()):
        cost = (f"; at {distance} tokens it still costs {min(shares):.0%} to {max(shares):.0%} of it"
                if shares and distance else "")
        parts = [f"**No model retrieves.** At every distance and seed measured, every model's interval of the random "
                 f"copy gain leaves the second copy of a random span costing more than {RETRIEVAL_SHARE:.0%} of the "
                 f"first's loss{cost}, where a model that copies from its context pays near 0. The recall columns "
                 "show short-range context statistics, not retrieval: do not rank the models by them."]
    else:
        named = [f"{label}: {', '.join(name for name, verdict in verdicts.items() if verdict == key)}"
                 for key, label in (("yes", "retrieves (the second copy of a random span costs at most "
                                            f"{RETRIEVAL_SHARE:.0%} of the first's, interval and all)"),
                                    ("no", "does not retrieve"), ("unclear", "unclear (the interval reaches both)"),
                                    (None, "not judged (no interval: fewer than 2 sequences measured)"))
                 if key in verdicts.values()]
        parts = ["**Recall:** " + "; ".join(named) + "."]
    cis = [figure["ci"] for figure in figures if figure.get("ci")]
    if len(measured) > 1 and len(cis) == len(measured) and max(ci[0] for ci in cis) <= min(ci[1] for ci in cis):
        parts.append(f"Every model's random copy gain interval holds {max(ci[0] for ci in cis):+.3f} to "
                     f"{min(ci[1] for ci in cis):+.3f}: the measurement cannot order the models by it.")
    return " ".join(parts)


def _figure(figure: dict[str, Any] | None) -> tuple[str, str]:
    if not figure or figure.get("value") is None:
        return "n/a", "n/a"
    return f"{figure['value']:+.3f}", format_interval(figure.get("ci"), 3)


def format_recall(comparison: dict[str, Any]) -> str:
    """Markdown table of the trained models' recall, per model, with the sentence on retrieval; "" when recall was
    not measured."""
    block = comparison.get("recall")
    if not block:
        return ""
    rows = comparison["models"]
    distances = {row["recall"]["random_copy_gain"]["distance"] for row in rows
                 if (row.get("recall") or {}).get("random_copy_gain")}
    at = f"at {distances.pop()} tokens" if len(distances) == 1 else "at the longest distance"
    header = ("model", "seeds", f"random copy gain {at}", "95% CI", "2nd copy / 1st", "AR: rest − hits", "95% CI",
              "AR: 1st − repeat", "95% CI", "retrieves")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        recall = row.get("recall")
        if not recall:
            lines.append(f"| {row['model']} | — | not measured |" + " |" * (len(header) - 3))
            continue
        share = recall.get("second_copy_share")
        cells = [row["model"], ", ".join(map(str, recall["seeds"])), *_figure(recall["random_copy_gain"]),
                 "n/a" if share is None else f"{share:.0%}", *_figure(recall["ar_hit_advantage"]),
                 *_figure(recall["ar_repeat_gain"]), recall.get("retrieves") or "n/a"]
        lines.append("| " + " | ".join(cells) + " |")
    footer = ["", f"Trained recall (`composer eval --tasks recall` on each run's model; {block['sequences']} held-out "
              "sequences per kind of span and AR windows, the same for every model and seed), in nats per token: a "
              "copy gain is a span's first copy's loss minus its second's; random spans are predicted by a copy "
              "alone. 2nd copy / 1st: the second copy's loss as a share of the first's (a copying model: near 0%). "
              "AR: the loss on the rest of a window minus on its tokens completing an n-gram seen earlier in it, and "
              "a hit's first occurrence minus the hit. Intervals: " + block["interval"] + ". retrieves: yes when some "
              f"interval saves at least {block['threshold']:.0%} of the first copy's loss, no when none reaches it."]
    if block.get("statement"):
        footer.append(block["statement"])
    if block.get("unmeasured"):
        footer.append(f"**Note:** recall not measured for {', '.join(block['unmeasured'])} (diverged, no model, or "
                      "not yet measured: re-run the train stage).")
    return "\n".join(lines + footer)


def csv_fields(row: dict[str, Any]) -> dict[str, Any]:
    """A comparison row's recall as flat CSV columns (``CSV_COLUMNS``)."""
    recall = row.get("recall") or {}
    fields: dict[str, Any] = {"recall_retrieves": recall.get("retrieves"),
                              "recall_second_copy_share": recall.get("second_copy_share"),
                              "recall_distance": (recall.get("random_copy_gain") or {}).get("distance")}
    for key, column in (("random_copy_gain", "recall_random_gain"), ("ar_hit_advantage", "recall_ar_hit_advantage"),
                        ("ar_repeat_gain", "recall_ar_repeat_gain")):
        figure = recall.get(key) or {}
        low, high = figure.get("ci") or (None, None)
        fields.update({column: figure.get("value"), f"{column}_ci_low": low, f"{column}_ci_high": high})
    return fields


__all__ = ["CSV_COLUMNS", "DEFAULT_SEQUENCES", "RECORD", "SETTING", "RecallMeasurer", "check_sequences",
           "csv_fields", "format_recall", "overview", "read_record", "records", "statement", "summarize"]
