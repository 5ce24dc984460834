"""``composer export --model DIR --format hf --out OUT``: a trained model as a Hugging Face checkpoint
(composer/interop/export.py)."""

from __future__ import annotations

import argparse

from composer.cli.format import print_json, print_rows
from composer.errors import ConfigError

FORMATS = ("hf",)  # composer.interop.export.FORMATS, repeated so that --help does not import torch


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a trained model to the Hugging Face transformers format",
        description="Write the model composer train saved in <out>/model as a transformers checkpoint. "
                    "A Llama pattern, (AM)xN, becomes a plain LlamaForCausalLM (no custom code); any other "
                    "pattern a remote-code model (trust_remote_code=True) whose modeling file imports "
                    "composer-hnas, which must then be installed to load it. The tokenizer the model was "
                    "trained with is written beside the weights.",
    )
    parser.add_argument("--model", required=True, metavar="DIR",
                        help="the model directory (<train out>/model)")
    parser.add_argument("--format", default="hf", metavar="FORMAT",
                        help=f"output format: {', '.join(FORMATS)} (default hf)")
    parser.add_argument("--out", required=True, metavar="OUT", help="directory to write (new or empty)")
    parser.add_argument("--tokenizer", help="tokenizer to write, as composer train --tokenizer takes it "
                                            "(default: the one recorded with the model)")
    parser.add_argument("--force", action="store_true", help="write into a non-empty OUT, replacing its "
                                                             "export files")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.format not in FORMATS:
        raise ConfigError(f"unknown --format {args.format!r}; supported: {', '.join(FORMATS)}")
    from composer.interop.export import export_hf

    result = export_hf(args.model, args.out, tokenizer=args.tokenizer, force=args.force)
    if args.json:
        print_json(result.to_dict())
        return 0
    kind = ("LlamaForCausalLM (no custom code)" if result.kind == "llama"
            else "remote code (trust_remote_code=True; needs composer-hnas installed to load)")
    print_rows([
        ("pattern", result.pattern),
        ("exported as", kind),
        ("out", str(result.out)),
        ("files", ", ".join(result.files)),
        ("tokenizer", result.tokenizer or "none written"),
        ("load with", result.to_dict()["load"]),
    ])
    for note in result.notes:
        print(f"note: {note}")
    return 0
