"""``composer extrapolate PATTERN --target PRESET``: grow a searched pattern to a target size (stacking or stretching)."""

from __future__ import annotations

import argparse
import re

from composer.accounting import analyze
from composer.cli.equal_cost import add_equal_cost_flags, cost_rows, equal_cost_of
from composer.cli.format import RenamedFlag, human, old_spelling, print_json, print_rows, print_table
from composer.cli.parsing import layers_or_family, seed_number
from composer.errors import ConfigError
from composer.pattern import layers, n_layers
from composer.presets import PRESETS
from primitives.registry import REGISTRY

_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
_COUNT = re.compile(r"([0-9][0-9_,]*(?:\.[0-9]+)?(?:[eE][0-9]+)?)\s*([KMBGT]?)", re.IGNORECASE)


def parse_count(text: str) -> int:
    """``"973146112"``, ``"973_146_112"``, ``"1e9"``, ``"1.2B"``, ``"350M"`` -> an integer number of parameters."""
    match = _COUNT.fullmatch(text.strip())
    if not match:
        raise ConfigError(f"--params must be a number of parameters such as 973146112, 1e9 or 1.2B, got {text!r}")
    number, suffix = match.groups()
    value = round(float(number.replace("_", "").replace(",", "")) * _SUFFIXES[suffix.upper()])
    if value <= 0:
        raise ConfigError(f"--params must be positive, got {text!r}")
    return value


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "extrapolate",
        help="grow a searched pattern to a target model size (stacking or stretching)",
        description=(
            "Extrapolate a small searched pattern to the size of a target model at its widths (docs/method.md): "
            "'stack' repeats the pattern and fills the remainder with a shrunk copy, 'stretch' scales every run "
            "of one primitive, 'auto' stacks patterns of at most 8 layers and stretches longer ones. Size is "
            "non-embedding parameters at the target widths."
        ),
    )
    parser.add_argument("pattern", metavar="PATTERN", nargs="?",
                        help="the searched pattern, e.g. 'AAMMMM' or '2A4M' (or --from-search)")
    parser.add_argument("--from-search", metavar="DIR",
                        help="grow a finished composer search's answer (DIR is its --out: best.json's recommended "
                        "pattern) by the search's --attention-at-target rule unless --attention-at-target is given")
    parser.add_argument(
        "--target", metavar="PRESET",
        help=f"target preset (required): its widths, and its size unless --params is given ({', '.join(PRESETS)})",
    )
    parser.add_argument("--to", dest="target", action=RenamedFlag, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser.add_argument(
        "--params", metavar="N",
        help="target size in non-embedding parameters (e.g. 973146112, 1e9, 1.2B); default: the preset's own",
    )
    parser.add_argument("--method", choices=("stack", "stretch", "auto"), default="auto", help="default: auto")
    parser.add_argument(
        "--rounding", choices=("ceil", "nearest"), default="ceil",
        help="ceil: the paper's rule, never below the target (default); nearest: within half a layer of it",
    )
    old_spelling(parser, "--attention", parser.add_argument(
        "--attention-at-target", dest="attention", choices=("repeat", "keep"), default=None,
        help="repeat: full-attention layers grow with the pattern (default, or the search's rule with "
             "--from-search); keep: as many as the pattern has, at "
             "the middles of the grown model (Nemotron-H's placement), the other layers grown to the rest of the size",
    ))
    old_spelling(parser, "--depth", parser.add_argument(
        "--depth-at-target", dest="depth", metavar="N|FAMILY", default=None, type=layers_or_family,
        help="grow to exactly N layers (or a family's own depth at the target, e.g. nemotron-h) by width: d_model, "
             "heads and the MLP's width scaled together until the model weighs the target's size (composer.widths); "
             "default: by depth at the target's widths (the search's --depth-at-target with --from-search)",
    ))
    add_equal_cost_flags(parser)
    parser.add_argument(
        "--baselines", action="store_true",
        help="also list the matched baselines (Llama, Sandwich, striped 1:2, random) at the target widths",
    )
    parser.add_argument("--seed", type=seed_number, default=0, help="seed of the random baseline (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def _baselines(arch, seed: int, reference: int) -> dict[str, dict]:
    from scaling.matching import DEFAULT_NAMES, matched_baselines

    # The sandwich is an attention/MLP construction: leave it out for composites of other primitives.
    names = [n for n in DEFAULT_NAMES if n != "sandwich" or set(arch.counts) <= {"A", "M"}]
    out = {}
    for name, baseline in matched_baselines(arch, names, seed=seed, reference=reference).items():
        stats = analyze(baseline)
        out[name] = {
            "pattern": stats.pattern,
            "compact": stats.compact,
            "n_layers": stats.n_layers,
            "counts": stats.counts,
            "params": stats.params,
            "non_embedding_params": stats.non_embedding_params,
            "kv_cache_bytes_per_token": stats.kv_cache_bytes_per_token,
        }
    return out


def check_grown(result, pattern: str, target: str, sized: bool) -> None:
    """Refuse an extrapolation that shrinks the pattern: the extrapolator grows a searched pattern to a larger
    model, and below one copy of it every run is cut short, so what it printed was no longer the pattern searched
    (issue 47: ``AAMMMM --to tiny`` printed the 5-layer AAMMM, exit 0, without a word). ``sized``: the target's
    size came from --params."""
    if result.n_layers >= n_layers(result.source_pattern):
        return
    size = f"--params {result.target_non_embedding_params:,}" if sized else (
        f"{target}'s {result.target_non_embedding_params:,}")
    raise ConfigError(f"{pattern} already has {result.source_non_embedding_params:,} non-embedding parameters at "
                      f"{target}'s widths, more than {size}: extrapolating would shrink it to {result.n_layers} layers "
                      f"({result.pattern}) and drop part of it; give a larger --target preset or --params of at least "
                      f"{result.source_non_embedding_params:,}, or train {pattern} as it is (composer train --arch "
                      f"{pattern} --preset {target})")


def searched(args: argparse.Namespace) -> dict | None:
    """With --from-search: the search's answer as ``args.pattern`` and its growth rule as ``args.attention`` (unless
    given), and what was taken from where; else None. A PATTERN beside --from-search, or neither, is refused."""
    if args.from_search is None:
        if args.pattern is None:
            raise ConfigError("give the PATTERN to grow, or --from-search DIR for a finished search's answer")
        args.attention = args.attention or "repeat"
        return None
    if args.pattern is not None:
        raise ConfigError(f"--from-search grows the search's answer: drop the pattern {args.pattern}, or drop "
                          "--from-search to grow that pattern")
    from search.growth import known_growth_note
    from search.results import answer_of

    answer = answer_of(args.from_search)
    args.pattern = answer["pattern"]
    why = ("--attention-at-target" if args.attention
           else f"the search's --attention-at-target {answer['attention_at_target']}")
    args.attention = args.attention or answer["attention_at_target"]
    note = known_growth_note(answer["pattern"], answer["known"], args.attention)
    if note:
        why += f"; {note}"
    if args.depth is None and answer.get("depth_at_target") is not None:
        args.depth = str(answer["depth_at_target"])
    return {"out": answer["out"], "answer": answer["answer"], "pattern": answer["pattern"], "known": answer["known"],
            "attention": args.attention, "attention_from": why, "equal_cost_rule": answer.get("equal_cost_rule")}


def run(args: argparse.Namespace) -> int:
    from search.growth import depth_at_target, grow

    if args.target is None:
        raise ConfigError("give --target PRESET, the preset to grow the pattern to (composer presets lists them)")
    source = searched(args)
    target_params = None if args.params is None else parse_count(args.params)
    depth = None if args.depth is None else depth_at_target(args.depth, args.target)
    rule = equal_cost_of(args, source)  # --equal-cost, or the search's own with --from-search
    # the one rule every command grows a search's answer by (search.growth.grow): a published family answer in its
    # own layout, a new pattern by --attention-at-target, by depth or, with --depth-at-target, by width; with
    # --equal-cost at the widest widths within the reference family's cost
    grown = grow(args.pattern, args.target, source["known"] if source else None, args.attention, depth,
                 target_params=target_params, method=args.method, rounding=args.rounding, equal_cost=rule)
    result = grown.extrapolation
    if depth is None and rule is None:
        check_grown(result, args.pattern, args.target, args.params is not None)
    data = result.to_dict()
    if source is not None:
        data["from_search"] = source
    if grown.cost is not None:
        data["equal_cost"] = grown.cost
    # Llama and striped are matched to the extrapolation's target size (the preset's own unless --params).
    baselines = _baselines(result.arch, args.seed, result.target_non_embedding_params) if args.baselines else None
    if args.json:
        if baselines is not None:
            data["baselines"] = baselines
        print_json(data)
        return 0
    kept = result.kept_attention
    mixers = "".join(token for token in layers(result.source_pattern) if token not in kept)
    if result.method in ("family", "equal-cost"):
        how = grown.how
    elif result.method == "depth":
        how = (f"depth: {mixers} laid out at {result.depth} layers, widths scaled x{result.scale:.3f} to the "
               f"target's size ({result.target}): {grown.sizes()}")
    elif result.method == "stack":
        remainder = result.scale - result.repeats
        how = f"stack: {result.repeats} x {mixers} + remainder stretched x{remainder:.4f}"
    else:
        how = f"stretch: {mixers}, every run x{result.scale:.4f}"
    if kept:
        how += f", then its {len(kept)} attention layer{'s' if len(kept) != 1 else ''} at the middles"
    counts = ", ".join(f"{symbol} {n} ({REGISTRY.get(symbol).name})" for symbol, n in result.counts.items())
    target = result.target_non_embedding_params
    origin = f"{args.target}'s own" if args.params is None else f"--params, at {args.target} widths"
    if rule is not None:
        origin = f"{args.target}'s own; grown to {rule.reference}'s cost, not to this size"
    print_rows(
        ([("from search", f"{source['out']}: answer {source['answer'] or '-'}, {source['pattern']}"
           + (f" ({source['known']})" if source["known"] else "") + f"; attention {source['attention']} "
           f"({source['attention_from']})")] if source else [])
        + [
            ("pattern", result.pattern),
            ("compact", result.compact),
            ("method", f"{how}, rounding {result.rounding}"),
            ("layers", f"{result.n_layers}: {counts}"),
            ("widths", ", ".join(f"{key} {value}" for key, value in data["widths"].items())
             + (f" (preset {result.target})" if result.target else "")),
            ("params", f"{data['params']:,} ({human(data['params'])})"),
            ("non-embedding", f"{result.non_embedding_params:,} ({human(result.non_embedding_params)})"),
            ("target", f"{target:,} non-embedding ({origin})"),
            ("difference", f"{result.difference:+,} ({result.relative_error:+.2%}), bound {result.bound:,}"),
            ("KV cache/token", f"{data['kv_cache_bytes_per_token']:,} bytes (bf16)"),
            *cost_rows(grown),
        ]
    )
    if baselines is not None:
        print()
        rows = [
            [
                name,
                row["compact"],
                str(row["n_layers"]),
                " ".join(f"{s}{n}" for s, n in row["counts"].items()),
                f"{row['non_embedding_params']:,}",
                f"{(row['non_embedding_params'] - result.non_embedding_params) / result.non_embedding_params:+.2%}",
                f"{row['kv_cache_bytes_per_token']:,}",
            ]
            for name, row in baselines.items()
        ]
        print_table(["baseline", "compact", "layers", "counts", "non-embedding", "vs composite", "KV B/token"], rows)
    return 0
