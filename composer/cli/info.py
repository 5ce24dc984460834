"""``composer info SPEC``: the pattern, per-primitive counts, parameters, FLOPs and KV cache of an architecture."""

from __future__ import annotations

import argparse

from composer.accounting import DTYPE_BYTES, analyze
from composer.cli.equal_cost import add_equal_cost_flags, equal_cost_of
from composer.cli.equal_cost import cost_rows as equal_cost_rows
from composer.cli.format import human, old_spelling, print_json, print_rows, resolve_spec
from composer.cli.parsing import layers_or_family
from composer.errors import ConfigError
from composer.interop.formats import FORMATS, convert, format_text
from composer.presets import PRESETS
from primitives.registry import REGISTRY

DEFAULT_WIDTHS = "llama-3.2-1b"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "info",
        help="parameters, FLOPs and KV cache of a preset or pattern",
        description="Analytic accounting of an architecture (nothing is allocated, any size works).",
    )
    parser.add_argument(
        "spec",
        metavar="SPEC",
        help=f"a preset name ({', '.join(PRESETS)}) or a layer pattern such as 'AAMMMM' or '(AM)x16'",
    )
    parser.add_argument(
        "--preset",
        help=f"widths for a pattern SPEC (default: {DEFAULT_WIDTHS}); not allowed with a preset SPEC",
    )
    parser.add_argument("--seq-len", type=int, help="sequence length for FLOPs (default: min(8192, max))")
    old_spelling(parser, "--cache-dtype", parser.add_argument(
        "--cache-precision", dest="cache_dtype", choices=sorted(DTYPE_BYTES), default="bf16",
        help="the number format of the KV cache's elements (default bf16)"))
    parser.add_argument("--format", choices=FORMATS, dest="notation",
                        help="print the architecture in another engine's notation instead: megatron "
                             "(--hybrid-override-pattern and widths), hf (layer_types) or fla (attn layers)")
    old_spelling(parser, "--device", parser.add_argument(
                        "--cost-device", dest="cost_device", metavar="DEVICE",
                        help="also predict training tokens/s and decode ms per token (batch 1 and 64, 4K context) "
                             "on DEVICE with the cost model (cpu, h100, h200: composer/costmodel/constants.json)"))
    old_spelling(parser, "--depth", parser.add_argument(
                        "--depth-at-target", dest="depth", metavar="N|FAMILY", type=layers_or_family,
                        help="grow the pattern SPEC to --preset's size at exactly N layers (or a family's own depth "
                             "there) by width, and account for that model (its widths line names the scaled preset)"))
    old_spelling(parser, "--attention", parser.add_argument(
                        "--attention-at-target", dest="attention", choices=("repeat", "keep"), default="repeat",
                        help="with --depth-at-target: how the pattern's attention layers grow (default repeat)"))
    add_equal_cost_flags(parser, cost_device=False)  # --cost-device above is the device the cost is taken on
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    arch, widths = resolve_spec(args.spec, args.preset, DEFAULT_WIDTHS)
    rule = equal_cost_of(args, own_device=False)
    equal = None  # the model grown to equal cost, when --equal-cost asks for one
    if rule is not None:
        from search.growth import depth_at_target, grow

        if args.spec in PRESETS:
            raise ConfigError("--equal-cost grows a pattern SPEC to --preset's cost: give a pattern, not a preset")
        depth = None if args.depth is None else depth_at_target(args.depth, widths)
        equal = grow(arch.pattern, widths, None, args.attention, depth, equal_cost=rule)
        arch, widths = equal.arch, equal.widths
    elif args.depth is not None:
        from scaling.extrapolate import grow_to_depth
        from search.growth import depth_at_target

        if args.spec in PRESETS:
            raise ConfigError("--depth-at-target grows a pattern SPEC to --preset's size: give a pattern, not a preset")
        grown = grow_to_depth(arch.pattern, widths, depth_at_target(args.depth, widths), attention=args.attention)
        arch, widths = grown.arch, grown.target
    if args.seq_len is not None and args.seq_len <= 0:
        raise ConfigError(f"--seq-len must be a positive integer, got {args.seq_len}")
    if args.notation is not None:
        converted = convert(arch, args.notation)
        print_json(converted) if args.json else print(format_text(converted))
        return 0
    stats = analyze(arch, seq_len=args.seq_len, cache_dtype_bytes=DTYPE_BYTES[args.cache_dtype])
    cost = None
    if args.cost_device is not None:  # also where --equal-cost is costed
        from composer.costmodel import serving_summary

        cost = serving_summary(arch, args.cost_device, train_seq_len=args.seq_len)
    if args.json:
        print_json({"preset": widths, **stats.to_dict(), **(cost_json(cost) if cost else {}),
                    **({"equal_cost": equal.cost, "grown": equal.how} if equal is not None else {}),
                    "arch": arch.to_dict()})
        return 0
    counts = ", ".join(f"{symbol} {n} ({REGISTRY.get(symbol).name})" for symbol, n in stats.counts.items())
    tied = "tied" if arch.tie_embeddings else "untied"
    print_rows(
        [
            ("pattern", stats.pattern),
            ("compact", stats.compact),
            ("widths", f"{widths}: d_model {arch.d_model}, heads {arch.n_heads} (kv {arch.n_kv_heads}) x "
                       f"{arch.head_dim}, ffn {arch.ffn_dim}, vocab {arch.vocab_size} {tied}"),
            ("layers", f"{stats.n_layers}: {counts}"),
            ("params", f"{stats.params:,} ({human(stats.params)})"),
            ("non-embedding", f"{stats.non_embedding_params:,} ({human(stats.non_embedding_params)})"),
            *([("active", f"{stats.active_params:,} ({human(stats.active_params)}) used per token")]
              if stats.active_params != stats.params else []),
            ("FLOPs/token", f"{stats.flops_per_token:,} ({human(stats.flops_per_token)}, training, "
                            f"seq len {stats.seq_len})"),
            ("KV cache/token", f"{stats.kv_cache_bytes_per_token:,} bytes ({args.cache_dtype})"),
            ("cache/sequence", f"{human(stats.cache_bytes_per_sequence, 'B')} at seq len {stats.seq_len}"),
            *(equal_cost_rows(equal) if equal is not None else []),
            *(cost_rows(cost) if cost else []),
        ]
    )
    if len(stats.per_primitive) > 1 or any(p["state_bytes"] or p["window"] for p in stats.per_primitive.values()):
        print()
        print(f"{'per layer':<36}{'params':>12}{'FLOPs/token':>14}  inference cache ({args.cache_dtype})")
        for symbol, p in stats.per_primitive.items():
            print(f"{symbol + ' ' + p['name'] + ' x' + str(p['layers']):<36}{p['params_per_layer']:>12,}"
                  f"{p['flops_per_token_per_layer']:>14,}  {cache_text(p)}")
    return 0


def cache_text(p: dict) -> str:
    """``"256 B/token"``, ``"256 B/token over a 4096-token window"``, ``"20.2 KiB state"`` or ``"none"``."""
    parts = []
    if p["kv_bytes_per_token"]:
        window = f" over a {p['window']:,}-token window" if p["window"] is not None else ""
        parts.append(f"KV {p['kv_bytes_per_token']:,} B/token{window}")
    if p["state_bytes"]:
        parts.append(f"state {human(p['state_bytes'], 'B')}")
    return ", ".join(parts) or "none"


def cost_json(cost: dict) -> dict:
    """The cost model's figures for ``--json``: ``device``, ``context``, ``train_tokens_per_s`` (at ``train_batch``
    x ``train_seq_len``), ``prefill_tokens_per_s`` and ``decode_ms_per_token`` keyed by batch, and the constants
    used with their sources (``cost_constants``, ``cost_sources``)."""
    renamed = {"constants": "cost_constants", "sources": "cost_sources", "description": "device_description"}
    return {renamed.get(key, key): value for key, value in cost.items()}


def cost_rows(cost: dict) -> list[tuple[str, str]]:
    """The predicted rows under the analytic ones, and which constants made them (the kinds of their sources)."""
    decode = ", ".join(f"{ms:,.2f} ms/token at batch {b} ({cost['decode_bound'][b]} bound)"
                       for b, ms in cost["decode_ms_per_token"].items())
    prefill = ", ".join(f"{tps:,.0f} tokens/s at batch {b}" for b, tps in cost["prefill_tokens_per_s"].items())
    kinds: dict[str, int] = {}
    for constant in cost["constants"].values():
        source = cost["sources"][constant["source"]]
        kind = source["kind"] + (f" ({source['status']})" if source.get("status") else "")
        kinds[kind] = kinds.get(kind, 0) + 1
    threads = f", {cost['threads']} thread{'s' * (cost['threads'] != 1)}" if cost.get("threads") else ""
    return [
        ("device", f"{cost['device']}: {cost['description']} ({cost['precision']}{threads}); predicted by the "
                   f"cost model"),
        ("train (model)", f"{cost['train_tokens_per_s']:,.0f} tokens/s at {cost['train_batch']} x "
                          f"{cost['train_seq_len']}"),
        ("prefill (model)", f"{prefill}, {cost['context']:,}-token prompt"),
        ("decode (model)", f"{decode}, after {cost['context']:,} tokens"),
        ("constants", ", ".join(f"{n} {kind}" for kind, n in kinds.items())
                      + " (--json lists each with its source)"),
    ]

