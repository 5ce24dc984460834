"""``composer eval --model DIR --tasks T1,T2``: downstream accuracy through lm-evaluation-harness
(composer/evaluation/downstream.py; needs ``pip install 'composer-hnas[eval]'``), and Composer's own tasks, which
need no harness: ``recall``, the model's in-context recall on held-out text
(composer/evaluation/context_recall.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from composer.cli.format import print_json, print_table
from composer.cli.parsing import seed_number
from composer.errors import ConfigError
from composer.evaluation.context_recall import DEFAULT_SEQUENCES, TASK


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="downstream evaluation (ARC, HellaSwag, ...) through lm-evaluation-harness; in-context recall",
        description="Score a model composer train saved in <out>/model on lm-evaluation-harness tasks and "
                    "write eval.json (every metric with its standard error, the configuration and the "
                    "versions). Tasks are downloaded by lm-eval where there is a network; --include-path adds a folder "
                    "of your own task YAMLs (they may read local files, offline). Needs the [eval] extra: "
                    "pip install 'composer-hnas[eval]'. The task recall is Composer's own and needs no lm-eval: the "
                    "copy gain (loss on the first occurrence of a repeated span minus loss on its second, for "
                    "held-out text and random tokens, at several distances) and the associative-recall slice of "
                    "held-out windows, each with a 95% interval over sequences, on the validation split of the "
                    "model's run.",
    )
    parser.add_argument("--model", required=True, metavar="DIR",
                        help="the model directory (<train out>/model)")
    parser.add_argument("--tasks", required=True, help="comma-separated lm-eval task or group names "
                                                       "(e.g. arc_easy,hellaswag,piqa), and/or recall")
    parser.add_argument("--include-path", action="append", metavar="TASK_DIR",
                        help="a folder of task YAMLs to add to lm-eval's (as lm-eval's --include_path); "
                             "repeatable")
    parser.add_argument("--limit", type=float, help="at most this many documents per task (a fraction when "
                                                    "< 1); for quick checks, not for reported numbers. recall: "
                                                    "sequences per kind of span and AR windows (default "
                                                    f"{DEFAULT_SEQUENCES}, at least 2)")
    parser.add_argument("--num-fewshot", type=int, help="few-shot examples per prompt (default: the task's, "
                                                        "usually 0)")
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per forward (default 8)")
    parser.add_argument("--device", default="auto", help="what it runs on: auto (CUDA when available), cpu, cuda "
                                                         "(or gpu), cuda:1, ...")
    parser.add_argument("--tokenizer", help="tokenizer, as composer train --tokenizer takes it (default: the "
                                            "one recorded with the model)")
    parser.add_argument("--seed", type=seed_number, default=1234,
                        help="seed of few-shot sampling and sampling decoders, and of recall's spans and fillers")
    recall = parser.add_argument_group("recall (Composer's own task; defaults from the model's run)")
    recall.add_argument("--data", help="the text whose validation split is held out (default: the run's data, "
                                       "else the offline default corpus); a local file, glob or directory")
    recall.add_argument("--data-seed", type=seed_number,
                        help="the split seed of --data (default: the run's, else 0)")
    recall.add_argument("--seq-len", type=int, help="context in tokens (default: what the model trained at)")
    recall.add_argument("--span", type=int, help="tokens per repeated span (default 64 bytes or 32 subword "
                                                 "tokens, at most a quarter of --seq-len)")
    recall.add_argument("--ngram", type=int, help="n of the AR slice's n-grams (default 8 bytes or 3 subword "
                                                  "tokens)")
    parser.add_argument("--out", metavar="DIR", help="where to write eval.json (default: the run directory "
                                                     "holding model/, else the model directory)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run)


def default_out(model: Path) -> Path:
    return model.parent if model.name == "model" else model


def run(args: argparse.Namespace) -> int:
    """lm-eval's tasks through the harness and ``recall`` through composer.evaluation.context_recall, into one
    eval.json; recall alone never imports lm-eval."""
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    harness_tasks = [t for t in tasks if t != TASK]
    if not tasks:
        raise ConfigError("no task given: pass --tasks with comma-separated lm-eval task names (e.g. arc_easy) "
                          f"or {TASK}")
    if harness_tasks:
        from composer.evaluation.downstream import require_lm_eval

        require_lm_eval()
    limit = args.limit
    if limit is not None and limit >= 1:
        if limit != int(limit):
            raise ConfigError(f"--limit {limit} must be a whole number of documents or a fraction below 1")
        limit = int(limit)
    if args.batch_size < 1:
        raise ConfigError(f"--batch-size must be a positive integer, got {args.batch_size}")
    from composer.precision import resolve_device

    args.device = str(resolve_device(args.device))  # the same words and check as every command's --device
    model = Path(args.model)
    from composer.files import atomic_write_json, check_output_dir, make_output_dir

    out = Path(args.out) if args.out else default_out(model)  # made once there is a report (issue 61: a model
    # that is not one, or tasks or data that are wrong, left an empty --out behind)
    check_output_dir(out)
    report = measure_recall(args, model, limit) if TASK in tasks else None
    if harness_tasks:
        from composer.evaluation.downstream import evaluate

        recall = report
        report = evaluate(
            model, harness_tasks, include_path=args.include_path, limit=limit, batch_size=args.batch_size,
            device=args.device, tokenizer=args.tokenizer, num_fewshot=args.num_fewshot, seed=args.seed,
        )
        if recall is not None:
            report[TASK] = recall[TASK]
    path = atomic_write_json(make_output_dir(out) / "eval.json", report)
    report["path"] = str(path)
    if args.json:
        print_json(report)
        return 0
    print_report(report, path)
    return 0


def measure_recall(args: argparse.Namespace, model: Path, limit: int | float | None) -> dict:
    """``composer eval``'s report of the recall task alone (model, pattern, params, tokenizer, recall)."""
    from composer.evaluation.context_recall import measure_model_dir

    if limit is not None and (not isinstance(limit, int) or limit < 2):
        raise ConfigError(f"--limit {args.limit}: recall needs a whole number of sequences, at least 2")
    return measure_model_dir(
        model, tokenizer=args.tokenizer, data=args.data, data_seed=args.data_seed, seq_len=args.seq_len,
        span=args.span, ngram=args.ngram, sequences=DEFAULT_SEQUENCES if limit is None else limit, seed=args.seed,
        batch_size=args.batch_size, device=args.device,
    )


def print_report(report: dict, path: Path) -> None:
    """The harness tasks' table and the recall tables, then where the report was written."""
    from composer.evaluation import context_recall

    if "tasks" in report:
        from composer.evaluation.downstream import report_rows

        print_table(["task", "metric", "value", "stderr", "n"], report_rows(report))
    recall = report.get(TASK)
    if recall is not None:
        if "tasks" in report:
            print()
        print_table(["kind", "distance", "first loss", "second loss", "gain [95% interval]", "n"],
                    context_recall.copy_rows(recall))
        print()
        ar = recall["ar_slice"]
        print_table([f"AR slice, {ar['ngram']}-grams", "loss", "against", "difference [95% interval]", "windows"],
                    context_recall.ar_rows(recall))
        share = "n/a" if ar["hit_share"] is None else f"{ar['hit_share']:.1%}"
        print(f"\nrecall at {recall['seq_len']} tokens ({recall['seq_len_source']}), spans of {recall['span']}, "
              f"AR hits {share} of tokens; held out: {recall['data']['split']}, {recall['elapsed_s']:.1f}s")
    elapsed = f", {report['config']['elapsed_s']:.1f}s" if "config" in report else ""
    print(f"\n{report['pattern']}, tokenizer {report['tokenizer']['name']}{elapsed}; written to {path}")
