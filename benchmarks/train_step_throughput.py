"""Training-step throughput: Composer's Llama-pattern model vs Hugging Face ``LlamaForCausalLM``.

One training step = forward + loss + backward + ``AdamW.step()`` (CPU, float32). Both models are built at the
identical shape (asserted by parameter count), start from the *same weights* (ours are copied into the HF model,
checked by comparing the first loss), see the same batches and use the same optimizer settings. Timed steps
alternate between the two models (A B A B ...) so that drift in machine load hits both alike; the report gives
the median step time, tokens/s = batch * seq_len / median and the ratio ours / HF.

Run from the repository root::

    python benchmarks/train_step_throughput.py              # small default config, about 40 s on 2 cores
    python benchmarks/train_step_throughput.py --json       # one JSON object instead of the table
    python benchmarks/train_step_throughput.py --d-model 512 --blocks 8 --seq-len 512 --steps 20

Needs ``transformers`` (``pip install 'composer-hnas[bench]'``).
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import platform
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

# Plain script, not a package: make the repository root importable when run as ``python benchmarks/...``.
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import torch  # noqa: E402

from composer.config import ArchConfig  # noqa: E402
from composer.model import IGNORE_INDEX, build_model  # noqa: E402

LR = 1e-3
WEIGHT_DECAY = 0.1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Training-step throughput (fwd + bwd + AdamW, CPU float32) of Composer's (AM)xN model "
        "against transformers' LlamaForCausalLM at the identical config.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--d-model", type=int, default=256, help="hidden size")
    p.add_argument("--blocks", type=int, default=4, help="transformer blocks (pattern (AM)x<blocks>)")
    p.add_argument("--heads", type=int, default=8, help="query heads")
    p.add_argument("--kv-heads", type=int, default=4, help="key/value heads (GQA)")
    p.add_argument("--head-dim", type=int, default=32, help="per-head width")
    p.add_argument("--ffn", type=int, default=1024, help="SwiGLU hidden width")
    p.add_argument("--vocab", type=int, default=8192, help="vocabulary size (embeddings are tied)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--steps", type=int, default=20, help="timed steps per model")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per model before timing")
    p.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch intra-op threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--modes", default="eager,compiled",
                   help="comma-separated: eager, compiled (ours: composer train --compile, per layer plus the "
                   "fused head and loss; HF: torch.compile of the whole LlamaForCausalLM)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="both models alike: fp32, or bf16 autocast (as Lightning's bf16-mixed)")
    p.add_argument("--json", action="store_true", help="print one JSON object with the figures, no table")
    args = p.parse_args(argv)
    for name in ("d_model", "blocks", "heads", "kv_heads", "head_dim", "ffn", "vocab", "batch_size",
                 "seq_len", "steps", "threads"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    if args.heads % args.kv_heads:
        p.error("--heads must be a multiple of --kv-heads")
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.modes or set(args.modes) - {"eager", "compiled"}:
        p.error("--modes takes eager and/or compiled")
    if "compiled" in args.modes and args.warmup < 2:
        p.error("--warmup must be >= 2 with compiled modes (the first steps compile)")
    return args


def import_transformers():
    try:
        import transformers
    except ModuleNotFoundError as err:
        if err.name != "transformers":  # transformers is there but one of its imports is broken: show it
            raise
        sys.exit("this benchmark needs transformers: pip install 'composer-hnas[bench]'")
    from transformers import LlamaConfig, LlamaForCausalLM
    return transformers, LlamaConfig, LlamaForCausalLM


def param_count(model: torch.nn.Module) -> int:
    # ``parameters()`` yields a shared (tied) tensor once.
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def copy_weights(ours, hf, arch: ArchConfig) -> None:
    """Load our weights into the HF model (fused wqkv / w13 split; RoPE layouts already agree)."""
    q_dim, kv_dim = arch.n_heads * arch.head_dim, arch.n_kv_heads * arch.head_dim
    hf.model.embed_tokens.weight.copy_(ours.tok_embeddings.weight)
    hf.model.norm.weight.copy_(ours.norm.weight)
    if ours.output is not None:
        hf.lm_head.weight.copy_(ours.output.weight)
    for i, block in enumerate(hf.model.layers):
        attn_layer, mlp_layer = ours.layers[2 * i], ours.layers[2 * i + 1]
        q, k, v = attn_layer.primitive.wqkv.weight.split((q_dim, kv_dim, kv_dim), dim=0)
        block.self_attn.q_proj.weight.copy_(q)
        block.self_attn.k_proj.weight.copy_(k)
        block.self_attn.v_proj.weight.copy_(v)
        block.self_attn.o_proj.weight.copy_(attn_layer.primitive.wo.weight)
        block.input_layernorm.weight.copy_(attn_layer.norm.weight)
        gate, up = mlp_layer.primitive.w13.weight.chunk(2, dim=0)
        block.mlp.gate_proj.weight.copy_(gate)
        block.mlp.up_proj.weight.copy_(up)
        block.mlp.down_proj.weight.copy_(mlp_layer.primitive.w2.weight)
        block.post_attention_layernorm.weight.copy_(mlp_layer.norm.weight)


def hf_param_groups(model, weight_decay: float) -> list[dict]:
    """The same split as ``ComposerModel.parameter_groups``: norms are not decayed, everything else is."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if name.endswith("norm.weight") else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    transformers, LlamaConfig, LlamaForCausalLM = import_transformers()
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    arch = ArchConfig(
        pattern=f"(AM)x{args.blocks}", d_model=args.d_model, n_heads=args.heads, n_kv_heads=args.kv_heads,
        head_dim=args.head_dim, ffn_dim=args.ffn, vocab_size=args.vocab, tie_embeddings=True,
        rope_theta=500_000.0, rope_scaling=None, max_seq_len=max(2048, args.seq_len),
    )
    ours = build_model(arch)
    hf_config = LlamaConfig(
        hidden_size=arch.d_model, intermediate_size=arch.ffn_dim, num_hidden_layers=args.blocks,
        num_attention_heads=arch.n_heads, num_key_value_heads=arch.n_kv_heads, head_dim=arch.head_dim,
        vocab_size=arch.vocab_size, tie_word_embeddings=arch.tie_embeddings, rope_theta=arch.rope_theta,
        max_position_embeddings=arch.max_seq_len, rms_norm_eps=arch.norm_eps, attention_bias=False,
        mlp_bias=False, hidden_act="silu", attention_dropout=0.0, use_cache=False, attn_implementation="sdpa",
    )
    hf = LlamaForCausalLM(hf_config)
    attn_impl = hf.config._attn_implementation
    if attn_impl != "sdpa":
        sys.exit(f"transformers picked attention implementation {attn_impl!r}, expected 'sdpa'")

    n_ours, n_hf = param_count(ours), param_count(hf)
    assert n_ours == n_hf, f"parameter counts differ: ours {n_ours:,} vs HF {n_hf:,}"
    copy_weights(ours, hf, arch)
    ours.train()
    hf.train()

    # Same batches for both: random token ids; HF shifts labels internally and ignores the last position, so
    # ours gets targets = input shifted by one with the last position ignored: loss over B*T logits in both.
    gen = torch.Generator().manual_seed(args.seed)
    n_batches = 4
    batches = []
    for _ in range(n_batches):
        ids = torch.randint(0, arch.vocab_size, (args.batch_size, args.seq_len), generator=gen)
        targets = torch.cat((ids[:, 1:], torch.full((args.batch_size, 1), IGNORE_INDEX)), dim=1)
        batches.append((ids, targets))

    from composer.training.parallelize import apply_compile

    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if args.precision == "bf16" else nullcontext

    def make_step(model, groups, forward):
        optimizer = torch.optim.AdamW(groups, lr=LR)

        def step(i: int) -> float:
            ids, targets = batches[i % n_batches]
            optimizer.zero_grad(set_to_none=True)
            with autocast():
                loss = forward(model, ids, targets)
            loss.backward()
            optimizer.step()
            return loss.item()

        return step

    # One model per (implementation, mode), all from the same weights; each has its own optimizer.
    runners = {}
    for mode in args.modes:
        our_model, hf_model = (ours, hf) if mode == "eager" else (copy.deepcopy(ours), copy.deepcopy(hf))
        forward_hf = lambda model, ids, targets: model(input_ids=ids, labels=ids).loss  # noqa: E731
        if mode == "compiled":
            apply_compile(our_model)  # what `composer train --compile` does
            forward_hf = torch.compile(forward_hf)  # HF's documented way: compile the whole model call
        runners[f"ours-{mode}"] = make_step(our_model, our_model.parameter_groups(WEIGHT_DECAY),
                                            lambda model, ids, targets: model(ids, targets).loss)
        runners[f"hf-{mode}"] = make_step(hf_model, hf_param_groups(hf_model, WEIGHT_DECAY), forward_hf)
    names = list(runners)
    times: dict[str, list[float]] = {name: [] for name in names}
    first_loss: dict[str, float] = {}
    last_loss: dict[str, float] = {}
    gc.collect()
    gc.disable()  # no collector pauses inside a timed step
    try:
        for i in range(args.warmup + args.steps):
            # Rotate which runner goes first each round, so drift in machine load hits all alike.
            order = names[i % len(names):] + names[: i % len(names)]
            for name in order:
                t0 = time.perf_counter()
                loss = runners[name](i)
                dt = time.perf_counter() - t0
                first_loss.setdefault(name, loss)
                last_loss[name] = loss
                if i >= args.warmup:
                    times[name].append(dt)
    finally:
        gc.enable()

    # Same weights and data, so the first-step losses agree up to reduction order (and bf16 rounding).
    tolerance = (2e-2 if args.precision == "bf16" else 1e-3) * max(1.0, abs(first_loss[names[1]]))
    for name in names:
        if abs(first_loss[name] - first_loss[names[0]]) > tolerance:
            print(f"warning: first-step losses differ ({name} {first_loss[name]:.6f}, {names[0]} "
                  f"{first_loss[names[0]]:.6f}); the models may not compute the same function", file=sys.stderr)

    tokens = args.batch_size * args.seq_len
    result = {
        "peer": f"transformers {transformers.__version__} LlamaForCausalLM ({attn_impl})",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "config": {
            "pattern": arch.compact, "d_model": arch.d_model, "n_heads": arch.n_heads,
            "n_kv_heads": arch.n_kv_heads, "head_dim": arch.head_dim, "ffn_dim": arch.ffn_dim,
            "vocab_size": arch.vocab_size, "tie_embeddings": arch.tie_embeddings,
            "batch_size": args.batch_size, "seq_len": args.seq_len, "steps": args.steps,
            "warmup": args.warmup, "seed": args.seed, "precision": args.precision, "device": "cpu",
            "modes": args.modes,
            "optimizer": f"AdamW(lr={LR}, weight_decay={WEIGHT_DECAY}, torch defaults otherwise)",
        },
        "parameters": n_ours,
        "tokens_per_step": tokens,
        "first_loss": first_loss,
        "final_loss": last_loss,
        "runs": {},
    }
    for name in names:
        median = statistics.median(times[name])
        result["runs"][name] = {
            "median_step_s": median,
            "min_step_s": min(times[name]),
            "max_step_s": max(times[name]),
            "tokens_per_s": tokens / median,
            "step_times_s": times[name],
        }
    runs = result["runs"]
    for mode in args.modes:
        result[f"ratio_{mode}"] = runs[f"ours-{mode}"]["tokens_per_s"] / runs[f"hf-{mode}"]["tokens_per_s"]
    best = {side: max((n for n in names if n.startswith(side + "-")), key=lambda n: runs[n]["tokens_per_s"])
            for side in ("ours", "hf")}
    result["best"] = best
    # The headline: each side in its own best mode, at the same precision.
    result["ratio"] = runs[best["ours"]]["tokens_per_s"] / runs[best["hf"]]["tokens_per_s"]
    # Cross-checks on a shared machine: per-round ratios of the two best modes (their steps ran back to back, so
    # slow drift cancels) and the ratio of their fastest steps (closest to the unloaded speed).
    result["ratio_paired_median"] = statistics.median(
        h / o for o, h in zip(times[best["ours"]], times[best["hf"]])
    )
    result["ratio_best_step"] = runs[best["hf"]]["min_step_s"] / runs[best["ours"]]["min_step_s"]
    result["noisy"] = any(run["median_step_s"] > 1.25 * run["min_step_s"] for run in runs.values())

    if args.json:
        print(json.dumps(result))
        return 0

    c = result["config"]
    print(f"Training-step throughput: forward + backward + AdamW step, CPU, {args.precision}")
    print(f"  torch {result['torch']}, python {result['python']}, {result['threads']} threads")
    print(f"  peer: {result['peer']}")
    print(
        f"  config: pattern {c['pattern']}, d_model {c['d_model']}, heads {c['n_heads']}/{c['n_kv_heads']} kv, "
        f"head_dim {c['head_dim']}, ffn {c['ffn_dim']}, vocab {c['vocab_size']} (tied)"
    )
    print(
        f"  batch {c['batch_size']} x seq {c['seq_len']} = {tokens:,} tokens/step; "
        f"{c['warmup']} warmup + {c['steps']} timed steps per run, interleaved"
    )
    print(f"  parameters: {n_ours:,} (identical in both models)")
    print("  first-step loss: " + ", ".join(f"{n} {first_loss[n]:.5f}" for n in names) + " (same weights and data)")
    print()
    header = f"  {'run':<52} {'median s/step':>13} {'min':>8} {'max':>8} {'tokens/s':>10}"
    print(header)
    print("  " + "-" * (len(header) - 2))
    for name in names:
        side, mode = name.split("-")
        label = f"composer ({c['pattern']})" if side == "ours" else result["peer"]
        r = runs[name]
        print(f"  {label + ', ' + mode:<52} {r['median_step_s']:>13.4f} {r['min_step_s']:>8.4f} "
              f"{r['max_step_s']:>8.4f} {r['tokens_per_s']:>10,.0f}")
    print()
    if result["noisy"]:
        print("  note: a median step > 1.25x its fastest one: the machine was busy; rerun idle or with more --steps")
    for mode in args.modes:
        print(f"  ratio ours/HF, both {mode}: {result[f'ratio_{mode}']:.3f}")
    print(f"  cross-checks (best modes): median of per-round ratios {result['ratio_paired_median']:.3f}, "
          f"fastest-step ratio {result['ratio_best_step']:.3f}")
    print(f"  ratio ours best ({best['ours']}) / HF best ({best['hf']}), tokens/s: {result['ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
