"""Which layouts of a search space cost no more than a published family: the space an equal-cost search can answer
from, before anything trains.

Why: ``composer search --max-latency known --min-throughput known --max-kv ...`` skips every candidate whose model
at the target costs more than the known layouts. Whether *any* layout of ``AMSD`` gets there decides whether an
equal-cost search can find a new answer at all, and the cost model says so for the whole space in a minute, on
this CPU and on H200 at 1B. This script grows every pattern of the space as the search grows it
(``search.growth.Growth``: ``--attention-at-target``, ``--depth-at-target``), costs its model with
``composer.costmodel`` (decode ms per token at batch 1, training tokens/s; the CPU constants fitted on this machine, the GPU's decode constants assumed)
and its cache analytically, and counts the patterns no worse than the family on each axis and on all of them.
It also places the finalists of a search (``--finalists``) on those axes.

    python benchmarks/equal_cost_space.py --primitives AMSD --attention-at-target keep --max-kv 10MiB@32K \\
        --against nemotron-h --finalists SADDDD,SDDADM,SDDMSM --json out.json
    python benchmarks/equal_cost_space.py ... --depth-at-target nemotron-h      # every model at the family's own depth
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from composer.cli.format import old_spelling
from composer.errors import ConfigError
from composer.files import atomic_write_json

CPU_CONTEXT = 1_024  # the cpu ladder's longest measured decode context (128 x 8)
GPU_CONTEXT = 4_096
CACHE_AT = 32_768


def costs(arch, device: str, context: int) -> dict[str, float]:
    from composer.accounting import analyze
    from composer.costmodel import predict_decode, predict_train

    return {
        "decode_ms": predict_decode(arch, device, context=min(context, arch.max_seq_len - 1)).ms_per_token,
        "train_tokens_per_s": predict_train(arch, device).tokens_per_s,
        "cache_bytes": analyze(arch, seq_len=CACHE_AT).cache_bytes_per_sequence,
    }


def costed(pattern: str, known: str | None, growth, target: str, scale: str, scale_growth) -> dict[str, Any]:
    """The pattern's models at the target (CPU, modeled) and at the scale (H200, modeled)."""
    from search.cost import keeps_every_token

    at_target = growth.grow(pattern, target, known).arch
    at_scale = scale_growth.grow(pattern, scale, known).arch
    return {
        "pattern": pattern,
        "known": known,
        "layers": at_target.n_layers,
        "d_model": at_target.d_model,
        "layers_at_scale": at_scale.n_layers,
        "d_model_at_scale": at_scale.d_model,
        "recalls": keeps_every_token(at_target, 1_024),
        "cpu": costs(at_target, "cpu", CPU_CONTEXT),
        "h200": costs(at_scale, "h200", GPU_CONTEXT),
    }


def no_worse(mine: dict[str, float], theirs: dict[str, float]) -> dict[str, bool]:
    return {
        "decode": mine["decode_ms"] <= theirs["decode_ms"],
        "throughput": mine["train_tokens_per_s"] >= theirs["train_tokens_per_s"],
        "cache": mine["cache_bytes"] <= theirs["cache_bytes"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--primitives", default="AMSD")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--target", default="demo-4m")
    parser.add_argument("--scale", default="llama-3.2-1b", help="the size the H200 figures are modeled at")
    # the flags' names are composer search's (docs/usage/vocabulary.md); the old ones still work, with a notice
    old_spelling(parser, "--attention", parser.add_argument(
        "--attention-at-target", dest="attention", choices=("repeat", "keep"), default="keep"))
    old_spelling(parser, "--depth", parser.add_argument(
        "--depth-at-target", dest="depth",
        help="a family's name: every model at its own depth at each size (default: by depth at the widths)"))
    parser.add_argument("--max-kv", default="10MiB@32K")
    parser.add_argument("--against", default="nemotron-h", help="the family every pattern is held against")
    parser.add_argument(
        "--finalists", default="", help="comma-separated patterns to place (a search's finalists)"
    )
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    try:
        result = survey(args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    family = result["family"]
    print(
        f"{args.against} at {args.target}: {family['layers']} layers, CPU decode {family['cpu']['decode_ms']:.2f} ms, "
        f"train {family['cpu']['train_tokens_per_s']:,.0f} tok/s, cache {family['cpu']['cache_bytes'] / 2**20:.2f} "
        f"MiB; at {args.scale} on H200 {family['layers_at_scale']} layers, decode {family['h200']['decode_ms']:.3f} "
        f"ms, train {family['h200']['train_tokens_per_s']:,.0f} tok/s"
    )
    for line in result["lines"]:
        print(line)
    if args.json:
        atomic_write_json(Path(args.json), result)
    return 0


def survey(args) -> dict[str, Any]:
    from composer.pattern import layers
    from search.config import SearchConfig
    from search.cost import parse_max_kv
    from search.growth import Growth, depth_at_target
    from search.known import family_at_depth
    from search.strategies.base import make_space

    config = SearchConfig(primitives=args.primitives, layers=args.layers)
    patterns = make_space(config, args.layers).enumerate()
    growth = Growth(args.attention, depth_at_target(args.depth, args.target) if args.depth else None)
    scale_growth = Growth(args.attention, depth_at_target(args.depth, args.scale) if args.depth else None)
    fit = family_at_depth(args.against, args.layers).pattern
    family = costed(fit, args.against, growth, args.target, args.scale, scale_growth)
    limit, _ = parse_max_kv(args.max_kv)
    rows = [costed(p, None, growth, args.target, args.scale, scale_growth) for p in patterns]
    within = [row for row in rows if row["cpu"]["cache_bytes"] <= limit and row["recalls"]]
    counts: dict[str, dict[str, int]] = {}
    admitted: dict[str, list[str]] = {}
    for device in ("cpu", "h200"):
        sides = [no_worse(row[device], family[device]) for row in within]
        counts[device] = {
            axis: sum(side[axis] for side in sides) for axis in ("decode", "throughput", "cache")
        }
        both = [row["pattern"] for row, side in zip(within, sides) if side["decode"] and side["throughput"]]
        counts[device]["decode_and_throughput"] = len(both)
        admitted[device] = both
    placed = []
    for pattern in filter(None, args.finalists.split(",")):
        row = costed(pattern, None, growth, args.target, args.scale, scale_growth)
        placed.append(
            {
                **row,
                "ratios": {
                    device: {
                        "decode": row[device]["decode_ms"] / family[device]["decode_ms"],
                        "throughput": row[device]["train_tokens_per_s"]
                        / family[device]["train_tokens_per_s"],
                        "cache": row[device]["cache_bytes"] / family[device]["cache_bytes"],
                    }
                    for device in ("cpu", "h200")
                },
            }
        )
    lines = [
        f"{len(patterns):,} patterns of {args.layers} over {args.primitives}; {len(within):,} within --max-kv "
        f"{args.max_kv} with a layer that keeps every token of 1,024 (growth: attention {args.attention}, "
        f"depth {args.depth or 'by size'})"
    ]
    for device, where in (
        ("cpu", f"this CPU at {args.target} (modeled)"),
        ("h200", f"H200 at {args.scale} (modeled)"),
    ):
        c = counts[device]
        lines.append(
            f"  on {where}: no slower to decode than {args.against} {c['decode']:,}; no slower to train "
            f"{c['throughput']:,}; both {c['decode_and_throughput']:,}"
            + (f" (e.g. {', '.join(admitted[device][:6])})" if admitted[device] else "")
        )
    for row in placed:
        r = row["ratios"]
        lines.append(
            f"  {row['pattern']}: {row['layers']} layers at {args.target}, decode {r['cpu']['decode']:.2f}x, "
            f"train {r['cpu']['throughput']:.2f}x, cache {r['cpu']['cache']:.2f}x; at {args.scale} on H200 "
            f"{row['layers_at_scale']} layers, decode {r['h200']['decode']:.2f}x, train "
            f"{r['h200']['throughput']:.2f}x"
        )
    share = {
        symbol: sum(layers(p).count(symbol) for p in admitted["cpu"]) for symbol in layers(args.primitives)
    }
    return {
        "settings": vars(args),
        "family": family,
        "patterns": len(patterns),
        "within_max_kv_and_recall": len(within),
        "counts": counts,
        "admitted": admitted,
        "admitted_symbol_counts_cpu": share,
        "finalists": placed,
        "lines": lines,
    }


if __name__ == "__main__":
    sys.exit(main())
