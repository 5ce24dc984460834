"""``composer pipeline --recipe FILE``: search -> aggregate -> extrapolate -> train composite and baselines -> compare;
with ``--from-search DIR``, a finished search's answer -> extrapolate -> train -> compare."""

from __future__ import annotations

import argparse
import sys

from composer.cli.format import RenamedFlag, old_spelling, print_json


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "pipeline",
        help="the whole method: search, aggregate, extrapolate, train against baselines, compare",
        description="Run a pipeline recipe (recipes/pipeline/) end to end. Every stage writes its result under "
                    "--out; finished trials and trainings are not redone, so a killed pipeline resumes where it stopped. "
                    "With --from-search (or the recipe's from_search), no search runs: the composite is a finished "
                    "search's answer, grown by its --attention-at-target at the rate it chose (docs/method.md).",
    )
    parser.add_argument("--recipe", required=True, help="pipeline YAML (e.g. recipes/pipeline/cpu-demo.yaml)")
    parser.add_argument("--from-search", metavar="DIR",
                        help="train a finished composer search's answer (DIR is its --out: best.json's recommended "
                             "pattern) instead of running the recipe's search and aggregate sections")
    parser.add_argument("--out", help="output directory (default: the recipe's out)")
    parser.add_argument("--stages", help="comma-separated subset of search,aggregate,extrapolate,train,eval,"
                                         "compare (default: all; later stages read earlier results from "
                                         "--out; eval runs only for a recipe with an eval section)")
    parser.add_argument("--trials", type=int, help="override search.trials")
    parser.add_argument("--budget", help="override search.budget (e.g. smoke)")
    parser.add_argument("--tokens", type=int, help="override train.tokens (every model)")
    parser.add_argument("--target", metavar="PRESET", help="override extrapolate.target (the target preset)")
    parser.add_argument("--to", dest="target", action=RenamedFlag, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    old_spelling(parser, "--attention", parser.add_argument("--attention-at-target", dest="attention",
                                                            choices=("repeat", "keep"),
                        help="override extrapolate.attention: how the winner's attention layers grow to --target "
                             "(default: the rule its search scored them by, --attention-at-target; else repeat)"))
    parser.add_argument("--lr-sweep", help="override train.lr_sweep: comma-separated rates (e.g. 1e-3,2e-3,3e-3,6e-3); "
                                           "every model first trains at each on a short budget and uses its best "
                                           "for all its seeds")
    parser.add_argument("--lr-sweep-fraction", type=float,
                        help="override train.lr_sweep_fraction: share of the tokens per sweep run (default 0.25)")
    parser.add_argument("--recall-sequences", type=int, metavar="N",
                        help="override train.recall_sequences: held-out sequences each trained model's recall is "
                             "measured on after its training (composer eval --tasks recall; default 32, 0: not "
                             "measured)")
    parser.add_argument("--seeds", help="override seeds: a count (3 = seeds 0,1,2) or comma-separated seeds "
                                        "(0,1,2); every model trains once per seed")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from composer.experiments.pipeline import (
        STAGES,
        Pipeline,
        PipelineConfig,
        format_comparison,
        format_downstream,
    )
    from composer.experiments.pipeline_recall import format_recall

    config = PipelineConfig.from_recipe(
        args.recipe, out=args.out, **{"search.trials": args.trials, "search.budget": args.budget,
                                      "train.tokens": args.tokens, "extrapolate.target": args.target,
                                      "extrapolate.attention": args.attention,
                                      "train.lr_sweep": args.lr_sweep,
                                      "train.lr_sweep_fraction": args.lr_sweep_fraction,
                                      "train.recall_sequences": args.recall_sequences,
                                      "seeds": args.seeds, "from_search": args.from_search},
    )
    stages = tuple(s.strip() for s in args.stages.split(",")) if args.stages else STAGES
    result = Pipeline(config, echo=lambda line: print(line, file=sys.stderr)).run(stages)
    if args.json:
        print_json(result)
    elif "comparison" in result:
        print(format_comparison(result["comparison"]))
        for table in (format_recall(result["comparison"]), format_downstream(result["comparison"])):
            if table:
                print(f"\n{table}")
        print(f"\ncomparison.{{md,csv,json}} and loss_curves.png in {result['out']}")
    else:
        source = "the search's answer" if config.from_search else "aggregated"
        print(f"{source} {result['aggregate']['pattern']} -> extrapolated {result['extrapolate']['pattern']}")
    return 0
