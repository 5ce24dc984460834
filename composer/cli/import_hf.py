"""``composer import HF_DIR --out DIR``: a transformers Llama-family checkpoint as a Composer model
(composer/interop/hf_import.py)."""

from __future__ import annotations

import argparse

from composer.cli.format import old_spelling, print_json, print_rows


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import",
        help="import a transformers Llama/Mistral checkpoint as a Composer (AM)xN model",
        description="Read a checkpoint saved with save_pretrained (config.json + safetensors) and write it as a "
                    "Composer model directory (config.json + model.safetensors + its tokenizer files), usable by "
                    "generate, eval, export and hybridize. Llama (incl. Llama 3 RoPE scaling) and Mistral (a "
                    "sliding window becomes W layers) import exactly; anything else is refused by name.",
    )
    parser.add_argument("source", metavar="HF_DIR", help="the transformers checkpoint directory")
    parser.add_argument("--out", required=True, metavar="DIR", help="the Composer model directory to write")
    old_spelling(parser, "--dtype", parser.add_argument(
        "--precision", dest="dtype", default="fp32",
        help="the number format the weights are written in: fp32 (default, which training keeps as master weights), "
             "bf16 or fp16 (float32, bfloat16, float16 also work)"))
    parser.add_argument("--verify", action="store_true",
                        help="also run both models on random tokens and print the max logit difference "
                             "(needs transformers)")
    parser.add_argument("--force", action="store_true", help="write into a non-empty --out")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from composer.interop.hf_import import import_hf
    from composer.precision import torch_dtype

    result = import_hf(args.source, args.out, dtype=torch_dtype(args.dtype), verify=args.verify,
                       force=args.force)
    if args.json:
        print_json(result.to_dict())
        return 0
    arch = result.arch
    rows = [("source", f"{result.source} ({result.model_type})"), ("pattern", arch.compact),
            ("widths", f"d_model {arch.d_model}, heads {arch.n_heads} (kv {arch.n_kv_heads}) x {arch.head_dim}, "
                       f"ffn {arch.ffn_dim}, vocab {arch.vocab_size}, "
                       f"{'tied' if arch.tie_embeddings else 'untied'}"),
            ("out", str(result.out)), ("tokenizer", ", ".join(result.tokenizer) or "none")]
    if result.max_logit_difference is not None:
        rows.append(("max |logit diff|", f"{result.max_logit_difference:.2e} vs transformers, float32"))
    print_rows(rows)
    for note in result.notes:
        print(f"note: {note}")
    return 0
