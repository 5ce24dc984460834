"""The cost reports: layout-cost-cpu-2026-11-29.md, equal-cost-2026-11-29.md,
cost-model-out-of-sample-2026-12-07.md, equal-cost-families-2026-12-07.md and equal-cost-search-2026-12-07.md, against
their results JSON.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from composer.statistics import paired_difference
from tests.docs_figures.reading import (
    NUM,
    agree,
    agree_all,
    doc,
    find,
    numbers,
    plain,
    reproduced,
    results,
    table,
)


def test_layout_cost_on_the_cpu():
    """Issue 58's report: the per-primitive rates (before and after), the decode steps, the answer's batch-1 decode,
    the layouts' measured cost with the model's prediction beside it, and the cost model's errors."""
    from composer.presets import get_preset
    from primitives.registry import REGISTRY

    text = doc("reports/layout-cost-cpu-2026-11-29.md")
    data = results("cpu_cost-2026-11-29.json")
    # the primitive table: means of two rounds, per FLOP against M with composer info's counts at seq 128
    widths = get_preset("demo-4m").arch.with_pattern("AMSDW").replace(options={"W": {"window": 64}})  # the bench's
    configs = widths.primitive_configs()
    train_flops = {s: REGISTRY.get(s).flops_per_token(configs[s], 128) for s in "AMSDW"}
    decode_flops = {s: REGISTRY.get(s).decode_flops_per_token(configs[s], 1_024) for s in "AMSDW"}
    runs = data["primitive_throughput"]["runs"]
    for symbol in "AMSDW":
        cells = []
        for phase in ("before", "after"):
            rows = [{r["primitive"]: r for r in run["primitives"]} for run in runs[phase]]
            ms = np.mean([r[symbol]["median_ms"] for r in rows])
            rate = np.mean([(train_flops[symbol] / r[symbol]["median_ms"]) / (train_flops["M"] / r["M"]["median_ms"])
                            for r in rows])
            cells.append(f"{ms:.1f} \\| {rate:.2f}")
        find(text, rf"\| `{symbol}` \| {train_flops[symbol] / 1e6:.2f}M \| {cells[0]} \| {cells[1]} \|")
        steps = [np.mean([next(r["step_ms"] for r in run["decode"] if r["primitive"] == symbol and r["batch"] == batch)
                          for run in runs[phase]]) for batch in (1, 64) for phase in ("before", "after")]
        find(text, rf"\| `{symbol}` \| {decode_flops[symbol] / 1e3:.0f}K \| " + r" \| ".join(f"{s:.3f}" for s in steps))
    # the answer's decode at batch 1, before / eager / compiled
    decode = data["decode_batch1"]["runs"]
    means = {(pattern, tree): np.mean([decode[f"b1_{tree}_{pattern}_{i}"]["ms_per_token"] for i in (1, 2)])
             for pattern in ("SDDDDS", "SMSMSM") for tree in ("base", "main", "mainc")}
    assert all(decode[f"b1_mainc_{p}_{i}"]["decode_path"] == "compiled (inductor, cpu)"
               for p in ("SDDDDS", "SMSMSM") for i in (1, 2))
    for label, tree in (("before \\(18903ae, eager\\)", "base"), ("after, eager", "main"),
                        ("after, compiled \\(`--compile`\\)", "mainc")):
        answer, nemotron = means["SDDDDS", tree], means["SMSMSM", tree]
        find(text, rf"\| {label} \| {answer:.2f} \| {1e3 / answer:.1f} \| {nemotron:.2f} \| {1e3 / nemotron:.1f} \| "
                   rf"{nemotron / answer:.2f}x \|")
    speedup = means["SDDDDS", "base"] / means["SDDDDS", "mainc"]
    find(text, rf"met by the compiled step: {speedup:.1f}x")
    find(text, rf"The eager path alone gives {means['SDDDDS', 'base'] / means['SDDDDS', 'main']:.2f}x")
    # the layouts at demo-4m: measured medians, ratios to the answer, the CPU model's prediction
    costs = data["finalist_costs"]["result"]
    first = costs["rows"][0]["measured"]
    for row in costs["rows"]:
        measured, predicted = row["measured"], row["predicted_here"]
        train = measured["train_tokens_per_s"]["median"]
        b1, b64 = (measured["decode_ms_per_token"][b]["1024"]["median"] for b in ("1", "64"))
        find(text, rf"`{row['at_target']}` \| {row['n_layers']} \| [^|]+ \| {train:,.0f} "
                   rf"\({train / first['train_tokens_per_s']['median']:.2f}x\) "
                   rf"\[{predicted['train_tokens_per_s']:,.0f}\] "
                   rf"\| {b1:.2f} \({b1 / first['decode_ms_per_token']['1']['1024']['median']:.2f}x\) "
                   rf"\[{predicted['decode_ms_per_token']['1']['1024']:.2f}\] \| {b64:.2f}")
    # the H200 predictions at 350M and 1B
    for key in ("h200@llama-350m", "h200@llama-3.2-1b"):
        answer = costs["predicted"][key][0]
        assert answer["pattern"] == "SADDDD" and answer["at_target"].count("A") == 1
        find(text, rf"{answer['train_tokens_per_s']:,.0f} \(1.00x\) \| "
                   rf"{answer['decode_ms_per_token']['1']:.2f} \(1.00x\)")
    # the cost model's CPU validation and the GPU leave-one-out
    validation = results("cost_model_validation-2026-11-29.json")
    for row in validation["rows"]:
        error = row["train_tokens_per_s_predicted"] / row["train_tokens_per_s"] - 1
        find(text, rf"{row['train_tokens_per_s']:,.0f} \| {row['train_tokens_per_s_predicted']:,.0f} \| "
                   + re.escape(f"{error * 100:+.0f}%"))
    errors = validation["errors"]
    find(text, rf"Training: median error {errors['train_tokens_per_s']['median_abs'] * 100:.1f}%, worst "
               rf"{errors['train_tokens_per_s']['worst_abs'] * 100:.1f}%")
    find(text, rf"Decode at batch 1: median error {errors['decode_ms_per_token']['median_abs'] * 100:.1f}%, worst "
               rf"{errors['decode_ms_per_token']['worst_abs'] * 100:.1f}%")
    first_fit = data["cost_model_first_fit"]
    find(text, rf"in-sample {first_fit['fit_error']['train']['median_abs'] * 100:.1f}%, validation "
               rf"{first_fit['validation_errors']['train_tokens_per_s']['median_abs'] * 100:.1f}%")
    fit = results("cost_model_fit-2026-11-29.json")
    find(text, rf"in-sample error to {fit['fit_error']['train']['median_abs'] * 100:.1f}%")
    loo = results("cost_model_gpu_loo-2026-11-29.json")["groupings"]
    assert loo["grouped"]["errors"]["n"] == 20 and loo["grouped"]["constants_fitted"] == 4
    find(text, rf"Median error {loo['grouped']['errors']['median_abs'] * 100:.1f}%, worst "
               rf"{loo['grouped']['errors']['worst_abs'] * 100:.1f}%")
    one = loo["one"]["errors"]
    find(text, rf"{one['median_abs'] * 100:.1f}% median, {one['worst_abs'] * 100:.1f}% worst")
    seconds = data["search_measurement_seconds"]["min_repeat_seconds_0.01"]
    assert math.isclose(sum(v for k, v in seconds.items() if k != "total"), seconds["total"], abs_tol=0.15)
    find(text, rf"took {seconds['total']:.1f} s in all \(2.2-4.1 s each\)")
    # the default search re-timed: its wall time, its rungs and its answer, the same as the stored 2026-11-28 run
    retimed = data["default_search_retimed"]
    minutes, rest = divmod(round(retimed["wall_seconds"]), 60)
    find(text, rf"It took {minutes} min {rest} s\*\* \(rungs 4.6 \+ 11.8 \+ 6.2 min\)")
    assert retimed["rungs_line"].endswith("1: 9 at rung-cpu-1 (11.8 min); 2: 4 at rung-cpu-2 (6.2 min)")
    before = results("default_search_timed-2026-11-28.json")["best"]["vs_known"]
    assert (retimed["answer"], retimed["best_new"], retimed["difference"], retimed["ci"]) == (
        before["answer"], before["best_new"]["pattern"], before["difference"], before["ci"])
    find(text, rf"took {sum(retimed['measurement_seconds']):.1f} s \(2.8-3.3 s each\)")
    find(text, rf"`AMAMMM` against Llama's `AMAMAM` \+{retimed['difference']:.4f} \[{retimed['ci'][0]:.4f}, "
               rf"\+{retimed['ci'][1]:.4f}\]")


def test_the_answer_at_equal_cost():
    """The depth control's report: every arm's losses and size, the paired differences recomputed from them, the
    rate past the grid's edge, each arm's cost (medians over the measured rounds, the H200 model at 1B), the ratios
    the prose quotes, and the equal-cost space's counts."""
    import statistics


    text = doc("reports/equal-cost-2026-11-29.md")
    data = results("depth_control-2026-11-29.json")
    arms = data["arms"]
    searched = {row["pattern"]: row for row in results("amsd_constrained_search-2026-11-28.json")["leaderboard"]}
    assert arms["answer@34"]["losses"] == searched["SADDDD"]["evidence"]["scores"]  # the search's own runs
    assert arms["nemotron-h@16-d192"]["losses"] == searched["SMSAMS"]["evidence"]["scores"]
    for cells in table(text, "| arm | layout at `demo-4m`"):
        arm = arms[plain(cells[0])]
        assert (int(cells[2]), int(cells[3])) == (arm["layers"], arm["d_model"])
        agree(cells[4].rstrip("M"), arm["non_embedding_params"] / 1e6, f"{cells[0]} size")
        assert float(cells[5]) == arm["lr"]
        losses = [arm["losses"][seed] for seed in ("0", "1", "2")]
        agree_all(numbers(cells[6]), losses, f"{cells[0]} losses")
        agree(cells[7], statistics.mean(losses), f"{cells[0]} mean")
    find(text, rf"It scored {arms['answer@34-rerun']['losses']['0']:.4f} against the search's "
               rf"{arms['answer@34']['losses']['0']:.4f}")
    for name, edge in ((name, arms[name]["edge"]) for name in ("answer@16", "answer-mlp@16", "nemotron-h@16",
                                                               "nemotron-h@34")):
        find(text, rf"`{name}`: {edge['loss']:.4f} at {edge['lr']:.0e} against {edge['chosen_loss']:.4f} at "
                   rf"{edge['chosen_lr']:.0e}".replace("e-0", "e-"))
    # the differences: recomputed from the arms' losses, as printed
    for cells in table(text, "| what | difference | loss"):
        mine, theirs = re.findall(r"`([^`]+)`", cells[1])
        paired = paired_difference(arms[mine]["losses"], arms[theirs]["losses"])
        assert paired["seeds"] == ["0", "1", "2"]
        agree(cells[2], paired["mean"], cells[0])
        agree_all(numbers(cells[3]), list(paired["ci"]), f"{cells[0]} interval")
        assert plain(cells[4]) == paired["verdict"]
    # the cost: medians over the rounds, the model at 1B
    def measured(name: str, figure) -> float:
        return statistics.median(figure(r) for r in arms[name]["cost"]["measured_rounds"])

    train = lambda r: r["train_tokens_per_s"]["median"]  # noqa: E731
    decode = lambda r: r["decode_ms_per_token"]["1"]["1024"]["median"]  # noqa: E731
    decode64 = lambda r: r["decode_ms_per_token"]["64"]["1024"]["median"]  # noqa: E731
    for cells in table(text, "| arm | train tok/s"):
        name = plain(cells[0])
        cost, at_1b = arms[name]["cost"], arms[name]["cost"]["h200_at_1b"]
        agree(cells[1], measured(name, train), f"{name} train")
        agree(cells[2], measured(name, decode), f"{name} decode")
        agree(cells[3], measured(name, decode64), f"{name} decode b64")
        agree(numbers(cells[4])[0], cost["serving_at_target"]["cache_bytes"]["32768"] / 2**20, f"{name} cache")
        assert [int(n.replace(",", "")) for n in numbers(cells[5])] == [at_1b["layout_layers"], at_1b["d_model"]]
        agree(cells[6], at_1b["decode_ms_b1_4k"], f"{name} H200 decode")
        agree(cells[7], at_1b["train_tokens_per_s"], f"{name} H200 train")
        agree(numbers(cells[8])[0], at_1b["serving"]["cache_bytes"]["32768"] / 2**20, f"{name} H200 cache")

    def ratio(mine: str, theirs: str, figure) -> float:
        return measured(mine, figure) / measured(theirs, figure)

    def cache(name: str, at_1b: bool = False) -> int:
        cost = arms[name]["cost"]
        return (cost["h200_at_1b"]["serving"] if at_1b else cost["serving_at_target"])["cache_bytes"]["32768"]

    h200 = {name: arms[name]["cost"]["h200_at_1b"] for name in arms}
    find(text, rf"against 13.98 at 34: {ratio('answer@16', 'answer@34', decode):.2f}x")
    find(text, rf"on this CPU: {ratio('answer@16', 'nemotron-h@16', decode):.2f}x the decode latency, "
               rf"{ratio('answer@16', 'nemotron-h@16', train):.2f}x the training throughput, "
               rf"{cache('answer@16') / cache('nemotron-h@16'):.2f}x the cache")
    find(text, rf"on the H200 model at 1B: "
               rf"{h200['answer@16']['decode_ms_b1_4k'] / h200['nemotron-h@16']['decode_ms_b1_4k']:.2f}x the decode "
               rf"latency and {h200['answer@16']['train_tokens_per_s'] / h200['nemotron-h@16']['train_tokens_per_s']:.2f}x")
    find(text, rf"That is {ratio('answer-mlp@16', 'nemotron-h@16', decode):.2f}x")
    rounds = {name: sorted(decode(r) for r in arms[name]["cost"]["measured_rounds"])
              for name in ("answer-mlp@16", "nemotron-h@16")}
    find(text, rf"\({rounds['answer-mlp@16'][0]:.2f}-{rounds['answer-mlp@16'][-1]:.2f} against "
               rf"{rounds['nemotron-h@16'][0]:.2f}-{rounds['nemotron-h@16'][-1]:.2f}\)")
    find(text, rf"Training {ratio('answer-mlp@16', 'nemotron-h@16', train):.2f}x, cache "
               rf"{cache('answer-mlp@16') / cache('nemotron-h@16'):.2f}x")
    find(text, rf"decode {h200['answer-mlp@16']['decode_ms_b1_4k'] / h200['nemotron-h@16']['decode_ms_b1_4k']:.2f}x, "
               rf"training {h200['answer-mlp@16']['train_tokens_per_s'] / h200['nemotron-h@16']['train_tokens_per_s']:.2f}x, "
               rf"cache {cache('answer-mlp@16', True) / cache('nemotron-h@16', True):.2f}x")
    # the equal-cost space
    space = results("equal_cost_space-2026-11-29.json")
    for cells, key in zip(table(text, "| growth | patterns"), ("by_size", "at_nemotron_h_depth"), strict=True):
        found = space[key]
        counts = found["counts"]
        assert [int(n.replace(",", "")) for n in numbers(cells[1]) + numbers(cells[2])] == [
            found["patterns"], found["within_max_kv_and_recall"]]
        assert [int(n.replace(",", "")) for n in numbers(cells[3])] == [
            counts["cpu"]["decode"], counts["cpu"]["throughput"], counts["cpu"]["decode_and_throughput"]]
        assert int(cells[4].replace(",", "")) == counts["h200"]["decode_and_throughput"]


def test_the_equal_cost_search():
    """The equal-cost search's section: each finalist's seeds, loss, measured cost and probe recall as the search
    wrote them; the verdict its record gives; the pairings against Nemotron-H's and the control's runs recomputed
    from the per-seed losses."""
    import statistics


    text = doc("reports/equal-cost-2026-11-29.md")
    data = results("equal_cost_search-2026-11-29.json")
    rows = {row["pattern"]: row for row in data["leaderboard"]}
    arms = results("depth_control-2026-11-29.json")["arms"]
    for cells in table(text, "| finalist | model at `demo-4m`"):
        row = rows[re.findall(r"`([^`]+)`", cells[0])[0]]
        assert plain(cells[1]) == row["target_pattern"]
        agree(cells[2].rstrip("M"), row["cost"]["params"] / 1e6, f"{cells[0]} params")
        scores = list(row["evidence"]["scores"].values())
        assert int(cells[3]) == len(scores)
        agree(cells[4], statistics.mean(scores), f"{cells[0]} loss")
        measured = row["cost"]["measured"]
        agree(cells[5], measured["train_tokens_per_s"]["median"], f"{cells[0]} train")
        agree(cells[6], measured["decode_ms_per_token"]["1"]["1024"]["median"], f"{cells[0]} decode")
        agree(cells[8], row["recall"], f"{cells[0]} recall")
        assert plain(cells[9]).startswith("yes") == (row["pattern"] in data["best"]["min_recall"]["eligible"])
    said = data["best"]["vs_known"]
    assert said["answer"] == "tie" and said["recommended"] == "DMDMAM" and said["best_new"]["pattern"] == "SMMMAD"
    find(text, re.escape(f"is **{said['difference']:+.4f} [{said['ci'][0]:+.4f}, {said['ci'][1]:+.4f}]**: a tie"))
    # the same run, again: equal to the sixth digit
    assert abs(rows["SMSAMS"]["evidence"]["scores"]["0"] - arms["nemotron-h@16-d192"]["losses"]["0"]) < 1e-5
    names = {"Nemotron-H (the search's": "nemotron-h@16-d192", "Nemotron-H at the target's size": "nemotron-h@16",
             "`answer-mlp@16`": "answer-mlp@16"}
    for cells in table(text, "| what | difference | 95% CI | verdict"):
        mine = re.findall(r"`([^`]+)`", cells[0])[0].split()[-1]
        theirs = next(arm for words, arm in names.items() if words in cells[0].split(" - ", 1)[1])
        paired = paired_difference(rows[mine]["evidence"]["scores"], arms[theirs]["losses"])
        assert paired["seeds"] == ["0", "1", "2"]
        agree(cells[1], paired["mean"], cells[0])
        agree_all(numbers(cells[2]), list(paired["ci"]), f"{cells[0]} interval")
        assert plain(cells[3]) == paired["verdict"]
        recorded = data["vs_control"][f"{mine} - {theirs}"]["difference"]
        assert recorded["mean"] == pytest.approx(paired["mean"])
    # the same search under the corrected --min-recall known: its bar, the eligible finalists and its verdict as
    # its record holds them, and the verdict recomputed from the per-seed losses
    rerun = results("equal_cost_search_rerun-2026-11-29.json")
    bar = rerun["min_recall"]
    assert bar["why"].startswith("--min-recall known: nemotron-h SMSAMS (the best loss")
    find(text, re.escape(f"at least **{bar['threshold']:.4f}**"))
    eligible = [row["pattern"] for row in rerun["leaderboard"] if row["meets_min_recall"]]
    assert eligible == bar["eligible"] == ["SMMMAD", "SMSAMD", "SMSAMS", "SMMAMM", "DMDMAM"]
    said = rerun["vs_known"]
    assert (said["answer"], said["recommended"]) == ("tie", "SMSAMS")
    by_pattern = {row["pattern"]: row["evidence"]["scores"] for row in rerun["leaderboard"]}
    paired = paired_difference(by_pattern["SMMMAD"], by_pattern["SMSAMS"])
    assert paired["seeds"] == ["0", "1", "2"] and paired["verdict"] == "within noise"
    find(text, re.escape(f"**{paired['mean']:+.4f} [{paired['ci'][0]:+.4f}, {paired['ci'][1]:+.4f}]**, a tie"))
    assert said["difference"] == pytest.approx(paired["mean"])


COST_MEASURES = {"training": "train_tokens_per_s", "prefill": "prefill_tokens_per_s",
                 "decode, batch 1": "decode_ms_per_token"}


def test_cost_model_out_of_sample():
    """Issue 68's cost model report: the validation is of the fit as written (same constants digest, no refit in
    between) on widths and patterns the fit never ran; every model's figures, the errors by layout class (before
    and after), the goals, and the GPU leave-one-pattern-out, against their JSON."""
    from composer.costmodel import error_summary
    from composer.costmodel.classes import LAYOUT_CLASSES, layout_class
    from composer.presets import get_preset

    text = doc("reports/cost-model-out-of-sample-2026-12-07.md")
    fit = results("cost_model_fit-2026-12-07.json")
    val = results("cost_model_validation-2026-12-07.json")
    before = results("cost_model_validation_before-2026-12-07.json")
    loo = results("cost_model_gpu_loo-2026-12-07.json")
    for name in ("cost_model_fit", "cost_model_validation", "cost_model_validation_before", "cost_model_gpu_loo"):
        assert f"benchmarks/results/{name}-2026-12-07.json" in text, f"the report does not cite {name}"
    # frozen before validation, out of sample by construction
    assert val["out_of_sample"] and val["cpu_constants_digest"] == fit["cpu_constants_digest"]
    assert val["fit_source"]["id"] == f"fit-cpu-{fit['date']}" and val["fit_source"]["command"] == fit["command"]
    find(text, rf"digest `{fit['cpu_constants_digest']}`")
    assert not set(fit["fit_widths"].values()) & {r["d_model"] for r in val["rows"]}
    assert not set(fit["fit_patterns"]) & {r["compact"] for r in val["rows"]}
    assert val["train_precision"] == fit["train_precision"] == ("bf16" if fit["native_bf16"] else "fp32")
    for run in (val, before):
        for r in run["rows"]:
            assert layout_class(get_preset(r["preset"]).arch.with_pattern(r["pattern"])) == r["layout_class"]
    # every model
    rows = {(r["preset"], r["compact"]): r for r in val["rows"]}
    cells_seen = table(text, "| class | widths | pattern |")
    assert len(cells_seen) == len(rows)
    for cells in cells_seen:
        r = rows[cells[1], plain(cells[2])]
        assert cells[0] == r["layout_class"] and int(cells[3]) == r["n_layers"]
        for measure, start in (("train_tokens_per_s", 4), ("prefill_tokens_per_s", 7)):
            agree_all(cells[start:start + 2], [r[measure], r[f"{measure}_predicted"]], f"{cells[2]} {measure}")
            agree(cells[start + 2].rstrip("%"), 100 * r["error"][measure], f"{cells[2]} {measure} error")
        agree_all(cells[10:12], [r["decode_ms_per_token"], r["decode_ms_per_token_predicted"]], f"{cells[2]} decode")
        agree(cells[12].rstrip("%"), 100 * r["error"]["decode_ms_per_token"], f"{cells[2]} decode error")
    # errors by class, after and before, each recomputed from the rows

    def summary(run: dict, group: str, measure: str) -> dict:
        members = [r for r in run["rows"] if group in ("pooled", r["layout_class"])]
        stored = run["errors"][measure] if group == "pooled" else run["errors_by_class"][group][measure]
        recomputed = error_summary([r["error"][measure] for r in members])
        reproduced([stored["median_abs"], stored["worst_abs"]], [recomputed["median_abs"], recomputed["worst_abs"]],
                   f"{group} {measure}")
        return stored

    by_class = table(text, "| phase | class | models | median error |")
    assert len(by_class) == len(COST_MEASURES) * (len(LAYOUT_CLASSES) + 1)
    for cells in by_class:
        measure = COST_MEASURES[cells[0]]
        after, old = summary(val, cells[1], measure), summary(before, cells[1], measure)
        assert int(cells[2]) == after["n"] == old["n"]
        agree_all([c.rstrip("%") for c in cells[3:7]],
                  [100 * s[k] for s in (after, old) for k in ("median_abs", "worst_abs")],
                  f"{cells[0]} {cells[1]}")
    # the goals: training median <= 15% and worst <= 30% in every class, decode at batch 1 median <= 15%
    goals = table(text, "| goal | class | figure | met |")
    checked = 0
    for cells in goals:
        measure, statistic, limit = {"training median <= 15%": ("train_tokens_per_s", "median_abs", 0.15),
                                     "training worst <= 30%": ("train_tokens_per_s", "worst_abs", 0.30),
                                     "decode batch 1 median <= 15%": ("decode_ms_per_token", "median_abs", 0.15)}[
            plain(cells[0])]
        value = summary(val, cells[1], measure)[statistic]
        agree(cells[2].rstrip("%"), 100 * value, f"goal {cells[0]} {cells[1]}")
        assert cells[3] == ("yes" if value <= limit else "no"), f"goal {cells[0]} {cells[1]}"
        checked += 1
    assert checked == 2 * len(LAYOUT_CLASSES) + len(LAYOUT_CLASSES) + 1  # decode: each class and pooled
    # the GPUs, leave one pattern out
    grouped = loo["groupings"]["grouped"]
    assert grouped["errors"]["n"] == len(loo["cases"]) and grouped["not_predicted"] == 0
    s = grouped["errors"]
    match = find(text, rf"median error \*\*{NUM}%\*\*, worst \*\*{NUM}%\*\* over {len(loo['cases'])} configurations")
    agree_all([match[1], match[2]], [100 * s["median_abs"], 100 * s["worst_abs"]], "GPU grouped")
    for cells in table(text, "| held-out pattern |"):
        group = plain(cells[0])
        cases = [c for c in loo["cases"] if c["group"] == group]
        assert cells[1] == f"{len(cases)} ({sum(len(c['repeats']) for c in cases)})" and cells[2] == cases[0][
            "layout_class"]
        g = grouped["errors_by_held_out_group"][group]
        agree_all([c.rstrip("%") for c in cells[3:5]], [100 * g["median_abs"], 100 * g["worst_abs"]], group)
    for cls, v in grouped["errors_by_class"].items():
        match = find(text, rf"{re.escape(cls)} median {NUM}%, worst {NUM}% over {v['n']}")
        agree_all([match[1], match[2]], [100 * v["median_abs"], 100 * v["worst_abs"]], f"GPU {cls}")
    # the prose: the machine, the run times, the per-slice counts, decode's noise, bf16 against fp32
    agree(find(text, rf"load average of {NUM} when the fit began")[1],
          fit["machine"]["before"]["load_average_1_5_15"][0], "load at the fit's start")
    agree(find(text, rf"and {NUM} when the last run ended")[1], before["machine"]["after"]["load_average_1_5_15"][0],
          "load at the end")
    agree(find(text, rf"# {NUM} s; writes composer/costmodel/constants.json")[1], fit["seconds"], "fit seconds")
    agree(find(text, rf"validate --device cpu +# {NUM} s")[1], val["seconds"], "validate seconds")
    per_slice = fit["counts"]["S"]["train"]["per_slice"]
    match = find(text, rf"adds {NUM}-{NUM} ops to an `S` training step for the convolution and {NUM}-{NUM} for "
                       "the scan")
    agree_all(list(match.groups()), [min(per_slice["short_conv"]["ops"]), max(per_slice["short_conv"]["ops"]),
                                     min(per_slice["ssd_scan"]["ops"]), max(per_slice["ssd_scan"]["ops"])], "per slice")
    pairs = list(zip(val["rows"], before["rows"], strict=True))
    assert all(a["compact"] == b["compact"] and a["preset"] == b["preset"] for a, b in pairs)
    assert before["train_precision"] == "fp32" and val["train_precision"] == "bf16"
    drift = [abs(a["decode_ms_per_token"] / b["decode_ms_per_token"] - 1) for a, b in pairs]
    match = find(text, rf"differed by a median {NUM}% and up to {NUM}% between the validation run")
    agree_all(list(match.groups()), [100 * float(np.median(drift)), 100 * max(drift)], "decode run to run")
    agree(find(text, rf"differed by a median {NUM}% between the two validation runs")[1], 100 * float(np.median(drift)),
          "decode run to run (setting)")
    speedup = [a["train_tokens_per_s"] / b["train_tokens_per_s"] for a, b in pairs]
    match = find(text, rf"a median {NUM}x faster in bf16 autocast than in fp32 \({NUM}x-{NUM}x")
    agree_all(list(match.groups()), [float(np.median(speedup)), min(speedup), max(speedup)], "bf16 speed-up")
    decode_fit = fit["fit_error"]["decode"]
    match = find(text, rf"in-sample decode error {NUM}% median, {NUM}% worst")
    agree_all(list(match.groups()), [100 * decode_fit["median_abs"], 100 * decode_fit["worst_abs"]], "fit decode")
    too_fast = sum(r["error"]["decode_ms_per_token"] < 0 for r in val["rows"])
    assert too_fast == sum(r["error"]["decode_ms_per_token"] < 0 for r in before["rows"])
    find(text, rf"{too_fast} of {len(val['rows'])} predictions are too fast, before as after")
    agree(find(text, rf"fitted op cost \({NUM} us an op in training\)")[1],
          1e6 * fit["constants"]["op_cost_s"]["train"], "train op cost")
    errors = [r["error"]["train_tokens_per_s"] for r in val["rows"]]
    assert max(errors) < 0, "the report says every training error is negative"
    match = find(text, rf"predicts {NUM}-{NUM}% slower than measured")
    agree_all(list(match.groups()), [-100 * max(errors), -100 * min(errors)], "training error range")
    assert all(r["error"]["train_tokens_per_s"] > 0 for r in before["rows"] if r["layout_class"] == "S/D-heavy")


def test_the_families_at_equal_cost():
    """Each arm's model, its cost ratios at the deployed size and its losses as benchmarks/equal_cost_families.py
    wrote them; the pairings against Nemotron-H recomputed from the per-seed losses."""
    import statistics


    text = doc("reports/equal-cost-families-2026-12-07.md")
    data = results("equal_cost_families-2026-12-07.json")
    arms = data["arms"]
    assert data["rule"]["reference"] == "nemotron-h" and data["rule"]["deployed"] == "llama-3.2-1b"
    for cells in table(text, "| arm | model at `demo-4m`"):
        arm = arms[plain(cells[0])]
        assert plain(cells[1]) == arm["layout"]
        assert int(cells[2]) == arm["d_model"]
        agree(cells[3].rstrip("M"), arm["non_embedding_params"] / 1e6, f"{cells[0]} size")
        assert [int(n) for n in numbers(cells[4])] == [arm["deployed"]["layers"], arm["deployed"]["d_model"]]
        agree_all(numbers(cells[5]), [arm["deployed"]["ratio"]["decode"], arm["deployed"]["ratio"]["train"]],
                  f"{cells[0]} cpu ratios")
        agree_all(numbers(cells[6]), [arm["h200"]["ratio"]["decode"], arm["h200"]["ratio"]["train"]],
                  f"{cells[0]} h200 ratios")
        assert plain(cells[7]) == (f"{arm['lr']:g}" if arm["lr"] else "-")
    reference = arms["nemotron-h"]["losses"]
    for cells in table(text, "| arm | seeds | mean loss"):
        arm = arms[plain(cells[0])]
        losses = arm["losses"] or {}
        assert int(cells[1]) == len(losses)
        agree(cells[2], statistics.mean(losses.values()), f"{cells[0]} loss")
        if plain(cells[0]) == "nemotron-h" or len(losses) < 2:
            continue
        paired = paired_difference(losses, reference)
        agree(cells[3], paired["mean"], f"{cells[0]} difference")
        agree_all(numbers(cells[4]), list(paired["ci"]), f"{cells[0]} interval")
        assert plain(cells[5]) == paired["verdict"]
    said = find(text, r"Nemotron-H (NUM), Nemotron-Flash (NUM), the 3:1 (NUM), `SMMMAD` (NUM), `answer-mlp@16` (NUM)\."
                .replace("NUM", r"[0-9]+\.[0-9]+"))
    for printed, name in zip(said.groups(), ("nemotron-h", "nemotron-flash", "linear-3to1", "smmmad", "answer-mlp")):
        agree(printed, arms[name]["trained_recall"]["confirmation"]["value"], f"{name} copy gain")
    for name, arm in arms.items():  # the rate past the grid's edge was worse for every arm
        assert arm["edge"]["loss"] > arm["edge"]["chosen_loss"], name


def test_the_equal_cost_search_against_the_families():
    """The search's finalists and the answer's pairings as benchmarks/equal_cost_search.py wrote them, the pairings
    recomputed from the per-seed losses of both JSON files, and the check that the two trained the same."""
    text = doc("reports/equal-cost-search-2026-12-07.md")
    data = results("equal_cost_search-2026-12-07.json")
    families = results("equal_cost_families-2026-12-07.json")["arms"]
    finalists = {row["pattern"]: row for row in data["search"]["finalists"]}
    for cells in table(text, "| pattern | trained as"):
        row = finalists[plain(cells[0]).split()[0]]
        assert int(cells[2]) == (int(row["widths"].split(":d")[1]) if ":d" in row["widths"] else 192)
        agree(cells[3].rstrip("M"), row["non_embedding_params"] / 1e6, f"{cells[0]} size")
        assert plain(cells[4]) == f"{row['lr']:g}"
        agree(cells[5], row["losses"]["0"], f"{cells[0]} loss")
        agree(cells[6], row["probe_recall"], f"{cells[0]} probe recall")
        assert plain(cells[7]) == ("yes" if row["eligible"] else "no")
    answer = finalists[data["search"]["answer"]]
    reference = finalists["SMSAMS"]["losses"]
    assert reference == pytest.approx(families["nemotron-h"]["losses"], abs=1e-6)  # the same training
    for cells in table(text, "| answer against |"):
        paired = paired_difference(answer["losses"], families[plain(cells[0])]["losses"])
        agree(cells[1], paired["mean"], f"against {cells[0]}")
        agree_all(numbers(cells[2]), list(paired["ci"]), f"against {cells[0]} interval")
        assert plain(cells[3]) == paired["verdict"]
    # seeds 3 and 4, recomputed from the per-seed losses the JSON keeps (equal_cost_search.py --more-seeds)
    more = data["more_seeds"]["by_arm"]
    mine = {**answer["losses"], **more["search-answer"]["losses"]}
    five = table(text, "| answer against, over 5 seeds")
    for cells in five:
        name = plain(cells[0])
        theirs = {**families[name]["losses"], **more[name]["losses"]}
        assert sorted(mine) == sorted(theirs) == ["0", "1", "2", "3", "4"]
        paired = paired_difference(mine, theirs)
        agree(cells[1], paired["mean"], f"5 seeds against {name}")
        agree_all(numbers(cells[2]), list(paired["ci"]), f"5 seeds against {name} interval")
        assert plain(cells[3]) == paired["verdict"]
    assert [plain(cells[0]) for cells in five] == ["nemotron-h", "nemotron-flash"]
    flash = {**families["nemotron-flash"]["losses"], **more["nemotron-flash"]["losses"]}
    level = paired_difference(flash, {**families["nemotron-h"]["losses"], **more["nemotron-h"]["losses"]})
    said = find(text, r"Nemotron-Flash against Nemotron-H\*\*, over the same five seeds: (NUM) \[(NUM), (NUM)\]"
                .replace("NUM", r"[-+]?[0-9.]+"))
    agree_all(list(said.groups()), [level["mean"], *level["ci"]], "Nemotron-Flash against Nemotron-H, 5 seeds")
    edge = more["search-answer"]["edge"]
    said = find(text, r"scored (NUM) against (NUM) at 2e-3".replace("NUM", r"[0-9.]+"))
    agree_all(list(said.groups()), [edge["loss"], edge["chosen_loss"]], "the answer's rate past the grid")
    assert edge["lr"] == 4e-3 and edge["chosen_lr"] == 2e-3
    held = data["search"]["held_out"]
    said = find(text, r"it is (NUM) \[(NUM), (NUM)\]: the same size".replace("NUM", r"[-+]?[0-9.]+"))
    agree_all(list(said.groups()), [held["difference"], *held["ci"]], "held-out seeds")
    model = data["answer_model"]
    rows = {plain(cells[0]): cells[1] for cells in table(text, "| figure | answer over")}
    figures = list(rows.values())
    agree_all([f.rstrip("x") for f in figures[:4]], [model["deployed"]["ratio"]["decode"],
                                                     model["deployed"]["ratio"]["train"],
                                                     model["h200"]["ratio"]["decode"], model["h200"]["ratio"]["train"]],
              "the answer's modeled cost")
    over = answer["measured_cpu"]["over_best_known"]
    agree_all([f.rstrip("x") for f in figures[4:6]], [over["decode_ms_per_token"]["1"]["1024"],
                                                     over["train_tokens_per_s"]], "the answer's measured cost")
