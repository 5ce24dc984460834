"""``composer families``: the published hybrid layouts usable wherever a pattern is (composer/layouts.py)."""

from __future__ import annotations

import argparse
import sys

from composer.accounting import analyze
from composer.cli.format import human, print_json, print_table
from composer.layouts import FAMILIES
from composer.presets import default_preset_note, family_architecture, get_preset

DEFAULT_WIDTHS = "llama-3.2-1b"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "families",
        help="list the published hybrid families (jamba, samba, nemotron-h, ...)",
        description="Published hybrid layouts, each usable as an architecture (composer info jamba, composer train "
                    "--arch samba, jamba:64 for a named depth) and as a pipeline baseline. Sizes are shown at "
                    "--preset widths, at the depth matching that preset's size.",
    )
    parser.add_argument("--preset", help=f"widths to size them at (default {DEFAULT_WIDTHS}, printed)")
    parser.add_argument("--json", action="store_true", help="print a JSON array")
    parser.set_defaults(handler=run)


def describe(preset: str = DEFAULT_WIDTHS) -> list[dict]:
    base = get_preset(preset).arch
    rows = []
    for family in FAMILIES.values():
        arch = family_architecture(family.name, base)
        stats = analyze(arch)
        rows.append({"name": family.name, "layout": family.fact, "source": family.source,
                     "period": family.generator(family.period), "preset": preset, "pattern": arch.compact,
                     "n_layers": arch.n_layers, "params": stats.params,
                     "non_embedding_params": stats.non_embedding_params, "active_params": stats.active_params,
                     "kv_cache_bytes_per_token": stats.kv_cache_bytes_per_token})
    return rows


def run(args: argparse.Namespace) -> int:
    if args.preset is None:
        print(default_preset_note(DEFAULT_WIDTHS, "the widths the families are sized at"), file=sys.stderr)
        args.preset = DEFAULT_WIDTHS
    rows = describe(args.preset)
    if args.json:
        print_json(rows)
        return 0
    print_table(["name", "period", f"at {args.preset}", "layers", "params", "active", "KV B/token", "source"],
                [[r["name"], r["period"], r["pattern"], str(r["n_layers"]), human(r["params"]),
                  human(r["active_params"]), f"{r['kv_cache_bytes_per_token']:,}", r["source"]] for r in rows])
    print()
    for r in rows:
        print(f"{r['name']}: {r['layout']}")
    return 0
