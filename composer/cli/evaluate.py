"""``composer eval --model DIR --tasks T1,T2``: downstream accuracy through lm-evaluation-harness
(composer/evaluation/downstream.py; needs ``pip install 'composer-hnas[eval]'``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from composer.cli.format import print_json, print_table
from composer.errors import ConfigError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="downstream evaluation (ARC, HellaSwag, ...) through lm-evaluation-harness",
        description="Score a model composer train saved in <out>/model on lm-evaluation-harness tasks and "
                    "write eval.json (every metric with its standard error, the configuration and the "
                    "versions). Tasks are downloaded by lm-eval where there is a network; --include-path adds a folder "
                    "of your own task YAMLs (they may read local files, offline). Needs the [eval] extra: "
                    "pip install 'composer-hnas[eval]'.",
    )
    parser.add_argument("--model", required=True, metavar="DIR",
                        help="the model directory (<train out>/model)")
    parser.add_argument("--tasks", required=True, help="comma-separated lm-eval task or group names "
                                                       "(e.g. arc_easy,hellaswag,piqa)")
    parser.add_argument("--include-path", action="append", metavar="TASK_DIR",
                        help="a folder of task YAMLs to add to lm-eval's (as lm-eval's --include_path); "
                             "repeatable")
    parser.add_argument("--limit", type=float, help="at most this many documents per task (a fraction when "
                                                    "< 1); for quick checks, not for reported numbers")
    parser.add_argument("--num-fewshot", type=int, help="few-shot examples per prompt (default: the task's, "
                                                        "usually 0)")
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per forward (default 8)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu; e.g. cuda)")
    parser.add_argument("--tokenizer", help="tokenizer, as composer train --tokenizer takes it (default: the "
                                            "one recorded with the model)")
    parser.add_argument("--seed", type=int, default=1234,
                        help="seed of few-shot sampling and sampling decoders")
    parser.add_argument("--out", metavar="DIR", help="where to write eval.json (default: the run directory "
                                                     "holding model/, else the model directory)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run)


def default_out(model: Path) -> Path:
    return model.parent if model.name == "model" else model


def run(args: argparse.Namespace) -> int:
    from composer.evaluation.downstream import require_lm_eval

    require_lm_eval()
    from composer.evaluation.downstream import evaluate, report_rows
    from composer.files import atomic_write_json, make_output_dir

    limit = args.limit
    if limit is not None and limit >= 1:
        if limit != int(limit):
            raise ConfigError(f"--limit {limit} must be a whole number of documents or a fraction below 1")
        limit = int(limit)
    if args.batch_size < 1:
        raise ConfigError(f"--batch-size must be a positive integer, got {args.batch_size}")
    model = Path(args.model)
    out = make_output_dir(Path(args.out)) if args.out else default_out(model)
    report = evaluate(
        model, args.tasks.split(","), include_path=args.include_path, limit=limit, batch_size=args.batch_size,
        device=args.device, tokenizer=args.tokenizer, num_fewshot=args.num_fewshot, seed=args.seed,
    )
    path = atomic_write_json(out / "eval.json", report)
    report["path"] = str(path)
    if args.json:
        print_json(report)
        return 0
    print_table(["task", "metric", "value", "stderr", "n"], report_rows(report))
    print(f"\n{report['pattern']}, tokenizer {report['tokenizer']['name']}, "
          f"{report['config']['elapsed_s']:.1f}s; written to {path}")
    return 0
