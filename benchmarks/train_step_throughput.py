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
import gc
import json
import platform
import statistics
import sys
import time
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

    opt_ours = torch.optim.AdamW(ours.parameter_groups(WEIGHT_DECAY), lr=LR)
    opt_hf = torch.optim.AdamW(hf_param_groups(hf, WEIGHT_DECAY), lr=LR)

    def step_ours(i: int) -> float:
        ids, targets = batches[i % n_batches]
        opt_ours.zero_grad(set_to_none=True)
        loss = ours(ids, targets).loss
        loss.backward()
        opt_ours.step()
        return loss.item()

    def step_hf(i: int) -> float:
        ids, _ = batches[i % n_batches]
        opt_hf.zero_grad(set_to_none=True)
        loss = hf(input_ids=ids, labels=ids).loss
        loss.backward()
        opt_hf.step()
        return loss.item()

    runners = {"ours": step_ours, "hf": step_hf}
    times: dict[str, list[float]] = {"ours": [], "hf": []}
    first_loss: dict[str, float] = {}
    last_loss: dict[str, float] = {}
    gc.collect()
    gc.disable()  # no collector pauses inside a timed step
    try:
        for i in range(args.warmup + args.steps):
            # Alternate which model goes first each round: A B, B A, A B, ...
            order = ("ours", "hf") if i % 2 == 0 else ("hf", "ours")
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

    # Same weights and data, so the first-step losses agree up to float32 reduction order.
    loss_diff = abs(first_loss["ours"] - first_loss["hf"])
    if loss_diff > 1e-3 * max(1.0, abs(first_loss["hf"])):
        print(
            f"warning: first-step losses differ (ours {first_loss['ours']:.6f}, HF {first_loss['hf']:.6f}); "
            "the two models may not compute the same function",
            file=sys.stderr,
        )

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
            "warmup": args.warmup, "seed": args.seed, "dtype": "float32", "device": "cpu",
            "optimizer": f"AdamW(lr={LR}, weight_decay={WEIGHT_DECAY}, torch defaults otherwise)",
        },
        "parameters": n_ours,
        "tokens_per_step": tokens,
        "first_loss": first_loss,
        "final_loss": last_loss,
    }
    for name in ("ours", "hf"):
        median = statistics.median(times[name])
        result[name] = {
            "median_step_s": median,
            "min_step_s": min(times[name]),
            "max_step_s": max(times[name]),
            "tokens_per_s": tokens / median,
            "step_times_s": times[name],
        }
    result["ratio_ours_over_hf"] = result["ours"]["tokens_per_s"] / result["hf"]["tokens_per_s"]
    # Robustness checks on a shared machine: the two steps of one round ran back to back under (nearly) the
    # same load, so the median of per-round ratios cancels slow drift; the best-step ratio shows the unloaded
    # speed of each. A large spread between a model's fastest and median step means the machine was busy.
    result["ratio_paired_median"] = statistics.median(h / o for o, h in zip(times["ours"], times["hf"]))
    result["ratio_best_step"] = result["hf"]["min_step_s"] / result["ours"]["min_step_s"]
    result["noisy"] = any(
        result[name]["median_step_s"] > 1.25 * result[name]["min_step_s"] for name in ("ours", "hf")
    )

    if args.json:
        print(json.dumps(result))
        return 0

    c = result["config"]
    print("Training-step throughput: forward + backward + AdamW step, CPU float32")
    print(f"  torch {result['torch']}, python {result['python']}, {result['threads']} threads")
    print(f"  peer: {result['peer']}")
    print(
        f"  config: pattern {c['pattern']}, d_model {c['d_model']}, heads {c['n_heads']}/{c['n_kv_heads']} kv, "
        f"head_dim {c['head_dim']}, ffn {c['ffn_dim']}, vocab {c['vocab_size']} (tied)"
    )
    print(
        f"  batch {c['batch_size']} x seq {c['seq_len']} = {tokens:,} tokens/step; "
        f"{c['warmup']} warmup + {c['steps']} timed steps per model, interleaved"
    )
    print(f"  parameters: {n_ours:,} (identical in both models)")
    print(f"  first-step loss: ours {first_loss['ours']:.5f}, HF {first_loss['hf']:.5f} (same weights and data)")
    print()
    header = f"  {'model':<44} {'median s/step':>13} {'min':>8} {'max':>8} {'tokens/s':>10}"
    print(header)
    print("  " + "-" * (len(header) - 2))
    for name, label in (("ours", f"composer ({c['pattern']})"), ("hf", result["peer"])):
        r = result[name]
        print(
            f"  {label:<44} {r['median_step_s']:>13.4f} {r['min_step_s']:>8.4f} {r['max_step_s']:>8.4f} "
            f"{r['tokens_per_s']:>10,.0f}"
        )
    print()
    print(f"  ratio ours/HF (tokens/s, median step): {result['ratio_ours_over_hf']:.3f}")
    print(
        f"  cross-checks: median of per-round ratios {result['ratio_paired_median']:.3f}, "
        f"fastest-step ratio {result['ratio_best_step']:.3f}"
    )
    if result["noisy"]:
        print(
            "  note: median step > 1.25x the fastest one: the machine was busy during the run; "
            "rerun on an idle machine or with more --steps"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
