"""The reports that pair an answer with what shipped: published-hybrids-2026-11-25.md,
halving-answer-vs-published-2026-11-26.md and default-answer-vs-published-2026-11-26.md, each comparison
table and paired difference recomputed from the per-seed losses.
"""

from __future__ import annotations

from composer.statistics import paired_difference, seed_separation, seed_summary
from tests.docs_figures.reading import (
    NUM,
    agree,
    agree_all,
    doc,
    find,
    numbers,
    per_seed,
    plain,
    reproduced,
    results,
    section,
    table,
)


def check_comparison_table(rows: list[list[str]], models: dict[str, dict], names: dict[str, str], seeds,
                           columns: list[str], where: str) -> None:
    """A pipeline comparison table (model, layout, lr, mean ± std, CI, Δ vs Llama, CI, then ``columns``), each
    figure recomputed from the per-seed losses with composer.statistics or read from the model's entry."""
    assert {names[plain(r[0])] for r in rows} == set(models), f"{where}: the table's models"
    reference = per_seed(models["llama"]["val_losses"], seeds)
    for row in rows:
        m = models[names[plain(row[0])]]
        what = f"{where} row {m['model']}"
        assert plain(row[1]).startswith(m["pattern"]), f"{what}: layout {row[1]} against {m['pattern']}"
        assert float(row[2]) == m["chosen_lr"], f"{what}, lr"
        loss = seed_summary([m["val_losses"][str(s)] for s in seeds])
        reproduced([m["val_loss"], m["val_loss_std"]], [loss["mean"], loss["std"]], f"{what}: mean and std")
        agree_all(numbers(row[3]), [loss["mean"], loss["std"]], f"{what}, mean ± std")
        agree_all(numbers(row[4]), loss["ci"], f"{what}, 95% CI")
        if m["model"] == "llama":
            assert row[5] == row[6] == "—", what
        else:
            diff = paired_difference(per_seed(m["val_losses"], seeds), reference)
            reproduced(m["diff_vs_reference"], diff["mean"], f"{what}: paired difference to Llama")
            agree_all(numbers(row[5]), [diff["mean"]], f"{what}, Δ vs Llama")
            agree_all(numbers(row[6]), diff["ci"], f"{what}, Δ 95% CI")
        for cell, column in zip(row[7:], columns, strict=True):
            if column in ("params", "active_params"):
                assert cell.endswith("M"), f"{what}, {column}"
                agree(cell[:-1], m[column] / 1e6, f"{what}, {column} (millions)")
            else:
                agree(cell, m[column], f"{what}, {column}")


def check_paired_rows(rows, models, names, seeds, where: str) -> None:
    """Rows ``a − b | Δ | CI | verdict``: paired_difference(a, b) over the seeds."""
    for row in rows:
        a, b = (names[plain(part).split(" (")[0].strip()] for part in row[0].split("−"))
        diff = paired_difference(per_seed(models[a]["val_losses"], seeds), per_seed(models[b]["val_losses"], seeds))
        what = f"{where}: {a} − {b}"
        agree_all(numbers(row[1]), [diff["mean"]], f"{what}, Δ")
        agree_all(numbers(row[2]), diff["ci"], f"{what}, 95% CI")
        assert row[3] == diff["verdict"], f"{what}: the doc says {row[3]!r}, the JSON {diff['verdict']!r}"


def check_power(text: str, models: dict[str, dict], seeds, where: str, prefix: str) -> dict:
    """"the seed spread within a model (std X) ... spread between models (Y) ... (Spearman Z": seed_separation."""
    power = seed_separation({name: per_seed(m["val_losses"], seeds) for name, m in models.items()})
    match = find(text, f"the seed spread within a model \\(std {NUM}\\) {prefix}spread between models \\({NUM}\\)"
                       f", and the three seeds rank the[^(]*\\(Spearman {NUM}")
    agree_all(list(match.groups()), [power["within_seed_std"], power["between_model_std"], power["noise_ceiling"]],
              f"{where}: power (within-seed std, between-model std, seed agreement)")
    return power


PUBLISHED = "published_hybrids-2026-11-25.json"


PUBLISHED_NAMES = {"samba": "samba", "nemotron-h": "nemotron-h", "linear-7to1": "linear-7to1", "jamba": "jamba",
                   "gdn-h1": "gdn-h1", "composite": "composite", "composite (searched)": "composite",
                   "qwen3-next": "qwen3-next", "llama": "llama", "Samba": "samba", "Nemotron-H": "nemotron-h"}


def test_published_hybrids():
    text = doc("reports/published-hybrids-2026-11-25.md")
    assert f"benchmarks/results/{PUBLISHED}" in text
    report = results(PUBLISHED)
    seeds = report["seeds"]
    models = {m["model"]: m for m in report["models"]}
    rows = table(text, "| model | layout at demo-4m | lr |")
    check_comparison_table(rows, models, PUBLISHED_NAMES, seeds,
                           ["tokens_per_s", "params", "active_params", "kv_cache_bytes_per_token", "state_bytes"],
                           "published-hybrids.md")
    composite = per_seed(models["composite"]["val_losses"], seeds)
    family_rows = table(text, "| family − composite |")
    assert {r[0] for r in family_rows} == set(models) - {"composite", "llama"}
    for row in family_rows:
        diff = paired_difference(per_seed(models[row[0]]["val_losses"], seeds), composite)
        what = f"published-hybrids.md: {row[0]} − composite"
        agree_all(numbers(row[1]), [diff["mean"]], f"{what}, Δ")
        agree_all(numbers(row[2]), diff["ci"], f"{what}, 95% CI")
        assert row[3] == diff["verdict"], what
    # "The top four cannot be told apart": three paired differences in prose.
    match = find(text, f"Samba − Nemotron-H is {NUM} \\[{NUM}, {NUM}\\], Nemotron-H − linear-7to1 {NUM} "
                       f"\\[{NUM}, {NUM}\\] and linear-7to1 − Jamba {NUM} \\[{NUM}, {NUM}\\]")
    for index, (a, b) in enumerate((("samba", "nemotron-h"), ("nemotron-h", "linear-7to1"), ("linear-7to1", "jamba"))):
        diff = paired_difference(per_seed(models[a]["val_losses"], seeds), per_seed(models[b]["val_losses"], seeds))
        agree_all(list(match.groups()[3 * index: 3 * index + 3]), [diff["mean"], *diff["ci"]],
                  f"published-hybrids.md: {a} − {b}")
    gains = [-m["diff_vs_reference"] for name, m in models.items() if name != "llama"]
    match = find(text, f"Every hybrid beats Llama by far\\*\\* at this budget: {NUM} to {NUM} nats")
    agree_all([match[1], match[2]], [min(gains), max(gains)], "published-hybrids.md: the hybrids' lead over Llama")
    power = check_power(text, models, seeds, "published-hybrids.md", prefix="is a tenth of the ")
    reproduced(report["power"]["separation"], power["separation"], f"{PUBLISHED} separation")


HALVING = "halving_answer_vs_published-2026-11-26.json"


HALVING_NAMES = {"search's answer": "composite", "answer": "composite", "samba": "samba", "Samba": "samba",
                 "nemotron-h": "nemotron-h", "Nemotron-H": "nemotron-h", "llama": "llama", "Llama": "llama"}


def test_search_answer_against_what_shipped():
    text = section(doc("reports/halving-answer-vs-published-2026-11-26.md"), "The answer against what shipped")
    assert f"benchmarks/results/{HALVING}" in text
    report = results(HALVING)
    comparison = report["comparison"]
    seeds = comparison["seeds"]
    models = {m["model"]: m for m in comparison["models"]}
    check_comparison_table(table(text, "| model | layout at demo-4m | lr |"), models, HALVING_NAMES, seeds,
                           ["params", "kv_cache_bytes_per_token", "state_bytes"], "search.md answer table")
    paired = table(text, "| difference | Δ | 95% CI | verdict |")
    check_paired_rows(paired, models, HALVING_NAMES, seeds, "search.md")
    for row in paired:  # the JSON's own paired block holds the same numbers
        a, b = (HALVING_NAMES[plain(part).split(" (")[0].strip()] for part in row[0].split("−"))
        stored = report["paired"][f"{a} - {b}"]
        diff = paired_difference(per_seed(models[a]["val_losses"], seeds), per_seed(models[b]["val_losses"], seeds))
        reproduced(stored["mean"], diff["mean"], f"{HALVING} paired {a} - {b}")
        assert stored["verdict"] == diff["verdict"], f"{HALVING} paired {a} - {b}: verdict"
    match = find(text, f"Per seed \\(0, 1, 2\\): the answer {NUM}, {NUM}, {NUM}; Samba {NUM}, {NUM}, {NUM}; "
                       f"Nemotron-H {NUM}, {NUM}, {NUM}; Llama {NUM}, {NUM}, {NUM}\\.")
    for index, name in enumerate(("composite", "samba", "nemotron-h", "llama")):
        agree_all(list(match.groups()[3 * index: 3 * index + 3]),
                  [models[name]["val_losses"][str(s)] for s in seeds], f"search.md per-seed losses of {name}")
    power = check_power(text, models, seeds, "search.md", prefix="is 1/25 of the ")
    assert round(power["separation"]) == 25, f"search.md: the spread between models is 1/{power['separation']:.1f}"
    behind = [models["llama"]["val_loss"] - m["val_loss"] for name, m in models.items() if name != "llama"]
    match = find(text, f"Llama is {NUM}-(\\d+\\.\\d+) behind every hybrid")
    agree_all([match[1], match[2]], [min(behind), max(behind)], "search.md: Llama's deficit to the hybrids")


DEFAULT_ANSWER = "default_answer_vs_published-2026-11-26.json"


DEFAULT_SEARCH = "default_search_amsd-2026-11-26.json"


HALVING_SEARCH = "search_successive_halving-2026-11-25.json"


DEFAULT_NAMES = {"default search's answer": "answer", "halving search's answer": "composite", "samba": "samba",
                 "nemotron-h": "nemotron-h", "llama": "llama"}


def test_search_default_answer_against_what_shipped():
    """The report's section on the default one-shot search (proxy scores from its leaderboard JSON) and on its
    answer at the target, paired seed by seed with the families' stored runs (the halving comparison's JSON)."""
    from composer.pattern import n_layers, parse_pattern

    page = doc("reports/default-answer-vs-published-2026-11-26.md")
    text = section(page, "The default search's answer against what shipped")
    for name in (DEFAULT_ANSWER, DEFAULT_SEARCH):
        assert f"benchmarks/results/{name}" in text
    search, report = results(DEFAULT_SEARCH), results(DEFAULT_ANSWER)
    board = search["leaderboard"]
    scores = {row["pattern"]: row["score"] for row in board}

    # the search at the proxy
    match = find(text, f"\\*\\*The search\\.\\*\\* {NUM} candidates")
    assert int(match[1]) == len(board) + len(search["failures"]), "search.md: candidates of the default search"
    hours, minutes, seconds = (int(part) for part in search["wall_time"].split()[0].split(":"))
    match = find(text, f"It took \\*\\*{NUM} h {NUM} min\\*\\* of wall time with two workers; training time summed "
                       f"over candidates was {NUM} min")
    assert (int(match[1]), int(match[2])) == divmod(round(hours * 60 + minutes + seconds / 60), 60), "wall time"
    agree(match[3], search["training_seconds_summed"] / 60, "search.md: training minutes summed")
    vs_known = search["best"]["vs_known"]
    assert vs_known["best_new"]["pattern"] == board[0]["pattern"] == search["best"]["pattern"]
    match = find(text, f"The answer is \\*\\*`(\\w+)`\\*\\*, a new pattern: {NUM}, against the best known layout, "
                       f"Nemotron-H's `(\\w+)`, at {NUM}\\. That is {NUM} on one seed")
    assert (match[1], match[3]) == (board[0]["pattern"], vs_known["best_known"]["pattern"])
    assert vs_known["best_known"]["name"] == "nemotron-h" and vs_known["answer"] == "new"
    margin = board[0]["score"] - vs_known["best_known"]["score"]
    agree_all([match[2], match[4], match[5]], [board[0]["score"], vs_known["best_known"]["score"], margin],
              "search.md: the default search's answer against the best known layout")
    reproduced(vs_known["difference"], margin, f"{DEFAULT_SEARCH} difference")
    match = find(text, f"Then `(\\w+)` {NUM}, `(\\w+)` {NUM}, `(\\w+)` {NUM}\\. Llama `(\\w+)` scored {NUM} and "
                       f"`(\\w+)` {NUM}\\.")
    assert [match[1], match[3], match[5]] == [row["pattern"] for row in board[1:4]], "search.md: ranks 2 to 4"
    known = {row["known"]: row["pattern"] for row in board if row["known"]}
    assert [match[7], match[9]] == [known["llama"], known["composer-paper"]]
    agree_all([match[i] for i in (2, 4, 6, 8, 10)], [scores[match[i]] for i in (1, 3, 5, 7, 9)],
              "search.md: proxy scores of the default search")
    # the same evaluation at the halving search's rung 1 (the same budget), and that search's answer
    rung1 = {row["pattern"]: row["score"] for row in results(HALVING_SEARCH)["rungs"][1]["scored"]}
    match = find(text, f"Nemotron-H's `SMSAMS` scored {NUM} here and {NUM} at the successive-halving search's rung 1")
    assert scores["SMSAMS"] == rung1["SMSAMS"], "the evaluation did not repeat exactly across the two searches"
    agree_all([match[1], match[2]], [scores["SMSAMS"], rung1["SMSAMS"]], "search.md: SMSAMS in both searches")
    match = find(text, f"the halving search's `SDMMSD` \\({NUM}\\) is better than anything the one-shot search tried")
    agree(match[1], rung1["SDMMSD"], "search.md: SDMMSD at rung 1")
    assert rung1["SDMMSD"] < min(scores.values()) and "SDMMSD" not in scores
    match = find(text, f"The halving search found it by screening {NUM} candidates")
    assert int(match[1]) == len(results(HALVING_SEARCH)["rungs"][0]["scored"])
    top = [row["pattern"] for row in board if row["lr"] == 3e-3]
    match = find(text, f"\\*\\*{NUM} of {NUM} candidates chose 3e-3, the top of the two-rate grid\\.\\*\\* Only "
                       f"`(\\w+)` chose 1e-3")
    assert (int(match[1]), int(match[2])) == (len(top), len(board)), "search.md: candidates at the top rate"
    assert [row["pattern"] for row in board if row["lr"] != 3e-3] == [match[3]] and scores[match[3]]
    match = find(text, f"At 400K tokens and 6 layers, `SSSSMS` beat Nemotron-H's nearest layout by {NUM}")
    agree(match[1], -vs_known["difference"], "search.md: the proxy margin of SSSSMS")

    # at the target
    answer, seeds = report["answer"], report["seeds"]
    assert report["validation"]["same"] and report["files"]["families"].endswith(HALVING)
    match = find(text, f"The answer is stacked to `demo-4m` as `([^`]+)`: {NUM} layers")
    assert match[1] == answer["pattern"] and int(match[2]) == n_layers(parse_pattern(answer["pattern"]))
    assert parse_pattern(answer["pattern"]).startswith(board[0]["pattern"]), "the target stacks the search's answer"
    sweep = {float(lr): loss for lr, loss in answer["lr_sweep"].items()}
    match = find(text, f"The sweep's losses were {NUM} / \\*\\*{NUM}\\*\\* / {NUM} / {NUM} "
                       f"at (\\S+) / (\\S+) / (\\S+) / (\\S+)\\.")
    assert [float(rate) for rate in match.groups()[4:]] == sorted(sweep), "search.md: the sweep's rates"
    agree_all(list(match.groups()[:4]), [sweep[lr] for lr in sorted(sweep)], "search.md: the answer's rate sweep")
    assert min(sweep, key=sweep.get) == answer["chosen_lr"] == float(match[6]) not in (min(sweep), max(sweep))
    match = find(text, f"The same {NUM} validation tokens were used")
    assert int(match[1].replace(",", "")) == report["validation"]["val_tokens"]

    families = {m["model"]: m for m in results(HALVING)["comparison"]["models"]}
    against = {("composite" if a["model"] == "stored composite" else a["model"]): a for a in report["against"]}
    assert set(against) == set(families) and seeds == results(HALVING)["comparison"]["seeds"]
    losses = {"answer": per_seed(answer["val_losses"], seeds),
              **{name: per_seed(m["val_losses"], seeds) for name, m in families.items()}}
    rows = table(text, "| model | layout at demo-4m | lr |")
    assert {DEFAULT_NAMES[plain(row[0])] for row in rows} == set(losses), "search.md: the default answer's table"
    diffs = {}
    for row in rows:
        name = DEFAULT_NAMES[plain(row[0])]
        entry = answer if name == "answer" else families[name]
        what = f"search.md default answer table, row {name}"
        assert plain(row[1]).startswith(entry["pattern"]) and float(row[2]) == entry["chosen_lr"], what
        loss = seed_summary(list(losses[name].values()))
        reproduced([entry["val_loss"], entry["val_loss_std"]], [loss["mean"], loss["std"]], f"{what}: mean and std")
        agree_all(numbers(row[3]), [loss["mean"], loss["std"]], f"{what}, mean ± std")
        if name == "answer":
            assert row[4:] == ["—", "—", "—"], what
            continue
        reproduced(against[name]["val_loss"], loss["mean"], f"{DEFAULT_ANSWER} {name} mean")
        diffs[name] = diff = paired_difference(losses["answer"], losses[name])
        stored = against[name]["diff"]
        reproduced([stored["mean"], *stored["ci"], *stored["differences"]], [diff["mean"], *diff["ci"],
                   *diff["differences"]], f"{DEFAULT_ANSWER} answer - {name}")
        agree_all(numbers(row[4]), [diff["mean"]], f"{what}, answer − model")
        agree_all(numbers(row[5]), diff["ci"], f"{what}, 95% CI")
        assert row[6] == diff["verdict"] == stored["verdict"], what
    match = find(text, f"Per seed \\(0, 1, 2\\) the answer scored {NUM}, {NUM} and {NUM}\\. Its 95% CI is "
                       f"\\[{NUM}, {NUM}\\]; it has {NUM}M parameters, no KV cache")
    assert seeds == [0, 1, 2] and answer["kv_cache_bytes_per_token"] == 0
    agree_all(list(match.groups()), [*losses["answer"].values(), *seed_summary(list(losses["answer"].values()))["ci"],
                                     answer["params"] / 1e6], "search.md: the default answer per seed, CI, size")

    # reading it
    match = find(text, f"It is {NUM} behind Samba and {NUM} behind Nemotron-H, and both intervals exclude 0")
    agree_all([match[1], match[2]], [diffs["samba"]["mean"], diffs["nemotron-h"]["mean"]],
              "search.md: the answer behind the families")
    assert diffs["samba"]["ci"][0] > 0 and diffs["nemotron-h"]["ci"][0] > 0
    agree(find(text, f"It still beats Llama by {NUM}")[1], -diffs["llama"]["mean"], "search.md: ahead of Llama")
    match = find(text, f"The successive-halving answer beats it by {NUM} \\[{NUM}, {NUM}\\]")
    agree_all(list(match.groups()), [diffs["composite"]["mean"], *diffs["composite"]["ci"]],
              "search.md: the halving answer ahead of the default one")
