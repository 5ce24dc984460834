"""Does a trained model retrieve from its context? Layouts trained alike, each scored by its own recall.

Issue 48 asks for the cheapest CPU setting in which trained models with attention retrieve from their context and
attention-free ones do not, over 2 seeds. This script trains each layout at one setting (preset, context, tokens)
with ``composer train``, at each of ``--lrs`` on the first seed (the lower validation loss chooses its rate, as
the search's ``lm`` evaluator does, so every layout gets its own good rate) and at that rate on the other seeds,
then scores the trained model with ``composer eval --tasks recall``'s measures
(``composer.evaluation.context_recall``: the copy gain of held-out and random spans at each distance, and the
associative-recall slice), each with a t interval over sequences. Every run is recorded in ``--out`` as it ends,
so a killed run keeps what finished and a rerun trains only what is missing.

Layouts (``--layouts``): a name of the search's known layouts (``llama``, ``nemotron-h``, ``samba``, ...), each in
its own layout at the preset, or a 6-layer pattern with ``:keep`` / ``:repeat`` (how its attention grows to the
preset, ``--attention-at-target``). Defaults: Llama's, Nemotron-H's, the AMSD search's ``SDDMAS`` grown with its
attention kept, and the attention-free finalist ``SDDMDM``.

    python benchmarks/trained_recall.py --seq-len 512 --tokens 2000000 --out runs/trained_recall
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from report import finish

DEFAULT_LAYOUTS = ("llama", "nemotron-h", "SDDMAS:keep", "SDDMDM:repeat")
FAMILY_FITS = {"llama": "AMAMAM", "nemotron-h": "SMSAMS", "samba": "SMSMWM"}  # 6-layer fits the search enqueues
SPEED_KEYS = ("mfu", "params", "non_embedding_params", "peak_memory_bytes", "flops_per_token", "tokens", "steps",
              "precision", "compile")


def model_at(layout: str, preset: str) -> tuple[str, str]:
    """The pattern trained for ``layout`` at ``preset``, and how it was grown (``search.growth.grow``)."""
    from search.growth import grow

    if layout in FAMILY_FITS:
        return grow(FAMILY_FITS[layout], preset, layout).layout, f"{layout}'s own layout"
    pattern, _, rule = layout.partition(":")
    rule = rule or "repeat"
    return grow(pattern, preset, None, rule).layout, f"{pattern} grown by {rule}"


def train_run(pattern: str, args: argparse.Namespace, lr: float, seed: int, out: Path) -> dict[str, Any]:
    """One ``composer train`` run: its validation loss (None: diverged), tokens/s and model directory."""
    from composer.errors import ComposerRunError
    from composer.training import TrainConfig, train

    device = {} if args.device is None else {"device": "gpu" if args.device == "cuda" else "cpu", "devices": 1}
    config = TrainConfig(arch=pattern, preset=args.preset, data=args.data, tokens=args.tokens, seq_len=args.seq_len,
                         batch_size=args.batch_size, lr=lr, seed=seed, repeat_share=args.repeat_share, wandb="off", out=str(out), val_batches=20,
                         val_tokens=args.val_tokens, log_interval=10**9, checkpoint_interval=10**9,
                         keep_checkpoints=1, precision=args.precision, compile=args.compile, progress=False,
                         schedule="wsd", warmup=args.warmup, **device)
    started = time.perf_counter()
    try:
        summary = train(config, save_on_sigterm=False)
    except ComposerRunError as err:
        if "diverged" in str(err):
            return {"lr": lr, "seed": seed, "val_loss": None, "seconds": time.perf_counter() - started}
        raise
    loss = summary.get("val_loss")
    # speed and size where the run measured them (mfu only where the device's peak is known: not on CPUs)
    measured = {key: summary[key] for key in SPEED_KEYS if summary.get(key) is not None}
    return {"lr": lr, "seed": seed, "val_loss": loss if loss is not None and math.isfinite(loss) else None,
            "tokens_per_s": summary.get("tokens_per_s"), **measured, "seconds": time.perf_counter() - started,
            "model_dir": str(out / "model")}


def recall_of(run: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The trained model's recall report, at the context it trained at, on its run's validation split."""
    from composer.evaluation.context_recall import measure_model_dir

    return measure_model_dir(run["model_dir"], seq_len=args.seq_len, sequences=args.sequences,
                             device=args.device or "cpu")["recall"]


def measure_layout(layout: str, args: argparse.Namespace, record: dict[str, Any], save, echo) -> None:
    """Every seed of ``layout`` not in ``record`` yet: the rate chosen on the first seed, then the others."""
    from search.evaluation import best_rate

    pattern, grown = model_at(layout, args.preset)
    entry = record.setdefault(layout, {"pattern": pattern, "grown": grown, "seeds": {}})
    for seed in args.seeds:
        if str(seed) in entry["seeds"]:
            continue
        with tempfile.TemporaryDirectory(prefix="trained-recall-") as work:
            rates = args.lrs if seed == args.seeds[0] else [entry["lr"]]
            runs = {}
            for lr in rates:
                echo(f"{layout} ({pattern}) seed {seed} lr {lr:g}: training {args.tokens:,} tokens at "
                     f"{args.seq_len} ...")
                runs[lr] = train_run(pattern, args, lr, seed, Path(work) / f"lr{lr:g}")
            lr = best_rate({rate: run["val_loss"] for rate, run in runs.items()})
            if lr is None:
                entry["seeds"][str(seed)] = {"diverged": sorted(runs)}
                save()
                continue
            entry["lr"] = lr
            chosen = runs[lr]
            chosen["recall"] = recall_of(chosen, args)
            chosen["lr_sweep"] = {f"{rate:g}": run["val_loss"] for rate, run in runs.items()}
            chosen.pop("model_dir")
            entry["seeds"][str(seed)] = chosen
        save()
        echo(f"{layout} seed {seed}: " + line_of(chosen))


def copy_at_longest(recall: dict[str, Any], kind: str) -> dict[str, Any] | None:
    rows = [row for row in recall["copy"] if row["kind"] == kind]
    return max(rows, key=lambda row: row["distance"]) if rows else None


def line_of(run: dict[str, Any]) -> str:
    from composer.statistics import format_interval

    recall = run["recall"]
    text, random = copy_at_longest(recall, "text"), copy_at_longest(recall, "random")
    ar = recall["ar_slice"]
    return (f"val loss {run['val_loss']:.4f} at lr {run['lr']:g}; copy gain at {text['distance']}: text "
            f"{text['gain']:+.4f} {format_interval(text['gain_ci'])}, random {random['gain']:+.4f} "
            f"{format_interval(random['gain_ci'])}; AR repeat gain {ar['repeat_gain']:+.4f} "
            f"{format_interval(ar['repeat_gain_ci'])}")


def table_of(record: dict[str, Any]) -> str:
    from composer.statistics import format_interval

    lines = ["| layout | at the preset | seed | lr | val loss | copy gain, text | copy gain, random | "
             "AR repeat gain | minutes (its run) |", "|---|---|---|---|---|---|---|---|---|"]
    for layout, entry in record.items():
        for seed, run in entry["seeds"].items():
            if "recall" not in run:
                lines.append(f"| {layout} | `{entry['pattern']}` | {seed} | diverged | | | | | |")
                continue
            recall = run["recall"]
            text, random, ar = copy_at_longest(recall, "text"), copy_at_longest(recall, "random"), recall["ar_slice"]
            lines.append(f"| {layout} | `{entry['pattern']}` | {seed} | {run['lr']:g} | {run['val_loss']:.4f} | "
                         f"{text['gain']:+.4f} {format_interval(text['gain_ci'])} | {random['gain']:+.4f} "
                         f"{format_interval(random['gain_ci'])} | {ar['repeat_gain']:+.4f} "
                         f"{format_interval(ar['repeat_gain_ci'])} | {run['seconds'] / 60:.1f} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layouts", default=",".join(DEFAULT_LAYOUTS),
                        help="comma-separated known layouts or PATTERN:keep|repeat (default: %(default)s)")
    parser.add_argument("--preset", default="demo-4m", help="the widths every layout trains at (default demo-4m)")
    parser.add_argument("--seq-len", type=int, default=512, help="training context, also the recall's (512)")
    parser.add_argument("--tokens", type=int, default=2_000_000, help="training tokens per run (2M)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeat-share", type=float, default=0.0,
                        help="share of training windows that repeat a span of their own text (default 0: plain text)")
    parser.add_argument("--warmup", type=int, default=10, help="warmup steps of the wsd schedule (10)")
    parser.add_argument("--lrs", default="1e-3,2e-3", help="rates tried on the first seed (1e-3,2e-3)")
    parser.add_argument("--seeds", default="0,1", help="training seeds (0,1)")
    parser.add_argument("--val-tokens", type=int, default=65_536, help="held-out tokens of the validation loss")
    parser.add_argument("--sequences", type=int, default=64, help="recall sequences per kind and AR windows (64)")
    parser.add_argument("--precision", default="32-true",
                        help="training precision, as composer train's (default 32-true; bf16-mixed on a GPU)")
    parser.add_argument("--compile", action="store_true", help="torch.compile every run (default off)")
    parser.add_argument("--device", choices=("cpu", "cuda"),
                        help="train and score the recall there (default: training on what composer train finds, "
                             "recall on the CPU)")
    parser.add_argument("--data", help="text source (default: the offline corpus)")
    parser.add_argument("--out", default="runs/trained_recall", help="where the record and table go")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    args.lrs = [float(rate) for rate in args.lrs.split(",")]
    args.seeds = [int(seed) for seed in args.seeds.split(",")]
    return args


def main(argv: list[str] | None = None) -> int:
    from composer.files import atomic_write_json, make_output_dir

    args = parse_args(argv)
    out = make_output_dir(args.out)
    path = out / "runs.json"
    saved = json.loads(path.read_text()) if path.is_file() else {}
    setting = {key: getattr(args, key) for key in ("preset", "seq_len", "tokens", "batch_size", "warmup", "lrs",
                                                     "val_tokens", "sequences", "data", "repeat_share")}
    # the GPU's settings join the record's only where they differ from the CPU's, so earlier records stay readable
    setting.update({key: getattr(args, key) for key, cpu in (("precision", "32-true"), ("compile", False),
                                                             ("device", None)) if getattr(args, key) != cpu})
    if saved and saved.get("setting") != setting:
        print(f"trained_recall: {path} holds runs of another setting; pass another --out", file=sys.stderr)
        return 2
    record = saved.get("layouts", {})

    def save() -> None:
        atomic_write_json(path, {"setting": setting, "layouts": record})

    for layout in args.layouts.split(","):
        measure_layout(layout, args, record, save, lambda line: print(line, file=sys.stderr, flush=True))
    report = {"setting": setting, "layouts": record,
              "date": time.strftime("%Y-%m-%d"), "command": "python benchmarks/trained_recall.py "
              + " ".join(sys.argv[1:] if argv is None else argv)}
    return finish(out, "trained_recall", report, table_of(record), as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
