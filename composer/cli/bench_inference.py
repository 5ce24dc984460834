"""``composer bench-inference SPEC``: measured prefill/decode throughput and inference cache of an architecture,
beside its analytic cache and the Llama pattern of the same size (composer/evaluation/bench_inference.py)."""

from __future__ import annotations

import argparse
import sys

from composer.cli.format import human, old_spelling, print_json, print_table, resolve_spec
from composer.cli.parsing import seed_number
from composer.errors import ConfigError
from composer.precision import parse_dtype
from composer.presets import PRESETS

DEFAULT_WIDTHS = "demo-4m"  # a CPU-sized default; pass --preset llama-3.2-1b for the paper's scale on a GPU
DEFAULT_OUT = "runs/bench-inference"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench-inference",
        help="measured prefill/decode speed and cache memory, vs the analytic cache and a matched Llama",
        description="For each batch size and context length: prefill tokens/s and time to first token (the "
                    "prompt in one pass), decode tokens/s per sequence and in total (N tokens one at a time "
                    "through the inference cache), and the cache bytes allocated beside the analytic figure of "
                    "composer info. The same grid for the Llama pattern whose non-embedding parameters are "
                    "closest, and the ratios. Random token ids; one warmup run, median of --repeats (decode with "
                    "the range of the repeats). Writes "
                    "bench_inference.json and bench_inference.png (decode tokens/s against context) to --out.",
    )
    parser.add_argument(
        "spec", metavar="SPEC", nargs="?",
        help=f"a preset name ({', '.join(PRESETS)}) or a layer pattern such as '(AM)x2' or 'AMSMWM' "
             "(omit with --model)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--preset", help=f"widths for a pattern SPEC (default: {DEFAULT_WIDTHS})")
    source.add_argument("--model", metavar="DIR", help="benchmark a trained model directory (<train out>/model) "
                                                       "instead of a freshly built SPEC")
    # lists and numbers are parsed by run(): a bad value is one line and exit 2, like every usage error
    parser.add_argument("--batch-sizes", default="1,4", metavar="B,B", help="batch sizes (default 1,4)")
    parser.add_argument("--context-lengths", default="128,512,2048", metavar="L,L",
                        help="prompt lengths in tokens (default 128,512,2048)")
    parser.add_argument("--new-tokens", default="32", metavar="N",
                        help="tokens decoded one by one after the prompt (default 32)")
    parser.add_argument("--repeats", default="3", metavar="R",
                        help="timed repetitions: the median reported, decode tok/s with the range of the repeats "
                             "(default 3; one untimed warmup first; 1 prints no decode figure, one timing has no "
                             "spread)")
    old_spelling(parser, "--dtype", parser.add_argument(
        "--precision", dest="dtype", default="fp32", help="the number format of the weights and the cache: fp32 "
                                                          "(default), bf16 or fp16 (float32, bfloat16, float16 also "
                                                          "work)"))
    parser.add_argument("--device", default="auto", help="what it runs on: auto (CUDA when available), cpu, cuda "
                                                         "(or gpu), cuda:1, ...")
    parser.add_argument("--compile", action="store_true",
                        help="decode through the compiled step, as it is served: Inductor on the CPU, CUDA graphs "
                             "on CUDA (composer.inference.compile_decode_step; compiled in the untimed warmup, "
                             "once per batch size and cache length; eager where compiling fails, with a warning)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the matched Llama pattern")
    parser.add_argument("--seed", type=seed_number, default=0, metavar="S",
                        help="seed of the weights and token ids (default 0)")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                        help=f"where to write bench_inference.json and the plot (default {DEFAULT_OUT})")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.set_defaults(handler=run)


def positive_ints(text: str, flag: str) -> tuple[int, ...]:
    """``"1,4"`` -> ``(1, 4)``; anything but a comma-separated list of positive integers is a usage error."""
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) <= 0:
            raise ConfigError(f"{flag} must be comma-separated positive integers such as 1,4; got {text!r}")
        values.append(int(part))
    return tuple(dict.fromkeys(values))  # order kept, duplicates dropped


def run(args: argparse.Namespace) -> int:
    from composer.cli.generate import parse_number

    batch_sizes = positive_ints(args.batch_sizes, "--batch-sizes")
    contexts = positive_ints(args.context_lengths, "--context-lengths")
    new_tokens = parse_number(args.new_tokens, "--new-tokens", int, 1, what="a positive integer")
    repeats = parse_number(args.repeats, "--repeats", int, 1, what="a positive integer")
    seed = args.seed
    dtype = parse_dtype(args.dtype)
    if args.model is not None and args.spec is not None:
        raise ConfigError("give SPEC or --model DIR, not both (a model directory has its own pattern)")
    if args.model is None and args.spec is None:
        raise ConfigError("give a SPEC (a preset or a pattern such as '(AM)x2') or --model DIR")

    from composer.cli.generate import load_model, model_directory
    from composer.evaluation.bench_inference import (
        BenchGrid,
        check_bench_memory,
        plot_decode_throughput,
        run_bench,
    )
    from composer.files import atomic_write_json, check_output_dir, make_output_dir
    from composer.precision import resolve_device

    device = resolve_device(args.device)
    check_output_dir(args.out)
    notes: list[str] = []  # printed once the grid is accepted: a refusal is one line
    model = None
    if args.model is not None:
        directory = model_directory(args.model)
        model = load_model(directory, device)
        from scaling.matching import preset_of

        arch = model.arch
        widths = preset_of(arch)
    else:
        arch, widths = resolve_spec(args.spec, args.preset, DEFAULT_WIDTHS, notes)
    grid = BenchGrid(batch_sizes=batch_sizes, context_lengths=contexts, new_tokens=new_tokens, dtype=dtype,
                     repeats=repeats, seed=seed, compile=args.compile)
    check_bench_memory(arch, grid, device, baseline=not args.no_baseline)  # before a cache is allocated
    for note in notes:
        print(note, file=sys.stderr)
    out = make_output_dir(args.out)
    quiet = args.json
    progress = None if quiet else (lambda line: print(f"measuring {line}", file=sys.stderr, flush=True))
    result = run_bench(arch, grid, device, widths=widths, model=model, baseline=not args.no_baseline,
                       progress=progress)
    if args.model is not None:
        result["model"] = str(model_directory(args.model))
    plot = plot_decode_throughput(result, out / "bench_inference.png")
    result["files"] = {"json": str(out / "bench_inference.json"), "plot": str(plot)}
    atomic_write_json(out / "bench_inference.json", result)
    if args.json:
        print_json(result)
        return 0
    print_report(result)
    return 0


def decode_cell(row: dict) -> str:
    """Decode tokens/s per sequence with the range of its repeats, ``"128.3 (121.0-131.9)"``; ``"-"`` where it is
    one timing (``--repeats 1``, or a file written before the repeats were kept), which has no spread to show."""
    ms = row.get("decode_ms_per_token")
    if not ms or ms["repeats"] < 2:
        return "-"
    return f"{row['decode_tokens_per_s']:,.1f} ({1000 / ms['max']:,.1f}-{1000 / ms['min']:,.1f})"


def _rows_table(rows: list[dict]) -> None:
    header = ["batch", "context", "prefill tok/s", "TTFT ms", "decode tok/s/seq (range)", "decode tok/s total",
              "cache bytes", "analytic", "ratio"]
    print_table(header, [
        [str(r["batch"]), str(r["context"]), f"{r['prefill_tokens_per_s']:,.0f}",
         f"{r['time_to_first_token_s'] * 1000:.1f}", decode_cell(r),
         "-" if decode_cell(r) == "-" else f"{r['decode_tokens_per_s_total']:,.1f}", f"{r['cache_bytes']:,}",
         f"{r['cache_bytes_analytic']:,}", "-" if r["cache_bytes_ratio"] is None else f"{r['cache_bytes_ratio']:.3f}"]
        for r in rows
    ])


def _title(data: dict, label: str) -> str:
    widths = f" at {data['widths']} widths" if data.get("widths") else ""
    return (f"{label} {data['compact']}{widths}: {data['params']:,} params "
            f"({human(data['non_embedding_params'])} non-embedding)")


def print_report(result: dict) -> None:
    print(f"device {result['device_name']} ({result['threads']} threads), {result['dtype']}, "
          f"{result['new_tokens']} new tokens, median of {result['repeats']} after a warmup; random token ids")
    if result["repeats"] < 2:
        print("decode tok/s not printed: one timed run has no spread (a re-run of the same model has read 10x "
              "apart); --repeats 3 or more measures it")
    else:
        print(f"decode tok/s/seq: the median, in brackets the range, over {result['repeats']} repeats")
    paths = dict.fromkeys(r["decode_path"] for r in result["results"])
    print(f"decode: {', '.join(paths)}")
    print()
    print(_title(result, "pattern"))
    _rows_table(result["results"])
    if any(r["beyond_max_seq_len"] for r in result["results"]):
        print(f"note: some context + new tokens exceed the model's max_seq_len {result['max_seq_len']:,} "
              "(timings and cache are still exact; outputs there are outside the trained context)")
    llama = result.get("llama")
    if llama is not None:
        print()
        if llama.get("same_as_pattern"):
            print(f"{_title(llama, 'Llama')}: the pattern itself")
        else:
            print(_title(llama, "Llama"))
            _rows_table(llama["results"])
            print()
            print(f"{result['compact']} / Llama {llama['compact']}")
            print_table(["batch", "context", "decode tok/s", "prefill tok/s", "cache bytes"], [
                [str(r["batch"]), str(r["context"]),
                 f"{r['decode_tokens_per_s_ratio']:.2f}x" if result["repeats"] > 1 else "-",
                 f"{r['prefill_tokens_per_s_ratio']:.2f}x",
                 "-" if r["cache_bytes_ratio"] is None else f"{r['cache_bytes_ratio']:.3f}x"]
                for r in result["vs_llama"]
            ])
    print()
    print(f"wrote {result['files']['json']} and {result['files']['plot']}")
