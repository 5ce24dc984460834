"""``validate``: the fit's predictions against whole models it never ran.


``validate``: whole models the fit never ran, by construction: no single layer and no width (``d_model``) of the
fit (``VALIDATION``; a table whose fit ran one is refused), six of each layout class
(:mod:`composer.costmodel.classes`: A/M-heavy, S/D-heavy), A/M/S/D/W mixes of 6 to 73 layers at d_model 160 to
768: the measured training step (forward, loss, backward, clipping, AdamW: what ``composer train`` steps, in the
fit's precision), prefill and batch-1 decode beside the table's prediction; median and worst relative error
(``predicted / measured - 1``) per measure, per class and pooled, and the digest of the constants predicted with
(equal to the fit's: no refit in between), raw JSON to ``benchmarks/results/cost_model_validation-<date>.json``.
``--cases development`` runs the 2026-11-29 validation's models at the fit's own widths instead: what a change
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from composer.costmodel import (
    TABLE_PATH,
    error_summary,
    load_table,
    predict_decode,
    predict_prefill,
    predict_train,
    relative_error,
)
from composer.costmodel.calibration.cases import (
    FIT_SHAPES,
    KEYS,
    QUICK_VALIDATION,
    VALIDATION,
    development_cases,
)
from composer.costmodel.calibration.decode_processes import (
    decode_in_fresh_process,
    interleaved,
    measure_serving,
)
from composer.costmodel.calibration.markdown import validation_table
from composer.costmodel.calibration.record import command_line, log, shown, today
from composer.costmodel.calibration.timing import (
    CLOCK,
    last_wait_quiet,
    machine_state,
    quiet_summary,
    timed,
)
from composer.costmodel.calibration.units import arch_for, training_autocast
from composer.costmodel.classes import LAYOUT_CLASSES, layout_class
from composer.costmodel.processor import this_cpu_model
from composer.costmodel.table import constants_digest
from composer.errors import ConfigError
from composer.files import atomic_write_json, make_output_dir
from composer.precision import device_has_native_bf16
from composer.presets import get_preset


def train_step_call(model, optimizer, batch: int, seq: int, vocab: int,
                    precision: str = "fp32") -> Callable[[], None]:
    """What composer train steps (benchmarks/training_throughput.py's bare loop without the LR schedule), the
    forward and loss under ``precision``'s autocast."""
    ids = torch.randint(0, vocab, (batch, seq + 1), generator=torch.Generator().manual_seed(0))
    autocast = training_autocast(precision)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = model(ids[:, :-1], ids[:, 1:]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return step


def decode_over_processes(cases, rows: list[dict], processes: int) -> None:
    """Each row's decode figure taken again as the median over ``processes`` fresh processes (module
    :mod:`~composer.costmodel.calibration.decode_processes`: one process's figure is not reproducible enough for a
    15% goal), interleaved and pinned to the cores in turn (``interleaved``), each timing as many steps as this
    process did; the figure this process measured stays as ``decode_in_process_ms``."""

    def measure(i: int, core: int, round_: int) -> dict:
        preset, pattern, _, _, context = cases[i]
        if i == 0:
            log(f"  decode in fresh processes: round {round_ + 1}/{processes} on core {core}")
        return decode_in_fresh_process(preset, pattern, context, len(rows[i]["decode_step_s"]), core, CLOCK["name"])

    medians = [[figure["median_s"] for figure in case] for case in interleaved(len(cases), processes, measure)]
    for row, values in zip(rows, medians, strict=True):
        row["decode_in_process_ms"] = row["decode_ms_per_token"]
        row["decode_process_medians_ms"] = [1e3 * v for v in values]
        row["decode_ms_per_token"] = 1e3 * statistics.median(values)
        row["error"]["decode_ms_per_token"] = relative_error(row["decode_ms_per_token_predicted"],
                                                             row["decode_ms_per_token"])
        log(f"  {row['preset']:<11} {row['compact']:<28} decode over {processes} processes "
            f"{row['decode_ms_per_token']:7.2f} ms (in this one {row['decode_in_process_ms']:.2f}; pred "
            f"{row['decode_ms_per_token_predicted']:.2f}, {row['error']['decode_ms_per_token']:+.0%})")


def cmd_validate(args: argparse.Namespace, argv: list[str] | None) -> int:
    from composer.model import build_model

    if args.device != "cpu":
        raise ConfigError(f"validate measures the machine it runs on: --device cpu (got {args.device!r}); the GPU "
                          "runs are checked by `loo`")
    torch.set_num_threads(args.threads)
    table = load_table(args.table)
    cases = (QUICK_VALIDATION if args.quick else development_cases() if args.cases == "development"
             else VALIDATION)
    fit = fit_source(table)
    if args.cases == "validation":
        check_out_of_sample(cases, fit)
    if fit.get("clock", CLOCK["name"]) != CLOCK["name"]:  # a fit from before 2026-12-07 did not record its clock
        raise ConfigError(f"fit {fit['id']} timed on the {fit['clock']} clock: validate with --clock {fit['clock']}, "
                          "one clock for both")
    table.device("cpu").check_here()  # validating one processor's fit on another measures the processors' gap
    train_precision = table.device("cpu").train_precision
    steps, new_tokens = (1, 4) if args.quick else (args.steps, 16)
    started = time.perf_counter()
    machine_before = machine_state()
    log(f"validate --device cpu: {len(cases)} held-out models, {torch.get_num_threads()} thread(s), training in "
        f"{train_precision} as the fit did, table {args.table or TABLE_PATH} (fit {fit['id']}, digest "
        f"{constants_digest(table.raw, 'cpu')})")
    rows = []
    for preset, pattern, batch, seq, context in cases:
        arch = arch_for(preset, pattern)
        torch.manual_seed(0)
        model = build_model(arch)
        optimizer = torch.optim.AdamW(model.parameter_groups(0.1), lr=1e-4, betas=(0.9, 0.95))
        is_large = arch.d_model >= 512
        train = timed(train_step_call(model, optimizer, batch, seq, arch.vocab_size, train_precision),
                      2 if is_large else steps, 1)
        quiet = {"train": last_wait_quiet()}
        model.eval()
        prefill_s, decode = measure_serving(model, context, 8 if is_large else new_tokens)
        quiet["serving"] = last_wait_quiet()
        del model, optimizer
        gc.collect()
        train_s, decode_s = statistics.median(train), statistics.median(decode)
        p_train = predict_train(arch, "cpu", batch=batch, seq_len=seq, table=table)
        p_prefill = predict_prefill(arch, "cpu", seq_len=context, batch=1, table=table)
        p_decode = predict_decode(arch, "cpu", context=context + len(decode) // 2, batch=1, table=table)
        row = {
            "preset": preset, "pattern": arch.pattern, "compact": arch.compact, "n_layers": arch.n_layers,
            "d_model": arch.d_model, "layout_class": layout_class(arch), "quiet": quiet,
            "train_shape": [batch, seq], "context": context,
            "train_tokens_per_s": batch * seq / train_s, "train_tokens_per_s_predicted": p_train.tokens_per_s,
            "train_step_s": train, "prefill_tokens_per_s": context / prefill_s,
            "prefill_tokens_per_s_predicted": p_prefill.tokens_per_s,
            "decode_ms_per_token": 1e3 * decode_s, "decode_ms_per_token_predicted": p_decode.ms_per_token,
            "decode_step_s": decode,
        }
        row["error"] = {
            "train_tokens_per_s": relative_error(row["train_tokens_per_s_predicted"], row["train_tokens_per_s"]),
            "prefill_tokens_per_s": relative_error(row["prefill_tokens_per_s_predicted"], row["prefill_tokens_per_s"]),
            "decode_ms_per_token": relative_error(row["decode_ms_per_token_predicted"], row["decode_ms_per_token"]),
        }
        rows.append(row)
        log(f"  {preset:<11} {arch.compact:<28} train {row['train_tokens_per_s']:>9,.0f} tok/s "
            f"(pred {row['train_tokens_per_s_predicted']:>9,.0f}, {row['error']['train_tokens_per_s']:+.0%})  "
            f"decode {row['decode_ms_per_token']:7.2f} ms (pred {row['decode_ms_per_token_predicted']:7.2f}, "
            f"{row['error']['decode_ms_per_token']:+.0%})")
    processes = 1 if args.quick else args.decode_processes
    if processes:
        decode_over_processes(cases, rows, processes)
    summary = errors_by_class(rows)
    results = {
        "benchmark": "cost_model validate", "date": today(), "command": command_line(argv), "device": "cpu",
        "cases": args.cases, "out_of_sample": args.cases == "validation",
        "threads": torch.get_num_threads(), "torch": torch.__version__, "quick": args.quick,
        "processor": this_cpu_model(), "train_precision": train_precision, "native_bf16": device_has_native_bf16("cpu"),
        "clock": CLOCK["name"], "decode_processes": processes,
        "decode_figure": ("the median over that many fresh processes' medians, each pinned to one core in turn "
                          "(composer.costmodel.calibration.decode_processes)" if processes else
                          "the median of this process's steps"),
        "machine": {"before": machine_before, "after": machine_state(), "waits": quiet_summary()},
        "seconds": time.perf_counter() - started, "table": shown(args.table or TABLE_PATH),
        "fit_source": fit, "cpu_constants_digest": constants_digest(table.raw, "cpu"),
        "table_sources": table.sources, "rows": rows, "errors": summary["pooled"],
        "errors_by_class": {c: summary[c] for c in LAYOUT_CLASSES},
        "class_rule": "S/D-heavy: at least half of the token mixers keep a fixed recurrent state (S, D); "
                      "composer.costmodel.classes.layout_class",
        "error_definition": "predicted / measured - 1 (tokens/s for training and prefill, ms per token for decode)",
    }
    out = make_output_dir(args.out)
    path = out / f"cost_model_{args.cases}-{results['date']}.json"
    atomic_write_json(path, results)
    print(validation_table(rows, summary))
    log(f"validate done in {results['seconds']:.0f} s; results in {path}")
    return 0


MEASURES = ("train_tokens_per_s", "prefill_tokens_per_s", "decode_ms_per_token")


def errors_by_class(rows: list[dict]) -> dict[str, dict[str, Any]]:
    """Per measure, the error summary of each layout class's rows and of all rows (``pooled``)."""
    groups = {"pooled": rows, **{c: [r for r in rows if r["layout_class"] == c] for c in LAYOUT_CLASSES}}
    return {name: {m: error_summary([r["error"][m] for r in members]) for m in MEASURES}
            for name, members in groups.items()}


def fit_source(table) -> dict[str, Any]:
    """The source of the table's cpu training efficiencies (the fit validate checks), with its id."""
    efficiency = table.device("cpu").efficiency["train"]
    return table.source(next(iter(efficiency.values())).source)


def check_out_of_sample(cases: list[tuple], fit: dict[str, Any]) -> None:
    """Refuse (one line) a validation model whose width or pattern the table's fit ran: its error would be
    in-sample. A fit from before 2026-12-07 recorded neither, and is checked against ``FIT_SHAPES``'s widths."""
    widths = set(fit.get("widths", {p: get_preset(p).arch.d_model for p in FIT_SHAPES}).values())
    patterns = set(fit.get("patterns", KEYS))
    for preset, pattern, *_ in cases:
        arch = arch_for(preset, pattern)
        if arch.d_model in widths or arch.compact in patterns or arch.n_layers < 2:
            raise ConfigError(f"validation model {preset} {pattern!r} is in the sample of fit {fit['id']} (widths "
                              f"{sorted(widths)}, single layers of {''.join(sorted(patterns - {'head'}))}): "
                              "validate only what the fit never ran")
