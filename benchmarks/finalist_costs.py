"""The serving cost of a search's finalists and the published layouts, on the models they become at the target.

For each pattern (``NAME:PATTERN`` for a published family, which enters the target in its own layout at the closest
size, ``search.known.layout_at_target``; a bare pattern is stacked): the model at the target, its parameters, KV
cache per token, fixed state, cache per sequence at 4K and 32K tokens (bf16, ``search.cost.serving_cost``) and,
unless ``--no-decode``, decode tokens/s after a 1,024-token prompt at batch 1 (``search.cost.measure_decode``: the
code of ``composer bench-inference``; random weights, one repeat after a warmup, on this machine's threads).

    python benchmarks/finalist_costs.py --target demo-4m SDMMSD nemotron-h:SMSAMS samba:SMWMSM llama:AMAMAM

Writes ``finalist_costs.json`` to ``--out`` and prints a table with each cache's ratio to the first pattern's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composer.errors import ConfigError
from composer.layouts import FAMILIES


def parse_entry(text: str) -> tuple[str | None, str]:
    """``"nemotron-h:SMSAMS"`` -> ``("nemotron-h", "SMSAMS")``; ``"SDMMSD"`` -> ``(None, "SDMMSD")``."""
    name, colon, pattern = text.partition(":")
    if not colon:
        return None, text
    if name not in FAMILIES and name not in ("llama", "composer-paper"):
        raise ConfigError(f"{name!r} is not a published family ({', '.join(FAMILIES)}), llama or composer-paper")
    return name, pattern


def measure(entries: list[str], target: str, decode: bool = True) -> list[dict[str, Any]]:
    from composer.presets import get_preset
    from search.cost import measure_decode, serving_cost
    from search.known import layout_at_target

    widths = get_preset(target).arch
    rows = []
    for entry in entries:
        name, pattern = parse_entry(entry)
        trained, how = layout_at_target(pattern, target, name)
        arch = widths.with_pattern(trained)
        row = {**serving_cost(arch), "name": name, "pattern": pattern, "at_target": trained, "how": how}
        if decode:
            row["decode"] = measure_decode(arch)
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    from composer.accounting import format_bytes

    first = rows[0]["cache_bytes"]
    header = ("| pattern | at the target | layers | params | KV / token | fixed state | cache at 4K | cache at 32K "
              "| vs first at 32K | decode tok/s |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        label = f"`{row['pattern']}`" + (f" ({row['name']})" if row["name"] else "")
        decode = row.get("decode", {}).get("decode_tokens_per_s")
        ratio = row["cache_bytes"]["32768"] / first["32768"] if first["32768"] else float("nan")
        lines.append(f"| {label} | `{row['at_target']}` | {row['n_layers']} | {row['params'] / 1e6:.2f}M | "
                     f"{row['kv_bytes_per_token']:,} B | {format_bytes(row['state_bytes'])} | "
                     f"{format_bytes(row['cache_bytes']['4096'])} | {format_bytes(row['cache_bytes']['32768'])} | "
                     f"x{ratio:.1f} | " + ("-" if decode is None else f"{decode:,.0f}") + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("patterns", nargs="+", help="PATTERN (stacked) or NAME:PATTERN (a family's own layout)")
    parser.add_argument("--target", default="demo-4m", help="preset the patterns grow to (default demo-4m)")
    parser.add_argument("--no-decode", action="store_true", help="the analytic cost only")
    parser.add_argument("--out", default="runs/finalist-costs")
    args = parser.parse_args(argv)
    try:
        rows = measure(args.patterns, args.target, decode=not args.no_decode)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "finalist_costs.json").write_text(json.dumps({"target": args.target, "rows": rows}, indent=2))
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
