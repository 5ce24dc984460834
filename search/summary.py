"""The summary a search prints at its end (``composer search``) and again from its files (``composer report``).

Apart from ``search.run``, which runs the search and imports the engine, the evaluators and the plots: a report
re-prints a finished search's summary in the time the interpreter takes to start (issue 49).
"""

from __future__ import annotations

from typing import Any

from composer.accounting import format_bytes
from composer.evidence import format_interval
from composer.pattern import compact_pattern
from search.cost import COST_LENGTHS
from search.trained_recall import describe as describe_recall


def format_table(rows: list[dict[str, Any]], limit: int = 10) -> str:
    header = f"{'rank':>4}  {'pattern':<20} {'score':>8}  {'lr':>7}  {'params':>9}  {'attn':>5}  trial  known"
    lines = [header]
    for row in rows[:limit]:
        pattern = row["pattern"] if len(row["pattern"]) <= 20 else row["compact"][:20]
        lr = f"{row['lr']:.0e}" if isinstance(row.get("lr"), (int, float)) else "-"
        lines.append(
            f"{row['rank']:>4}  {pattern:<20} {row['score']:>8.4f}  {lr:>7}  {row['params'] or 0:>9,}  "
            f"{row['attention_share']:>5.2f}  {row['trial']:>5}  {row.get('known') or 'new'}"
        )
    return "\n".join(lines)


def cost_table(rows: list[dict[str, Any]]) -> str:
    """The finalists' serving cost on their models at the target: layers, parameters, cache per sequence at
    4K and 32K tokens, fixed state, decode tokens/s (search.cost)."""
    header = (f"{'pattern':<20} {'at target':<22} {'params':>8}  " + "  ".join(f"{f'cache@{n // 1024}K':>10}"
              for n in COST_LENGTHS) + f"  {'state':>10}  {'decode tok/s':>12}")
    lines = ["serving cost of the finalists, on their models at the target (bf16 cache, batch 1):", header]
    for row in rows:
        cost = row.get("cost") or {}
        if not cost:
            continue
        trained = row.get("target_pattern") or row["pattern"]
        shown = trained if len(trained) <= 22 else compact_pattern(trained)[:22]
        decode = (cost.get("decode") or {}).get("decode_tokens_per_s")
        lines.append(f"{row['pattern']:<20} {shown:<22} {cost['params'] / 1e6:>7.2f}M  "
                     + "  ".join(f"{format_bytes(cost['cache_bytes'][str(n)]):>10}" for n in COST_LENGTHS)
                     + f"  {format_bytes(cost['state_bytes']):>10}  "
                     + (f"{decode:>12,.0f}" if decode else f"{'-':>12}"))
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


def verdict_lines(said: dict[str, Any]) -> list[str]:
    """The answer's comparison: each side's mean over its seeds, the difference and how its interval was obtained,
    the same over the seeds that chose nothing (the winner's curse left out), and the answer."""
    from search.verdict import said as interval_text

    known, new = said["best_known"], said["best_new"]

    def side(row: dict[str, Any]) -> str:
        seeds = row.get("seeds") or []
        return f"{row.get('mean', row['score']):.4f} over seed(s) {', '.join(map(str, seeds))}"

    lines = [f"best new {new['pattern']} {side(new)} vs best known {known['name']} {known['pattern']} {side(known)}: "
             f"{interval_text(said)}; interval: {said['interval']}"]
    held = said.get("held_out")
    if held and held["seeds"]:
        agrees = "" if held["answer"] == said["answer"] else f" (over all seeds: {said['answer']})"
        lines.append(f"over the seed(s) that chose nothing ({', '.join(map(str, held['seeds']))}): "
                     f"{interval_text(held)}, {held['answer']}{agrees}; {held['method']}")
    elif held:
        lines.append(f"over the seeds that chose nothing: none ({held['method']}), so the answer rests on the seed(s) "
                     f"{', '.join(map(str, said.get('selected_on') or []))} the finalists were chosen on")
    lines.append(f"answer: {said['verdict']}")
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
    if any((row.get("cost") or {}).get("decode") for row in result["leaderboard"]):
        lines += [cost_table(result["leaderboard"]), ""]
    recall_line = trained_recall_line(result["leaderboard"])
    if recall_line:
        lines.append(recall_line)
    if result.get("rungs"):
        lines.append("rungs: " + "; ".join(f"{r['rung']}: {r['candidates']} at {r['budget']} "
                                          f"({r['seconds'] / 60:.1f} min)" for r in result["rungs"]))
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
    scored = f"a known layout ({best['known']})" if best.get("known") else "a new pattern"
    recommended = said.get("recommended", best["pattern"]) or "none (no answer, above)"
    if best.get("trained_recall"):
        scored += f"; {describe_recall(best['trained_recall'])}"
    lines.append(f"best score {best['pattern']} ({best['score']:.4f}, {scored}); recommended "
                 f"{recommended}; leaderboard, best.json and plots in {result['out']}")
    return "\n".join(lines)
