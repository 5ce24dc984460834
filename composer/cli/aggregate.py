"""``composer aggregate``: vote one pattern out of a search's top cluster; print it and the members voting."""

from __future__ import annotations

import argparse
from pathlib import Path

from composer.cli.format import old_spelling, print_json, print_rows, print_table
from composer.errors import ConfigError
from composer.files import atomic_write_json

DEFAULT_OUT = "runs/search"  # composer search's default --out


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "aggregate",
        help="aggregate a search into one pattern (top K-means cluster + per-layer vote)",
        description="Take the top cluster of a 1-D K-means over the scores of a search's completed trials "
        "and vote one pattern layer by layer (N_c clustering: c=0 per-layer majority, c=1 given the previous "
        "layer, c=all given the whole prefix). Reads a `composer search --out DIR` (its study, else "
        "leaderboard.json), a leaderboard.json, or an Optuna storage; writes aggregate.json next to the "
        "search results.",
    )
    parser.add_argument("source", nargs="?", help="search output directory, leaderboard.json, study.db or "
                        f"storage URL (default: --out, else {DEFAULT_OUT})")
    parser.add_argument("--out", metavar="DIR",
                        help="the search output directory: read when no SOURCE is given; aggregate.json is "
                        "written here (default: the source's directory)")
    parser.add_argument("--storage", metavar="URL",
                        help="Optuna storage URL to read instead of a directory (with --study)")
    parser.add_argument("--study", metavar="NAME",
                        help="study name (default: the one the search recorded, or the only one)")
    parser.add_argument("--c", default="0", metavar="C",
                        help="previous layers that must match: 0 (default: per-layer majority), 1, .., all")
    old_spelling(parser, "--k", parser.add_argument("--clusters", dest="k", type=int, default=5,
                                                    help="K-means clusters over the scores (default 5)"))
    parser.add_argument("--direction", choices=("maximize", "minimize"),
                        help="whether higher or lower scores are better (default: the study's own)")
    parser.add_argument("--json", action="store_true", help="print the aggregation as one JSON object")
    parser.set_defaults(handler=run)


def _source_and_target(args: argparse.Namespace) -> tuple[str, Path | None]:
    """What to read, and the directory aggregate.json goes to (None: a database server with no --out)."""
    if args.source and args.storage:
        raise ConfigError("give either SOURCE or --storage, not both")
    source = args.source or args.storage or args.out or DEFAULT_OUT
    if args.out:
        return source, Path(args.out)
    if source.startswith(("sqlite:///", "journal:")):
        return source, Path(source.removeprefix("sqlite:///").removeprefix("journal:")).parent
    if "://" in source:
        return source, None
    path = Path(source)
    return source, path if path.is_dir() else path.parent


def _write(target: Path, data: dict) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    return atomic_write_json(target / "aggregate.json", data)


def _describe(source: dict, excluded: dict[str, int]) -> str:
    where = (f"study {source['study']!r} in {source['storage']}" if source.get("kind") == "storage"
             else source.get("path", "?"))
    left_out = ", ".join(f"{n} {reason}" for reason, n in excluded.items())
    return where + (f"; not voting: {left_out} trial(s)" if left_out else "")


def _summary(result, written: Path | None) -> None:
    top = result.clusters[result.top_cluster]
    votes = "  ".join(
        f"{vote.symbol} {vote.votes[vote.symbol]}/{vote.supporters}" + ("*" if vote.tie_break else "")
        for vote in result.layers
    )
    own = (f"{result.score:.4f} (scored in the search)" if result.score is not None
           else "not scored in the search: train it to compare")
    c = "all" if result.c == "all" else result.c
    print_rows([
        ("aggregated", f"{result.pattern}  ({result.compact})"),
        ("method", f"N_{c} vote over the top cluster: {len(result.members)} of {result.population} scored "
                   f"patterns, scores {top.low:.4f}..{top.high:.4f} (k={result.k_used}"
                   + (f" of {result.k} requested" if result.k_used < result.k else "") + ")"),
        ("score", own),
        ("best trial", f"{result.best.pattern}  {result.best.score:.4f}"),
        ("layer votes", votes),
        ("read", _describe(result.source, result.excluded)),
    ])
    if any(vote.tie_break for vote in result.layers):
        breaks = ", ".join(f"layer {v.position}: {v.tie_break}" for v in result.layers if v.tie_break)
        print(f"* tie broken by {breaks}")
    print()
    rows = [[str(rank), member.pattern, f"{member.score:.4f}",
             ",".join(map(str, result.trials.get(member.pattern, ()))) or "-"]
            for rank, member in enumerate(result.members, start=1)]
    print_table(["#", "member", "score", "trials"], rows)
    if written:
        print(f"\nwrote {written}")


def run(args: argparse.Namespace) -> int:
    from search.aggregate import aggregate

    if args.c != "all" and not args.c.isdigit():
        raise ConfigError(f"--c must be a non-negative integer or 'all', got {args.c!r}")
    source, target = _source_and_target(args)
    result = aggregate(source, c=args.c if args.c == "all" else int(args.c), k=args.k, study=args.study,
                       direction=args.direction)
    data = result.to_dict()
    written = _write(target, data) if target is not None else None
    if args.json:
        print_json({**data, "written": str(written) if written else None})
    else:
        _summary(result, written)
    return 0
