"""What a search's finalists and the published layouts cost, on the models they become: measured on this machine
at one target, and predicted by the cost model for the devices and sizes they will train and serve at.

For each entry (``NAME:PATTERN`` for a published family, which enters the target in its own layout at the
closest size, ``search.growth.grow``; ``PATTERN:keep`` grows a new pattern with its attention layers
kept, as ``composer search --attention-at-target keep``; a bare pattern is stacked; ``ENTRY@N`` or
``ENTRY@FAMILY`` grows it to N layers, or the family's own depth, by width, as ``--depth-at-target`` does):

* at ``--target`` (default demo-4m): the analytic cost (parameters, KV cache per token, fixed state, cache per
  sequence at 4K and 32K tokens, bf16: ``search.cost.serving_cost``) and, unless ``--no-measure``, the measured
  cost (``composer.evaluation.bench_cost.measure_cost``: training and prefill tokens/s, ms per decode step at
  batch 1 and 64 after ``--seq-len`` tokens and 8x it, peak memory; each with repeats and spread) beside the cost
  model's prediction for this machine (``--device-here``, default ``cpu``) and the ratio of each to the first
  entry's;
* for each ``--predict DEVICE@PRESET`` (e.g. ``h200@llama-3.2-1b``): the entry grown to that preset by the same
  rule, and the cost model's training tokens/s and decode ms per token at batch 1 and 64 after 4,096 tokens
  (``composer.costmodel.serving_summary``, what ``composer info --device`` prints).

    python benchmarks/finalist_costs.py --target demo-4m SADDDD:keep nemotron-h:SMSAMS samba:SMWMSM llama:AMAMAM \\
        SDDDMM --predict h200@llama-350m --predict h200@llama-3.2-1b --out runs/finalist-costs

Writes ``finalist_costs.json`` to ``--out`` and prints a table per target, each figure's ratio to the first
entry's beside it.
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

GROWTH_RULES = ("keep", "repeat")


def parse_entry(text: str) -> tuple[str | None, str, str]:
    """``"nemotron-h:SMSAMS"`` -> ``("nemotron-h", "SMSAMS", "repeat")``; ``"SADDDD:keep"`` -> ``(None, "SADDDD",
    "keep")``; ``"SDMMSD"`` -> ``(None, "SDMMSD", "repeat")``."""
    head, colon, tail = text.partition(":")
    if not colon:
        return None, text, "repeat"
    if tail in GROWTH_RULES:
        return None, head, tail
    if head not in FAMILIES and head not in ("llama", "composer-paper"):
        raise ConfigError(f"{head!r} is not a published family ({', '.join(FAMILIES)}), llama or composer-paper, "
                          f"nor {tail!r} a growth rule ({', '.join(GROWTH_RULES)})")
    return head, tail, "repeat"


def parse_prediction(text: str) -> tuple[str, str]:
    """``"h200@llama-3.2-1b"`` -> ``("h200", "llama-3.2-1b")``."""
    from composer.costmodel import device_names, load_table
    from composer.presets import get_preset

    device, at, preset = text.partition("@")
    if not at or device not in device_names():
        raise ConfigError(f"--predict takes DEVICE@PRESET with DEVICE one of {', '.join(device_names())}, got "
                          f"{text!r}")
    load_table().device(device).warn_if_elsewhere()
    get_preset(preset)  # a one-line error naming the presets
    return device, preset


def model_at(entry: str, preset: str):
    """The architecture ``entry`` becomes at ``preset`` and how it was made. ``ENTRY@DEPTH`` grows it to that many
    layers (or a family's own depth at ``preset``) by width (``search.growth.grow``)."""
    from search.growth import depth_at_target, grow

    text, _, depth = entry.partition("@")
    name, pattern, rule = parse_entry(text)
    grown = grow(pattern, preset, name, rule, depth_at_target(depth or None, preset))
    return name, pattern, grown.arch, grown.how


def measure(entries: list[str], target: str, seq_len: int = 128, measured: bool = True,
            device_here: str = "cpu", train_batch: int = 16, compile: bool = False,
            precision: str | None = None) -> list[dict[str, Any]]:
    """Each entry's model at ``target``: its analytic cost, and with ``measured`` its measured cost on this
    machine (the search's harness and statistic, in ``precision``: None for the device's default) beside the cost
    model's prediction for ``device_here``."""
    from composer.costmodel import serving_summary
    from composer.evaluation.bench_cost import CostGrid, measure_cost
    from search.cost import serving_cost

    grid = CostGrid(train_batch=train_batch, seq_len=seq_len, compile_decode=compile, precision=precision)
    rows = []
    for entry in entries:
        name, pattern, arch, how = model_at(entry, target)
        row = {**serving_cost(arch), "name": name, "pattern": pattern, "entry": entry, "at_target": arch.pattern,
               "how": how}
        if measured:
            print(f"measuring {entry} at {target} ({arch.n_layers} layers) ...", file=sys.stderr, flush=True)
            row["measured"] = measure_cost(arch, grid)
            contexts = list(row["measured"]["decode_ms_per_token"]["1"])
            row["predicted_here"] = {
                "device": device_here,
                "train_tokens_per_s": _predicted_train(arch, device_here, row["measured"]),
                "decode_ms_per_token": {
                    batch: {context: _predicted_decode(arch, device_here, int(batch), int(context))
                            for context in contexts}
                    for batch in row["measured"]["decode_ms_per_token"]},
            }
        row["serving_summary_here"] = serving_summary(arch, device_here, context=min(4_096, arch.max_seq_len - 1))
        rows.append(row)
    return rows


def _predicted_train(arch, device: str, measured: dict[str, Any]) -> float:
    """The model's training tokens/s at the shape ``measured`` ran (the CPU cuts the batch)."""
    from composer.costmodel import predict_train

    shape = measured["train_tokens_per_s"]
    return predict_train(arch, device, batch=shape["batch"], seq_len=shape["seq_len"]).tokens_per_s


def _predicted_decode(arch, device: str, batch: int, context: int) -> float:
    from composer.costmodel import predict_decode

    return predict_decode(arch, device, context=context, batch=batch).ms_per_token


def predict_at(entries: list[str], device: str, preset: str) -> list[dict[str, Any]]:
    """The cost model's serving summary of every entry grown to ``preset``, on ``device``."""
    from composer.accounting import analyze
    from composer.costmodel import serving_summary

    rows = []
    for entry in entries:
        name, pattern, arch, how = model_at(entry, preset)
        stats = analyze(arch, seq_len=32_768)
        summary = serving_summary(arch, device)
        rows.append({"entry": entry, "name": name, "pattern": pattern, "at_target": arch.pattern, "how": how,
                     "n_layers": arch.n_layers, "params": stats.params,
                     "cache_bytes_32k": stats.cache_bytes_per_sequence,
                     "train_tokens_per_s": summary["train_tokens_per_s"],
                     "decode_ms_per_token": summary["decode_ms_per_token"], "context": summary["context"],
                     "decode_bound": summary["decode_bound"], "train_shape": [summary["train_batch"],
                                                                               summary["train_seq_len"]]})
    return rows


def _ratio(value: float | None, first: float | None) -> str:
    return "" if not value or not first else f" ({value / first:.2f}x)"


def measured_table(rows: list[dict[str, Any]]) -> str:
    """Measured figures at the target beside the model's prediction for this machine, ratios to the first row."""
    from composer.accounting import format_bytes

    first = rows[0]
    long = max(first["measured"]["decode_ms_per_token"]["1"], key=int)
    lines = [f"| layout | at the target | layers | cache at 32K | train tok/s (model) | decode ms b1@{long} (model) "
             f"| decode ms b64@{long} (model) | peak train memory |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        m, p = row["measured"], row["predicted_here"]
        train = m["train_tokens_per_s"]["median"]
        cells = []
        for batch in ("1", "64"):
            figure = m["decode_ms_per_token"].get(batch, {}).get(long)
            base = first["measured"]["decode_ms_per_token"].get(batch, {}).get(long)
            if figure is None:
                cells.append("-")
                continue
            cells.append(f"{figure['median']:.2f}{_ratio(figure['median'], base and base['median'])} "
                         f"[{p['decode_ms_per_token'][batch][long]:.2f}]")
        label = f"`{row['pattern']}`" + (f" ({row['name']})" if row["name"] else "")
        lines.append(f"| {label} | `{row['at_target']}` | {row['n_layers']} | "
                     f"{format_bytes(row['cache_bytes']['32768'])} | {train:,.0f}"
                     f"{_ratio(train, first['measured']['train_tokens_per_s']['median'])} "
                     f"[{p['train_tokens_per_s']:,.0f}] | {cells[0]} | {cells[1]} | "
                     f"{format_bytes(m['peak_memory_bytes']['train'] or 0)} |")
    return "\n".join(lines)


def predicted_table(rows: list[dict[str, Any]], device: str, preset: str) -> str:
    from composer.accounting import format_bytes

    first = rows[0]
    lines = [f"{device} at {preset} (cost model; decode after {first['context']:,} tokens):",
             "| layout | layers | params | cache at 32K | train tok/s | decode ms b1 | decode ms b64 |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        label = f"`{row['pattern']}`" + (f" ({row['name']})" if row["name"] else "")
        ms, first_ms = row["decode_ms_per_token"], first["decode_ms_per_token"]
        decode = [f"{ms[b]:.2f}{_ratio(ms[b], first_ms[b])}" for b in ("1", "64")]
        lines.append(f"| {label} | {row['n_layers']} | {row['params'] / 1e6:.0f}M | "
                     f"{format_bytes(row['cache_bytes_32k'])} | {row['train_tokens_per_s']:,.0f}"
                     f"{_ratio(row['train_tokens_per_s'], first['train_tokens_per_s'])} | {decode[0]} | {decode[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("patterns", nargs="+",
                        help="PATTERN (stacked), PATTERN:keep (grown, attention kept) or NAME:PATTERN (a family); "
                             "@N or @FAMILY after one grows it to that depth by width")
    parser.add_argument("--target", default="demo-4m", help="preset measured at (default demo-4m)")
    parser.add_argument("--seq-len", type=int, default=128,
                        help="training context at the target, the first decode context (default 128: the cpu ladder's)")
    parser.add_argument("--train-batch", type=int, default=16,
                        help="training batch at the target (default 16; the CPU cuts it to 1,024 tokens a step)")
    parser.add_argument("--compile", action="store_true",
                        help="on the CPU, time the decode step compiled (composer.inference.compile_decode_step)")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default=None,
                        help="time training and decode in this precision, as a search that trains in it does "
                             "(default: the device's, bf16 on CUDA, fp32 on the CPU)")
    parser.add_argument("--no-measure", action="store_true", help="the analytic cost and the predictions only")
    parser.add_argument("--device-here", default="cpu", help="the cost model's device for this machine (default cpu)")
    parser.add_argument("--predict", action="append", default=[], metavar="DEVICE@PRESET",
                        help="also predict each entry grown to PRESET on DEVICE (repeatable), e.g. h200@llama-3.2-1b")
    parser.add_argument("--out", default="runs/finalist-costs")
    args = parser.parse_args(argv)
    try:
        predictions = [parse_prediction(text) for text in args.predict]
        for entry in args.patterns:  # each one's growth (a depth too) fails here, before anything is measured
            model_at(entry, args.target)
        from composer.costmodel import device_names

        if args.device_here not in device_names():
            raise ConfigError(f"--device-here {args.device_here!r}: the cost model knows {', '.join(device_names())}")
        predicted = {f"{device}@{preset}": predict_at(args.patterns, device, preset) for device, preset in predictions}
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for entry in args.patterns:  # the file is rewritten after every model: a run cut short keeps what it measured
        rows += measure([entry], args.target, args.seq_len, not args.no_measure, args.device_here, args.train_batch,
                        args.compile, args.precision)
        (out / "finalist_costs.json").write_text(json.dumps(
            {"target": args.target, "seq_len": args.seq_len, "device_here": args.device_here, "rows": rows,
             "predicted": predicted}, indent=2))
    if not args.no_measure:
        print(f"measured at {args.target} on this machine [the cost model's {args.device_here} prediction]; "
              f"(x): over the first row")
        print(measured_table(rows))
    for key, prediction_rows in predicted.items():
        print()
        print(predicted_table(prediction_rows, *key.split("@")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
