"""The summary a search prints at its end (``composer search``) and again from its files (``composer report``).

Apart from ``search.run``, which runs the search and imports the engine, the evaluators and the plots: a report
re-prints a finished search's summary in the time the interpreter takes to start (issue 49).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from composer.accounting import format_bytes
from composer.pattern import compact_pattern
from composer.statistics import format_interval
from search.cost import COST_LENGTHS
from search.trained_recall import describe as describe_recall


def format_table(rows: list[dict[str, Any]], limit: int = 10) -> str:
    """The ranking: each row's searched pattern, score and rate, then the model that score was trained on (on a rung
    at the target, the pattern grown to the target's size: ``search.leaderboard.scored_model``), its preset, its
    non-embedding parameters beside all of them (a model grown by width carries a wider embedding and head at the
    same non-embedding size) and its share of attention layers; a line for each pattern whose growth dropped layers
    (``search.growth.grown_line``), then what the columns are."""
    from composer.accounting import format_count
    from search.leaderboard import scored_model

    header = (f"{'rank':>4}  {'pattern':<20} {'score':>8}  {'lr':>7}  {'trained as':<22} {'at':<12} "
              f"{'non-emb':>9}  {'params':>7}  {'attn':>5}  trial  known")
    lines, grown, unsaid = [header], [], False
    for row in rows[:limit]:
        pattern = row["pattern"] if len(row["pattern"]) <= 20 else row["compact"][:20]
        lr = f"{row['lr']:.0e}" if isinstance(row.get("lr"), (int, float)) else "-"
        model = row.get("scored_model") or scored_model(row)
        trained = model["pattern"] if len(model["pattern"]) <= 22 else compact_pattern(model["pattern"])[:22]
        lines.append(
            f"{row['rank']:>4}  {pattern:<20} {row['score']:>8.4f}  {lr:>7}  {trained:<22} "
            f"{model['widths'] or '-':<12} {model['non_embedding_params'] or 0:>9,}  "
            f"{format_count(model['params']) if model.get('params') else '-':>7}  "
            f"{model['attention_share']:>5.2f}  {row['trial']:>5}  {row.get('known') or 'new'}"
        )
        grown += [f"   {model['grown']}"] if model.get("grown") else []
        unsaid = unsaid or not model["widths"]
    lines += grown
    lines.append("trained as, at: the model each score was trained on and its preset (at the target: the pattern "
                 "grown to its size" + ("; -: the evaluator does not say, the pattern at the search's preset"
                                        if unsaid else "")
                 + "); non-emb: its non-embedding parameters, the size growth matches; params: all of them, the "
                 "embedding and head included; attn: its share of attention layers")
    return "\n".join(lines)


def cost_columns(row: dict[str, Any]) -> str:
    """A row's pattern, its model at the target and that model's analytic cost: parameters, cache per sequence at
    4K and 32K tokens, fixed state (search.cost)."""
    from search.growth import Grown

    cost = row["cost"]
    trained = Grown.layout_in(row) or row["pattern"]
    shown = trained if len(trained) <= 22 else compact_pattern(trained)[:22]
    return (f"{row['pattern']:<20} {shown:<22} {cost['params'] / 1e6:>7.2f}M  "
            + "  ".join(f"{format_bytes(cost['cache_bytes'][str(n)]):>10}" for n in COST_LENGTHS)
            + f"  {format_bytes(cost['state_bytes']):>10}")


COST_HEADER = (f"{'pattern':<20} {'at target':<22} {'params':>8}  "
               + "  ".join(f"{f'cache@{n // 1024}K':>10}" for n in COST_LENGTHS) + f"  {'state':>10}")


def cost_table(rows: list[dict[str, Any]]) -> str:
    """The finalists' analytic serving cost in a search written before the measured cost, so that ``composer
    report`` still reads it. Its ``cost["decode"]`` (decode tokens/s at batch 1 after 1,024 tokens) is one timed
    run, without a spread (the same model read 128 and 12 tokens/s on two runs, issue 61): said, not printed."""
    lines = ["serving cost of the finalists, on their models at the target (bf16 cache, batch 1):", COST_HEADER]
    lines += [cost_columns(row) for row in rows if row.get("cost")]
    lines.append("decode tok/s not printed: this search timed each model's decode once, and one timing has no spread "
                 "(leaderboard.json keeps it under cost.decode); composer bench-inference measures it with repeats")
    return "\n".join(lines)


def _number(value: float) -> str:
    """Three significant figures, thousands grouped: 31,517, 95.7, 0.688."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _with_ratio(value: dict[str, Any] | None, ratio: float | None) -> str:
    """A measured figure's median, ``~`` where its repeats spread over the noise threshold, and its ratio to the
    best known layout's."""
    if not value:
        return "-"
    noisy = "~" if value.get("noisy") else ""
    return f"{_number(value['median'])}{noisy}" + (f" {ratio:.2f}x" if ratio is not None else "")


def noisy_figures(record: dict[str, Any]) -> str:
    """The noisy figures of a measured record, short: ``train 22%, b1@512 41%``."""
    named = [("train", record["train_tokens_per_s"]), ("prefill", record["prefill_tokens_per_s"])]
    named += [(f"b{batch}@{context}", value) for batch, by_context in record["decode_ms_per_token"].items()
              for context, value in by_context.items()]
    return ", ".join(f"{what} {value['spread']:.0%}" for what, value in named if value.get("noisy"))


def measured_cost_table(rows: list[dict[str, Any]]) -> str:
    """Every measured row's analytic cost and what it measured at the target (search.cost.measured): training
    tokens/s and ms per decode step at batch 1 and at the large batch after the longest context, each with its
    ratio to the best known layout; the device, threads and decode path in the heading, the noisy figures
    after."""
    from search.cost.measured import threads_text

    measured = [row for row in rows if "measured" in (row.get("cost") or {})]
    first = next((row["cost"]["measured"] for row in measured if "error" not in row["cost"]["measured"]), None)
    said = next((row["cost"]["vs_best_known"] for row in measured if "vs_best_known" in row["cost"]), None)
    against = f"x: over the best known layout, {said['name']} {said['pattern']}" if said else "no known layout measured"
    lines = [f"serving cost at the target (cache: analytic, bf16, one sequence; the rest measured; {against}):"]
    if first is None:
        lines.append("measured nothing: " + "; ".join(f"{row['pattern']}: {row['cost']['measured']['error']}"
                                                      for row in measured))
        return "\n".join(lines)
    decode = first["decode_ms_per_token"]
    large = max(decode, key=int)
    context = max(decode["1"], key=int)
    train = first["train_tokens_per_s"]
    repeats = decode["1"][context].get("repeats")
    lines.append(f"measured on {first['device']} ({first['device_name']}), {threads_text(first['threads'])}: training "
                 f"{first['train_dtype']} at {train['batch']} x {train['seq_len']} tokens, decode path "
                 f"{first['decode_path']}, ms per decode step after {int(context):,} tokens; each the median of its "
                 f"repeats (training {train.get('repeats')}, decode {repeats}), their spread below"
                 + (f"; warm-up: {first['warmup']}" if first.get("warmup") else ""))
    lines.append(f"{COST_HEADER}  {'train tok/s':>14}  {'decode ms b1':>13}  {f'decode ms b{large}':>14}")
    noisy = []
    for row in measured:
        record = row["cost"]["measured"]
        if "error" in record:
            lines.append(cost_columns(row) + f"  not measured: {record['error']}")
            continue
        ratios = row["cost"].get("vs_best_known") or {}
        steps = record["decode_ms_per_token"]
        by_ratio = ratios.get("decode_ms_per_token") or {}
        cells = [_with_ratio(record["train_tokens_per_s"], ratios.get("train_tokens_per_s")),
                 _with_ratio(steps.get("1", {}).get(context), by_ratio.get("1", {}).get(context)),
                 _with_ratio(steps.get(large, {}).get(context), by_ratio.get(large, {}).get(context))]
        lines.append(cost_columns(row) + f"  {cells[0]:>14}  {cells[1]:>13}  {cells[2]:>14}")
        spread = noisy_figures(record)
        noisy += [f"{row['pattern']} {spread}"] if spread else []
    lines.append(f"noisy (~: the repeats spread over {first['noisy_spread']:.0%} of their median; decode as "
                 f"bBATCH@CONTEXT): " + ("; ".join(noisy) or "none"))
    return "\n".join(lines)


# where --min-recall reads the probe, the answer says what the probe is not (issue 48)
PROBE_LIMITS = "   read from the recall probe: the pattern's mixers alone, trained on MQAR, not the model ranked here"


def probe_limits(constraint: dict[str, Any]) -> str:
    """What the probe the constraint read is not, and why it was read (``SearchConfig.why_probe``; a result
    written before the reason was recorded gets the bare statement)."""
    reason = constraint.get("why_probe")
    return f"{PROBE_LIMITS}; {reason}" if reason else PROBE_LIMITS


def tradeoff_lines(result: dict[str, Any]) -> list[str]:
    """The finalists' recall, the --min-recall constraint and the front, for the summary (search.tradeoffs)."""
    probe = result.get("recall_probe") or {}
    lines = [f"recall probe not run: {probe['not_run']}"] if "not_run" in probe else []
    probed = [row for row in result["leaderboard"] if row.get("recall") is not None
              and row.get("recall_source") != "trained"]  # the trained models' recall has a line of its own
    if probed:
        length = probed[0].get("recall_length")
        lines.append(f"recall at {length} tokens ({probe.get('budget', 'recall')} probe, mixers alone): " + ", ".join(
            f"{row['pattern']}{' (' + row['known'] + ')' if row.get('known') else ''} {row['recall']:.3f}"
            for row in probed))
    for failed in probe.get("failures") or []:
        lines.append(f"recall probe of {failed['pattern']} failed: {failed['reason']}")
    constraint = result.get("min_recall")
    if constraint:
        eligible = ", ".join(constraint["eligible"]) or "none"
        lines.append(f"{constraint['why']}: eligible {eligible}")
        changed = constraint.get("changed_by_confirmation")
        if changed:  # the confirmation's joined recall would move these; the pair it confirmed stays compared
            lines.append("over the confirmation's joined seeds, " + ", ".join(
                f"{c['pattern']} would {'meet' if c['meets_on_joined_seeds'] else 'miss'} the bar"
                for c in changed["patterns"]) + f" ({changed['note']})")
        if constraint.get("source") == "probe":
            lines.append(probe_limits(constraint))
    said = result.get("front")
    if said:
        noise = said.get("loss_noise")
        weighed = (f"loss weighed over common seeds, else against a seed sd of {noise['sd']:.4f} where it was "
                   "measured" if noise else "loss weighed over common seeds only")
        lines.append(f"front on {', '.join(said['objectives'])} ({weighed}): {', '.join(said['patterns'])}")
        lines += [f"   {k['name']} {k['pattern']}: {k['relation']}" + (
            " (the answer's " + ", ".join(f"{name} {side}" for name, side in k["answer_is"].items()) + ")"
            if k.get("answer_is") else "") for k in said["known"]]
    return lines


def verdict_lines(said: Mapping[str, Any]) -> list[str]:
    """The answer's comparison (best.json's ``vs_known``, read as its record): each side's mean over the seeds the
    difference used, the difference and how its interval was obtained, the same over the seeds that chose nothing
    (the winner's curse left out), and the answer."""
    from search.comparison_record import Comparison
    from search.verdict import said as interval_text

    record = said if isinstance(said, Comparison) else Comparison.from_dict(said)
    known, new = record.best_known, record.best_new

    def side(row) -> str:
        seeds = row.seeds or []
        text = f"{row.mean if row.mean is not None else row.score:.4f} over seed(s) {', '.join(map(str, seeds))}"
        if row.all_seeds:  # seeds of this side only, left out of the pairing
            text += f" ({row.mean_all:.4f} over all its seeds {', '.join(map(str, row.all_seeds))})"
        return text

    lines = [f"best new {new.pattern} {side(new)} vs best known {known.name} {known.pattern} {side(known)}: "
             f"{interval_text(record)}; interval: {record.interval}"]
    held = record.held_out
    if held and held["seeds"]:
        agrees = "" if held["answer"] == record.answer else f" (over all seeds: {record.answer})"
        lines.append(f"over the seed(s) that chose nothing ({', '.join(map(str, held['seeds']))}): "
                     f"{interval_text(held)}, {held['answer']}{agrees}; {held['method']}")
    elif held:
        lines.append(f"over the seeds that chose nothing: none ({held['method']}), so the answer rests on the seed(s) "
                     f"{', '.join(map(str, record.selected_on or []))} the finalists were chosen on")
    lines.append(f"answer: {record.verdict}")
    return lines


def trained_recall_line(rows: list[dict[str, Any]]) -> str | None:
    """The finalists' trained recall (search.trained_recall) in one line, or None where none was measured."""
    measured = [row for row in rows if (row.get("trained_recall") or {}).get("value") is not None]
    if not measured:
        return None
    first = measured[0]["trained_recall"]
    return (f"trained recall (random copy gain at {first['distance']} tokens of {first['seq_len']}, nats per token, "
            f"95% over {first['sequences']} held-out sequences, each averaged over the seeds): " + ", ".join(
                f"{row['pattern']}{' (' + row['known'] + ')' if row.get('known') else ''} "
                f"{row['trained_recall']['value']:+.3f} {format_interval(row['trained_recall']['ci'], 3)}"
                for row in measured))


def summary_text(result: dict[str, Any]) -> str:
    best = result["best"]
    lines = [format_table(result["leaderboard"]), ""]
    costs = [row.get("cost") or {} for row in result["leaderboard"]]
    if any("measured" in cost for cost in costs):
        lines += [measured_cost_table(result["leaderboard"]), ""]
    elif any(cost.get("decode") for cost in costs):  # a search written before the measured cost
        lines += [cost_table(result["leaderboard"]), ""]
    recall_line = trained_recall_line(result["leaderboard"])
    if recall_line:
        lines.append(recall_line)
    if result.get("rungs"):
        lines.append("rungs: " + "; ".join(f"{r['rung']}: {r['candidates']} at {r['budget']} "
                                          f"({r['seconds'] / 60:.1f} min)" for r in result["rungs"]))
    if result.get("equal_cost"):
        from scaling.equal_cost import describe_line

        lines.append(describe_line(result["equal_cost"]))
    said = result.get("vs_known") or {}
    early = said.get("stopped_early")
    if early:
        missing = ", ".join(m["pattern"] + (f" ({m['known']})" if m.get("known") else "") for m in early["missing"])
        lines.append(f"stopped early: {early['why']}; the answer is rung {early['rung']}'s ranking"
                     + (f"; not scored at the rung above: {missing}" if missing else ""))
    if said.get("floor_missing"):
        lines.append(f"no floor: {said['floor_missing']}; the answer is not compared with a published layout")
    if result.get("recall_probe") or result.get("front") or result.get("min_recall"):
        lines += tradeoff_lines(result)
    if said.get("note") and said.get("answer") is None:
        lines.append(f"no answer: {said['note']}")
    confirmed = result.get("confirmation")
    if confirmed:
        further = ", ".join(map(str, confirmed.get("further_seeds") or []))
        lines.append(f"confirmation ({confirmed['seeds']} seeds each, seed(s) {further} added): "
                     + (", ".join(confirmed["patterns"]) or "nothing confirmed")
                     + "".join(f"; {f['pattern']} failed: {f['reason']}" for f in confirmed.get("failures") or [])
                     + "".join(f"; {r['pattern']} not counted: {r['reason']}" for r in confirmed.get("refused") or []))
    if said.get("best_known") and said.get("best_new"):
        lines += verdict_lines(said)
    if said.get("at_equal_cost"):  # dominates the best known layout, or wins on loss only (search.cost.front)
        lines.append(f"at equal cost (measured on {said['at_equal_cost']['measured_on']}): "
                     f"{said['at_equal_cost']['line']}")
    limits = result.get("cost_limits")
    if limits and limits.get("eligible") is not None:
        lines.append(f"cost limits {limits['why']}: eligible {', '.join(limits['eligible']) or 'none'}")
    elif limits and limits.get("why"):  # not checked: no best known layout, or it has no figures
        lines.append(f"cost limits: {limits['why']}")
    scored = f"a known layout ({best['known']})" if best.get("known") else "a new pattern"
    recommended = said.get("recommended", best["pattern"]) or "none (no answer, above)"
    if best.get("trained_recall"):
        scored += f"; {describe_recall(best['trained_recall'])}"
    lines.append(f"best score {best['pattern']} ({best['score']:.4f}, {scored}); recommended "
                 f"{recommended}; leaderboard, best.json and plots in {result['out']}")
    return "\n".join(lines)
