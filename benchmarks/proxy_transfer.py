"""Which search proxy predicts the target-scale ranking best, per minute of search?

Fixed patterns (12 six-layer A/M interleavings by default) are scored by every proxy (MAD budgets, the LM
evaluator's budgets) exactly as `composer search` scores a candidate, and trained at the target preset once per
seed exactly as `composer transfer` trains them (same extrapolator, same replicates). The script then prints,
per proxy, the Spearman and Kendall correlation between its score and the mean target loss with a hierarchical
bootstrap 95% interval, its seconds per candidate, and both as ratios against the named peer: the current
default proxy (`mad:cpu`), measured in the same run. MAD proxies also get a row per task and per task mix (the
mean of a subset of their tasks), computed from the same evaluations, and every MAD row a twin scored by
mad-lab's macro accuracy (`<proxy> macro`, torchmetrics' class-averaged accuracy of the same trained cell): its
Δ against the peer is the paired difference of the two accuracies' Spearmans. The target's noise ceiling
(Spearman between its own seeds) says how much agreement is possible at all.

Given a ``composer transfer`` report (``--target-losses transfer.json``), two more rows come free: ``search``, the
scores the search gave the patterns, and with ``--lr-sweep`` its ``lr_sweep.json``, ``sweep: ...``: each pattern
at the target's own shape after the sweep's tokens (a fraction of the target's), which is what a halving rung at
the target's shape sees. The sweep trains one of the target's seeds; ``--target-seeds`` ranks every row against
the others only.

    python benchmarks/proxy_transfer.py                                   # the docs/mad.md table (~80 min, 2 cores)
    python benchmarks/proxy_transfer.py --tokens 20000 --seeds 2 --proxies mad:smoke --patterns AAMMMM,AMAMAM,MMMMMM
    python benchmarks/proxy_transfer.py --proxies mad:cpu,mad:gpu,mad:paper --to llama-350m ...   # on GPUs
    python benchmarks/proxy_transfer.py --proxies mad:cpu --proxy-seeds 2 \
        --target-losses benchmarks/results/proxy_transfer-2026-11-24.json  # re-score against stored targets
    python benchmarks/proxy_transfer.py --proxies mad:cpu,lm:rung-cpu-0 --peer search --target-seeds 1,2 \
        --lr-sweep runs/transfer-lm/lr_sweep.json --sweep-rates 1e-3,2e-3 \
        --target-losses runs/transfer-lm/transfer.json                        # docs/search.md's rung table

Everything is resumable: target runs live under --out/train (finished runs are never retrained) and proxy scores
in --out/proxies.json (written after every evaluation). --json prints one object; the table is printed last.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

from report import finish

from composer.errors import ConfigError
from composer.experiments.lr_sweep import parse_rates
from composer.experiments.replicates import parse_seeds, plan_replicates, run_replicates, shared_validation
from composer.files import atomic_write_json
from composer.statistics import (
    bootstrap_rank_correlation,
    compare_rank_correlations,
    format_interval,
    noise_ceiling,
    seed_summary,
)

# Spread over the default 6-layer A/M space: the paper's winner and the Llama alternation, attention placed
# early / late / in the middle, one to five attention layers, and the no-attention extreme.
DEFAULT_PATTERNS = ("AAMMMM", "AMAMAM", "MAMAMA", "MMAAMM", "MMMMAA", "AAAMMM", "AMMMMM", "MMMMAM", "MAMMAA",
                    "AMMAMM", "AAAAAM", "MMMMMM")
PEER = "mad:cpu"  # the default proxy of `composer search` when this was written


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patterns", default=",".join(DEFAULT_PATTERNS), help="comma-separated patterns")
    parser.add_argument("--proxies", default="mad:smoke,mad:cpu,lm:smoke,lm:cpu",
                        help="evaluator:budget list (mad:smoke, mad:cpu, mad:gpu, mad:paper, lm:smoke, lm:cpu, ...)")
    parser.add_argument("--proxy-seeds", default="1", help="seeds per proxy score (a count or a list; default 1)")
    parser.add_argument("--widths", default="search-1m", help="search widths (default search-1m)")
    parser.add_argument("--to", default="demo-4m", help="target preset (default demo-4m)")
    parser.add_argument("--seeds", default="2", help="target training seeds: a count or a list (default 2)")
    parser.add_argument("--tokens", type=int, default=600_000, help="target training tokens per run")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--max-documents", type=int, default=2000, help="of the target's data (default corpus)")
    parser.add_argument("--data", help="target training text (default: the offline corpus)")
    parser.add_argument("--precision", default="32-true")
    parser.add_argument("--target-losses", metavar="RESULT_JSON",
                        help="the target's losses from an earlier run's proxy_transfer.json or a composer "
                             "transfer's transfer.json (no target training)")
    parser.add_argument("--target-seeds", metavar="SEEDS",
                        help="rank against these of the target's seeds only (a list, e.g. 1,2: the seeds a "
                             "transfer's lr sweep did not train with, so its row is scored on independent runs)")
    parser.add_argument("--lr-sweep", metavar="LR_SWEEP_JSON",
                        help="a composer transfer's lr_sweep.json: adds the row 'sweep: ...', each pattern at the "
                             "target's own shape after the sweep's tokens")
    parser.add_argument("--sweep-rates", metavar="RATES",
                        help="the sweep row's score is its best loss over these of the sweep's rates (default all; "
                             "e.g. 1e-3,2e-3 for the rates of the cpu ladder's rung 1)")
    parser.add_argument("--peer", default=PEER, help=f"the proxy every other is compared with (default {PEER}; "
                        "'search' for the search's own scores, which a transfer.json given to --target-losses "
                        "adds as a row)")
    parser.add_argument("--n-boot", type=int, default=10_000)
    parser.add_argument("--out", default="runs/proxy-transfer")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    return parser.parse_args(argv)


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def target_losses(args, patterns: list[str], out: Path) -> tuple[dict[str, list[float]], dict]:
    from scaling.extrapolate import extrapolate

    seeds = parse_seeds(args.seeds)
    models = {p: extrapolate(p, args.to).pattern for p in patterns}
    base = {"tokens": args.tokens, "seq_len": args.seq_len, "batch_size": args.batch_size, "lr": args.lr,
            "max_documents": args.max_documents, "data": args.data, "precision": args.precision,
            "wandb": "off", "val_interval": 10**6, "log_interval": 50}
    plan = plan_replicates(models, seeds, out / "train", base, args.to, run_prefix="proxy-transfer-")
    summaries = run_replicates(plan, echo=log)
    losses = {p: [summaries[(p, s)]["val_loss"] for s in seeds] for p in patterns}
    info = {"seeds": seeds, "tokens": args.tokens, "to": args.to, "targets": models,
            "validation": shared_validation(summaries.values()),
            "seconds_per_run": sum(s["wall_time_s"] for s in summaries.values()) / len(summaries)}
    return losses, info


def stored_target_losses(path: str, patterns: list[str]) -> tuple[dict[str, list[float]], dict]:
    """The target side of an earlier run, for re-scoring proxies without retraining the target (24 runs of ~2 min
    at the defaults): a proxy_transfer result JSON, or a ``composer transfer`` transfer.json (its patterns trained
    at their own swept rates). Every pattern asked for must have been measured there."""
    try:
        data = json.loads(Path(path).read_text())
        target = data["target"] if "target" in data else transfer_as_target(data)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"--target-losses {path}: not a proxy_transfer result or a transfer.json ({err})") from None
    missing = [p for p in patterns if p not in target.get("losses", {})]
    if missing:
        raise ConfigError(f"--target-losses {path}: no target losses for {', '.join(missing)}")
    info = {key: target.get(key) for key in ("seeds", "tokens", "to", "targets", "validation", "seconds_per_run",
                                             "rates", "search_direction")}
    if target.get("search_scores"):
        info["search_scores"] = {p: target["search_scores"][p] for p in patterns}
    info["targets"] = {p: (info["targets"] or {}).get(p) for p in patterns}
    return {p: target["losses"][p] for p in patterns}, {**info, "losses_from": str(path)}


def transfer_as_target(report: dict) -> dict:
    """A ``composer transfer`` report's target side in this script's shape: losses per seed, in seed order; with
    the scores the search gave its patterns (``search_scores``), where the report kept them."""
    seeds = report["seeds"]
    rows = report["patterns"]
    target = {"seeds": seeds, "tokens": report["tokens"], "to": report["to"],
              "validation": report.get("validation"),
              "targets": {row["source_pattern"]: row["target_pattern"] for row in rows},
              "rates": {row["source_pattern"]: row["lr"] for row in rows},
              "losses": {row["source_pattern"]: [row["losses"][str(s)] for s in seeds] for row in rows}}
    direction = (report.get("search") or {}).get("direction")
    if direction in ("minimize", "maximize") and all(row.get("score") is not None for row in rows):
        target["search_scores"] = {row["source_pattern"]: row["score"] for row in rows}
        target["search_direction"] = direction
    return target


def load_sweep(path: str, patterns: list[str]) -> dict:
    """A ``composer transfer`` lr_sweep.json: its tokens and seed, and each pattern's (rate, loss) points."""
    try:
        report = json.loads(Path(path).read_text())
        points = {p: [(pt["lr"], pt["val_loss"]) for pt in model["points"] if not pt.get("diverged")]
                  for p, model in report["models"].items()}
        sweep = {"tokens": report["tokens"], "seed": report["seed"], "path": str(path)}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"--lr-sweep {path}: not a composer transfer lr_sweep.json ({err})") from None
    missing = [p for p in patterns if not points.get(p)]
    if missing:
        raise ConfigError(f"--lr-sweep {path}: no finished sweep for {', '.join(missing)}")
    return {**sweep, "points": {p: points[p] for p in patterns}}


def sweep_score_row(sweep: dict, patterns: list[str], rates: tuple[float, ...] | None) -> tuple[str, list[float]]:
    """The transfer's lr sweep as a proxy: each pattern at the target's own shape after the sweep's tokens (a
    fraction of the target's), its best loss over ``rates`` (all swept rates when None); the name says where."""
    best = {}
    for pattern in patterns:
        losses = [loss for lr, loss in sweep["points"][pattern]
                  if rates is None or any(math.isclose(lr, rate, rel_tol=1e-6) for rate in rates)]
        if not losses:
            raise ConfigError(f"--sweep-rates: {pattern}'s lr sweep has none of {rates} (it swept "
                              f"{sorted(lr for lr, _ in sweep['points'][pattern])})")
        best[pattern] = min(losses)
    return f"sweep: target shape, {sweep['tokens']:,} tokens", [-best[p] for p in patterns]


def search_score_row(target: dict, patterns: list[str]) -> tuple[list[float], dict[str, list[float]]] | None:
    """The search's own scores of the patterns (a transfer report's), signed higher-is-better, as proxy row
    ``search``: the score that chose them, paired with the re-scored proxies on the same bootstrap draws."""
    scores = target.get("search_scores")
    if not scores:
        return None
    sign = 1.0 if target["search_direction"] == "maximize" else -1.0
    return [sign * scores[p] for p in patterns], {p: [scores[p]] for p in patterns}


def evaluate(proxy: str, pattern: str, seed: int, widths: str) -> dict:
    """One proxy evaluation as `composer search` runs it: ``{"score", "seconds", "details", "direction"}``.

    MAD proxies go through ``evaluate_pattern`` with the evaluator's own budget, widths, precision and compile
    setting, the call ``MadEvaluator`` makes, so that the details keep ``MadResult.details()`` (mad-lab's macro
    accuracy beside plain accuracy), which the evaluator's details do not carry.
    """
    from search.evaluators import make_evaluator

    evaluator_name, _, budget = proxy.partition(":")
    evaluator = make_evaluator(evaluator_name, budget, widths)
    started = time.perf_counter()
    if evaluator_name == "mad":
        from search.mad import BUDGETS, evaluate_pattern

        mad_budget = BUDGETS[evaluator.budget]
        result = evaluate_pattern(pattern, widths=evaluator.widths, tasks=mad_budget.tasks, budget=mad_budget,
                                  seed=seed, precision=evaluator.precision, compile=evaluator.compile)
        score, details = result.score, result.details()
    else:
        evaluation = evaluator(pattern, seed, lambda step, value: None)
        score, details = evaluation.score, evaluation.details
    return {"score": score, "seconds": time.perf_counter() - started, "details": details,
            "direction": evaluator.direction}


def proxy_scores(args, patterns: list[str], out: Path) -> dict[str, dict]:
    """{proxy: {pattern: [{"seed", "score", "seconds", "details"}, ...]}}, cached in proxies.json."""
    path = out / "proxies.json"
    cache = json.loads(path.read_text()) if path.is_file() else {}
    seeds = parse_seeds(args.proxy_seeds)
    todo = [(proxy, pattern, seed) for proxy in args.proxies.split(",") for seed in seeds for pattern in patterns]
    for proxy, pattern, seed in todo:
        entries = cache.setdefault(proxy, {}).setdefault(pattern, [])
        if any(entry["seed"] == seed for entry in entries):
            continue
        entry = {"seed": seed, **evaluate(proxy, pattern, seed, args.widths)}
        entries.append(entry)
        atomic_write_json(path, cache)
        macro = entry["details"].get("macro_score")
        log(f"   proxy {proxy} {pattern} seed {seed}: {entry['score']:.4f}"
            + ("" if macro is None else f" (macro {macro:.4f})") + f" ({entry['seconds']:.1f} s)")
    return cache


def has_macro(entries: dict[str, list[dict]], patterns: list[str]) -> bool:
    """Whether every evaluation of a proxy kept mad-lab's macro accuracy (caches from before it did not)."""
    return all("macro_score" in e.get("details", {}) for p in patterns for e in entries[p])


def has_task_details(entries: dict[str, list[dict]], patterns: list[str], key: str) -> bool:
    """Whether every evaluation kept its per-task accuracies under ``key`` (scores carried over from elsewhere,
    such as a results file's, may hold only the mean)."""
    return all(isinstance(e.get("details", {}).get(key), dict) for p in patterns for e in entries[p])


def mad_task_rows(proxy: str, entries: dict[str, list[dict]], patterns: list[str],
                  key: str = "accuracy") -> dict[str, list[float]]:
    """Per task and per task mix (mean of a subset of tasks) scores of a MAD proxy, averaged over its seeds;
    ``key`` names the accuracy in the details (``accuracy``, or ``macro_accuracy`` for mad-lab's)."""
    tasks = sorted(next(iter(entries.values()))[0]["details"][key])
    rows = {}
    for size in range(1, len(tasks)):
        for mix in itertools.combinations(tasks, size):
            name = f"{proxy} [{'+'.join(mix)}]"
            rows[name] = [sum(sum(e["details"][key][t] for t in mix) / len(mix) for e in entries[p])
                          / len(entries[p]) for p in patterns]
    return rows


def score_variants(proxy: str, entries: dict[str, list[dict]], patterns: list[str]) -> list[tuple[str, dict]]:
    """``(row name, {pattern: [score per seed]})`` for each score a proxy's evaluations carry: the search score,
    and for MAD proxies that kept it, the macro mean (row ``<proxy> macro``)."""
    variants = [(proxy, {p: [e["score"] for e in entries[p]] for p in patterns})]
    if proxy.startswith("mad:") and has_macro(entries, patterns):
        macro = {p: [e["details"]["macro_score"] for e in entries[p]] for p in patterns}
        variants.append((f"{proxy} macro", macro))
    return variants


def select_target_seeds(losses: dict[str, list[float]], target: dict, seeds: list[int]) -> tuple[dict, dict]:
    """The target's losses at ``seeds`` only (a subset of the seeds it trained)."""
    missing = [s for s in seeds if s not in target["seeds"]]
    if missing:
        raise ConfigError(f"--target-seeds: the target has no seed {missing[0]} (it has {target['seeds']})")
    index = [target["seeds"].index(s) for s in seeds]
    return {p: [values[i] for i in index] for p, values in losses.items()}, {**target, "seeds": seeds}


def correlate(scores: list[float], losses: list[list[float]], n_boot: int) -> dict:
    """Rank agreement of ``scores`` (higher is better) with the negated mean target loss."""
    return bootstrap_rank_correlation(scores, losses, n_boot=n_boot)


def main(argv=None) -> int:
    args = parse_args(argv)
    from composer.pattern import parse_pattern

    patterns = [parse_pattern(p) for p in args.patterns.split(",") if p.strip()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    stored = stored_target_losses(args.target_losses, patterns) if args.target_losses else None  # fail first
    sweep = load_sweep(args.lr_sweep, patterns) if args.lr_sweep else None
    log(f"== proxies {args.proxies} on {len(patterns)} patterns")
    proxies = proxy_scores(args, patterns, out)
    if stored is not None:
        log(f"== target: losses of {len(patterns)} patterns from {args.target_losses}")
        losses, target = stored
    else:
        log(f"== target: {len(patterns)} patterns at {args.to}, seeds {args.seeds}, {args.tokens:,} tokens each")
        losses, target = target_losses(args, patterns, out)
    if args.target_seeds:
        losses, target = select_target_seeds(losses, target, [int(s) for s in args.target_seeds.split(",")])
    per_seed = [losses[p] for p in patterns]
    ceiling = noise_ceiling({s: [losses[p][i] for p in patterns] for i, s in enumerate(target["seeds"])})

    rows, signed, scored = [], {}, {}  # signed: each row's scores, higher is better, for the paired comparison
    for proxy in args.proxies.split(","):
        entries = proxies[proxy]
        sign = 1.0 if entries[patterns[0]][0]["direction"] == "maximize" else -1.0
        seconds = sum(e["seconds"] for p in patterns for e in entries[p]) / sum(len(entries[p]) for p in patterns)
        seeds = sorted({e["seed"] for p in patterns for e in entries[p]})
        for name, by_pattern in score_variants(proxy, entries, patterns):
            mean_scores = [sign * sum(by_pattern[p]) / len(by_pattern[p]) for p in patterns]
            agreement = noise_ceiling({s: [next((v for e, v in zip(entries[p], by_pattern[p]) if e["seed"] == s),
                                                None) for p in patterns] for s in seeds})["mean"]
            rows.append({"proxy": name, "seconds_per_candidate": seconds, "proxy_seeds": len(seeds),
                         "proxy_seed_agreement": agreement, **correlate(mean_scores, per_seed, args.n_boot)})
            signed[name], scored[name] = mean_scores, by_pattern
        if proxy.startswith("mad:"):
            keys = ("accuracy", "macro_accuracy") if has_macro(entries, patterns) else ("accuracy",)
            for key in keys:
                if not has_task_details(entries, patterns, key):
                    log(f"   {proxy}: no per-task rows for {key} (some cached scores keep only the mean)")
                    continue
                label = proxy if key == "accuracy" else f"{proxy} macro"
                for name, scores in mad_task_rows(label, entries, patterns, key).items():
                    rows.append({"proxy": name, "seconds_per_candidate": None,
                                 **correlate(scores, per_seed, args.n_boot)})
                    signed[name] = scores
    if sweep is not None:
        rates = parse_rates(args.sweep_rates, "--sweep-rates") if args.sweep_rates else None
        name, scores = sweep_score_row(sweep, patterns, rates)
        independent = sweep["seed"] not in target["seeds"]
        rows.append({"proxy": name, "seconds_per_candidate": None, "proxy_seeds": 1,
                     "sweep_seed_independent_of_target": independent, **correlate(scores, per_seed, args.n_boot)})
        signed[name], scored[name] = scores, {p: [-v] for p, v in zip(patterns, scores)}
    own = search_score_row(target, patterns)
    if own is not None:
        signed["search"], scored["search"] = own
        rows.append({"proxy": "search", "seconds_per_candidate": None, "proxy_seeds": 1,
                     **correlate(own[0], per_seed, args.n_boot)})
    peer = next((r for r in rows if r["proxy"] == args.peer), None)
    if peer is not None:  # every row against the peer on the same bootstrap draws
        paired = compare_rank_correlations(signed, per_seed, reference=args.peer, n_boot=args.n_boot)
        for row in rows:
            versus = paired[row["proxy"]]
            row.update(diff_vs_peer=versus["diff_vs_reference"], diff_vs_peer_ci=versus["diff_ci"],
                       p_better_than_peer=versus["p_better"])
            if row["seconds_per_candidate"]:
                row["candidates_per_hour"] = 3600 / row["seconds_per_candidate"]
                if peer["seconds_per_candidate"]:  # the search's own scores carry no time
                    row["speed_vs_peer"] = peer["seconds_per_candidate"] / row["seconds_per_candidate"]
    result = {
        "patterns": patterns,
        "target": {**target, "losses": losses, "mean_loss": {p: seed_summary(losses[p])["mean"] for p in patterns},
                   "noise_ceiling": ceiling},
        "proxies": rows,
        "proxy_scores": scored,
        "peer": args.peer,
        "wall_time_s": time.perf_counter() - started,
    }
    return finish(out, "proxy_transfer", result, format_table(result), as_json=args.json)


def format_table(result: dict) -> str:
    target = result["target"]
    ceiling = target["noise_ceiling"]["mean"]
    lines = [
        f"target: {len(result['patterns'])} patterns at {target['to']}, {target['tokens']:,} tokens, seeds "
        f"{', '.join(map(str, target['seeds']))}; noise ceiling (Spearman between seeds) "
        f"{'n/a' if ceiling is None else f'{ceiling:+.3f}'}",
        "",
        "| proxy | Spearman | 95% CI | Kendall | 95% CI | Δ Spearman vs peer (paired) | 95% CI | P(better) "
        "| s / candidate | speed vs peer |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["proxies"]:
        def num(key, spec):
            value = row.get(key)
            return "—" if value is None else format(value, spec)

        lines.append(f"| {row['proxy']} | {num('spearman', '+.3f')} | {format_interval(row['spearman_ci'], 3)} | "
                     f"{num('kendall', '+.3f')} | {format_interval(row['kendall_ci'], 3)} | "
                     f"{num('diff_vs_peer', '+.3f')} | {format_interval(row.get('diff_vs_peer_ci'), 3)} | "
                     f"{num('p_better_than_peer', '.2f')} | {num('seconds_per_candidate', '.1f')} | "
                     f"{num('speed_vs_peer', '.2f')} |")
    lines.append(f"\npeer: {result['peer']}, measured in the same run; Δ and P(better): "
                 "paired over the same bootstrap draws")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
