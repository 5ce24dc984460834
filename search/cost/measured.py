"""The measured cost of every row of a search's final ranking (its finalists and known layouts) on the model it
becomes at the target, with ratios to the best known layout; kept in ``--out`` so that a resumed search does not
measure again.

Why: the search ranks by loss per parameter, and its answers drift to deep, thin stacks that are slow to train
and to serve (issue 58). What each row costs on the machine the search runs on, beside the layout it is compared
with, is what a user weighs against a loss difference. The timing itself is
:func:`composer.evaluation.bench_cost.measure_cost`; here:

* :func:`cost_grid`: the shape measured, from the budget the answer's ranking was trained at (its batch and
  context);
* :func:`add_measured_cost`: ``row["cost"]["measured"]`` for every row with a model at the target, read from
  ``STORE`` where that model was measured before with the same grid on the same machine (device, its name,
  threads, torch), else measured and written there at once (a search killed while measuring keeps what it
  measured), then ``row["cost"]["vs_best_known"]``;
* :func:`ratios_to_known`: each figure of a row over the best known layout's (the known layout the answer is
  compared with, ``vs_known["best_known"]``): above 1 is faster for tokens/s, slower for ms per token, more for
  bytes.

A measurement that fails (a GPU that runs out of memory even at batch 1) is recorded as ``{"error": ...}`` and not
stored, so that a resume tries again; the search's answer does not depend on it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from composer.files import update_json
from search.growth import GROWN, Grown

STORE = "measured_cost.json"  # in --out: {"<target>:<target pattern>": record}


def cost_grid(budget: str, compile: bool = False, precision: str | None = None):
    """The :class:`~composer.evaluation.bench_cost.CostGrid` of an ``lm`` budget: its batch and sequence length.
    ``compile`` (``composer search --compile``): on the CPU the decode step is timed compiled, the fastest path
    there, at 20-50 s of compiling per shape at demo-4m; a default search times it eagerly, in seconds.
    ``precision``: what the search trains in (``SearchConfig.resolved_precision``), timed in it; None: the
    device's default."""
    from composer.evaluation.bench_cost import CostGrid
    from search.lm import get_lm_budget

    spec = get_lm_budget(budget)
    return CostGrid(train_batch=spec.batch_size, seq_len=spec.seq_len, compile_decode=compile, precision=precision)


def read_store(out: Path | None) -> dict[str, Any]:
    """The records measured before in ``out`` (empty when none, or when the file cannot be read: they are measured
    again)."""
    if out is None:
        return {}
    try:
        data = json.loads((Path(out) / STORE).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def reusable(record: dict[str, Any] | None, machine: dict[str, Any], grid: dict[str, Any]) -> bool:
    """Whether a stored record was measured on this machine (``machine``'s every field) with ``grid`` (a record's
    grid written before a field existed reads as that field's default: a measurement whose grid lacks
    ``precision`` was made at the device's default)."""
    if not isinstance(record, dict) or "error" in record or not isinstance(record.get("grid"), dict):
        return False
    return (_with_defaults(record["grid"]) == grid
            and all(record.get(key) == value for key, value in machine.items()))


def _with_defaults(grid: dict[str, Any]) -> dict[str, Any] | None:
    from composer.evaluation.bench_cost import CostGrid

    try:
        return dataclasses.asdict(CostGrid(**grid))
    except TypeError:  # a field this version does not know
        return None


def measure_row(pattern: str, target: str, grid) -> dict[str, Any]:
    """The measured cost of ``pattern`` (a pattern at the target) at ``target``'s widths, or ``{"error": ...}``."""
    from composer.evaluation.bench_cost import measure_cost
    from composer.presets import get_preset

    try:
        return measure_cost(get_preset(target).arch.with_pattern(pattern), grid)
    except Exception as err:  # noqa: BLE001 (a cost is reported, never the reason a search loses its answer)
        return {"error": f"{type(err).__name__}: {err}"[:300]}


def threads_text(threads: int) -> str:
    """``1 thread``, ``2 threads``."""
    return f"{threads} thread" + ("" if threads == 1 else "s")


def progress_line(row: dict[str, Any], record: dict[str, Any], target: str, reused: bool) -> str:
    """One line per row: its training tokens/s and decode ms per token at the longest context."""
    name = f"{row['pattern']}" + (f" ({row['known']})" if row.get("known") else "")
    if "error" in record:
        return f"   {name} at {target}: not measured: {record['error']}"
    decode = record["decode_ms_per_token"]
    context = max(int(c) for c in decode["1"])
    steps = ", ".join(f"{decode[b][str(context)]['median']:.3g} ms at batch {b}" for b in decode)
    said = ("measured before (" + STORE + ")" if reused else f"{record['seconds']:.1f} s")
    return (f"   {name} at {target}: train {record['train_tokens_per_s']['median']:,.0f} tok/s, decode {steps} "
            f"after {context:,} tokens ({said})")


def add_measured_cost(rows: list[dict[str, Any]], target: str, grid, out: Path | None,
                      best_known: dict[str, Any] | None, echo=None) -> None:
    """``row["cost"]["measured"]`` for every row with a model at the target (its ``grown`` record,
    ``search.growth.Grown``; module doc), then the ratios to the best known layout's row."""
    import torch

    from composer.evaluation.bench_cost import machine
    from composer.presets import get_preset

    store = read_store(out)
    here = machine(torch.device("cuda" if torch.cuda.is_available() else "cpu"), grid)
    wanted = dataclasses.asdict(grid)
    batch = grid.cpu_train_batch() if here["device"] == "cpu" else grid.train_batch
    if echo is not None:
        echo(f"measuring the cost of the finalists and known layouts at {target} on {here['device']} "
             f"({threads_text(here['threads'])}): training {batch} x {grid.seq_len} tokens, prefill "
             f"{grid.seq_len}, decode at batch 1 and {grid.large_batch} after "
             + " and ".join(f"{c:,}" for c in grid.contexts(get_preset(target).arch.max_seq_len)) + " tokens")
    for row in rows:
        grown = Grown.stored_in(row, target)  # its model at the target, as its trial stored it
        if grown is None:
            continue
        at, key = grown.widths, f"{grown.widths}:{grown.layout}"
        reused = reusable(store.get(key), here, wanted)
        record = store[key] if reused else measure_row(grown.layout, at, grid)
        if not reused and "error" not in record and out is not None:  # under the store's lock: workers share it
            store = update_json(Path(out) / STORE, lambda data, key=key, record=record: {**data, key: record})
        row["cost"] = {**(row.get("cost") or {}), "measured": record}
        if echo is not None:
            echo(progress_line(row, record, at, reused))
    add_ratios(rows, best_known)


def known_row(rows: list[dict[str, Any]], best_known: dict[str, Any] | None) -> dict[str, Any] | None:
    """The row of the best known layout the answer is compared with (``vs_known["best_known"]``), or None."""
    if not best_known:
        return None
    return next((row for row in rows if row["pattern"] == best_known["pattern"] and row.get("known")), None)


def _ratio(value: Any, reference: Any) -> float | None:
    if isinstance(value, dict):
        value, reference = value.get("median"), (reference or {}).get("median")
    if not isinstance(value, (int, float)) or not isinstance(reference, (int, float)) or not reference:
        return None
    return value / reference


def ratios_to_known(measured: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """Each figure of ``measured`` over the same figure of ``known`` (medians; None where either is missing)."""
    decode, theirs = measured["decode_ms_per_token"], known["decode_ms_per_token"]
    return {
        "train_tokens_per_s": _ratio(measured["train_tokens_per_s"], known["train_tokens_per_s"]),
        "prefill_tokens_per_s": _ratio(measured["prefill_tokens_per_s"], known["prefill_tokens_per_s"]),
        "decode_ms_per_token": {batch: {context: _ratio(value, theirs.get(batch, {}).get(context))
                                        for context, value in by_context.items()}
                                for batch, by_context in decode.items()},
        "peak_memory_bytes": {what: _ratio(measured["peak_memory_bytes"].get(what),
                                           known["peak_memory_bytes"].get(what)) for what in ("train", "decode")},
    }


def add_ratios(rows: list[dict[str, Any]], best_known: dict[str, Any] | None) -> None:
    """``row["cost"]["vs_best_known"]`` for every measured row, the known layout's own included (all 1.0)."""
    known = known_row(rows, best_known)
    reference = ((known or {}).get("cost") or {}).get("measured")
    if reference is None or "error" in reference:
        return
    for row in rows:
        measured = (row.get("cost") or {}).get("measured")
        if measured is None or "error" in measured:
            continue
        row["cost"]["vs_best_known"] = {"pattern": known["pattern"], "name": known["known"],
                                        GROWN: known.get(GROWN), **ratios_to_known(measured, reference)}


__all__ = ["STORE", "add_measured_cost", "add_ratios", "cost_grid", "known_row", "measure_row", "ratios_to_known",
           "read_store", "reusable", "threads_text"]
