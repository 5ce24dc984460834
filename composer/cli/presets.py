"""``composer presets``: the named architectures with their widths and parameter counts."""

from __future__ import annotations

import argparse

from composer.accounting import analyze
from composer.cli.format import human, print_json, print_table
from composer.presets import PRESETS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "presets", help="list the named presets", description="List presets with widths and parameter counts."
    )
    parser.add_argument("--json", action="store_true", help="print a JSON array")
    parser.set_defaults(handler=run)


def describe() -> list[dict]:
    rows = []
    for preset in PRESETS.values():
        arch = preset.arch
        stats = analyze(arch)
        rows.append(
            {
                "name": preset.name,
                "description": preset.description,
                "source": preset.source,
                "pattern": arch.compact,
                "n_layers": arch.n_layers,
                "params": stats.params,
                "non_embedding_params": stats.non_embedding_params,
                **{key: value for key, value in arch.to_dict().items() if key not in ("pattern", "options")},
            }
        )
    return rows


def run(args: argparse.Namespace) -> int:
    rows = describe()
    if args.json:
        print_json(rows)
        return 0
    header = ["name", "pattern", "params", "non-emb", "d_model", "heads/kv x dim", "ffn", "vocab", "tied"]
    table = [
        [
            r["name"], r["pattern"], human(r["params"]), human(r["non_embedding_params"]), str(r["d_model"]),
            f"{r['n_heads']}/{r['n_kv_heads']} x {r['head_dim']}", str(r["ffn_dim"]), str(r["vocab_size"]),
            "yes" if r["tie_embeddings"] else "no",
        ]
        for r in rows
    ]
    print_table(header, table)
    return 0
