"""Training throughput of every registered primitive against attention, and on CUDA of each kernel against its
pure-PyTorch reference.

One residual layer (``x + primitive(RMSNorm(x))``) per primitive, built from the same architecture widths, runs
forward + backward on random activations; tokens/s = batch x seq / median step. The named peer is ``A`` (causal
grouped-query attention through torch's scaled_dot_product_attention), measured in the same run with steps
interleaved round-robin across primitives so that drifting machine load hits all of them alike.

On CUDA, primitives whose config has a ``backend`` option (S, D: "torch" vs "cuda"; A, W: "sdpa" vs "flash")
are also timed with each backend, and the outputs and input gradients of the two are compared (max abs error
relative to the reference's max abs value), so a kernel that is fast but wrong shows up.

    python benchmarks/primitive_throughput.py                      # CPU, d 128, seq 256, batch 8
    python benchmarks/primitive_throughput.py --device cuda --d-model 2048 --seq-len 4096 --batch-size 4
    python benchmarks/primitive_throughput.py --primitives ASDW --window 64 --json
    python benchmarks/primitive_throughput.py --preset demo-4m --seq-len 128 --batch-size 16 --threads 1
    python benchmarks/primitive_throughput.py --preset demo-4m --decode --threads 1 --json   # decode steps too

``--decode`` also times one decoding step of each layer (``forward_cached`` of one token through its inference
cache, no gradients) at batch 1 and 64 after a ``--decode-context``-token prompt, with the layer's decode FLOPs
per token where the primitive counts them (``decode_flops_per_token``) and the rate per FLOP against ``M``'s.
A batch-1 step is bound by its ops' dispatch, not their arithmetic, so its rate per FLOP is far below a GEMM's
for every primitive; the column says by how much.

Per FLOP: each row also gives GFLOP/s (the primitive's training FLOPs per token at ``--seq-len``, what
``composer info`` counts, times tokens/s) and that rate against ``M``'s, a GEMM-bound layer and so the practical
ceiling on this machine: a primitive at 0.5 spends twice the time per FLOP that a matmul does.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import statistics
import sys
import time

import torch

from composer.config import ArchConfig
from composer.model import ResidualLayer
from primitives.base import InitScheme
from primitives.registry import REGISTRY

KERNEL_BACKENDS = {"A": ("sdpa", "flash"), "W": ("sdpa", "flash"), "S": ("torch", "cuda"), "D": ("torch", "cuda")}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--primitives", default=REGISTRY.symbols, help="symbols to time (default: all registered)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--preset", help="take d_model, heads, kv heads, head dim and ffn from this preset (e.g. demo-4m)")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--ffn", type=int, default=512)
    p.add_argument("--window", type=int, default=64, help="W's window (default 64, a quarter of the sequence)")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--decode", action="store_true", help="also time one decoding step per layer (see above)")
    p.add_argument("--decode-batch-sizes", default="1,64")
    p.add_argument("--decode-context", type=int, default=1_024)
    p.add_argument("--json", action="store_true")
    return p.parse_args(argv)


def make_arch(args) -> ArchConfig:
    if args.preset:
        from composer.presets import get_preset

        widths = get_preset(args.preset).arch
        args.d_model, args.heads, args.kv_heads = widths.d_model, widths.n_heads, widths.n_kv_heads
        args.head_dim, args.ffn = widths.head_dim, widths.ffn_dim
    return ArchConfig(
        pattern="".join(dict.fromkeys(("A", "M", *args.primitives))),  # the peers are always built
        d_model=args.d_model, n_heads=args.heads, n_kv_heads=args.kv_heads,
        head_dim=args.head_dim, ffn_dim=args.ffn, vocab_size=256, max_seq_len=max(args.seq_len, 2048),
        options={"W": {"window": args.window}} if "W" in args.primitives else {},
    )


def build_layer(arch: ArchConfig, symbol: str, device, dtype, backend: str | None = None) -> ResidualLayer:
    cls = REGISTRY.get(symbol)
    config = arch.primitive_configs()[symbol]
    if backend is not None:
        config = dataclasses.replace(config, backend=backend)
    torch.manual_seed(0)
    with torch.device(device):
        layer = ResidualLayer(cls(config), arch.d_model, arch.norm_eps)
        layer.primitive.reset_parameters(InitScheme(std=arch.init_std, n_layers=arch.n_layers))
    return layer.to(dtype)


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def step(layer: ResidualLayer, x: torch.Tensor) -> None:
    layer.zero_grad(set_to_none=True)
    layer(x).float().square().mean().backward()


def time_round_robin(layers: dict[str, ResidualLayer], x: torch.Tensor, steps: int, warmup: int, device) -> dict:
    times: dict[str, list[float]] = {name: [] for name in layers}
    for _ in range(warmup):
        for layer in layers.values():
            step(layer, x)
    sync(device)
    gc.disable()
    try:
        for i in range(steps):
            names = list(layers) if i % 2 == 0 else list(reversed(layers))
            for name in names:
                sync(device)
                start = time.perf_counter()
                step(layers[name], x)
                sync(device)
                times[name].append(time.perf_counter() - start)
    finally:
        gc.enable()
    return {name: statistics.median(t) for name, t in times.items()}


@torch.no_grad()
def time_decode(layers: dict[str, ResidualLayer], d_model: int, batch: int, context: int, steps: int,
                warmup: int, device, dtype) -> dict[str, float]:
    """Median seconds of one decoding step (one token, ``forward_cached`` at position ``context``) per layer, its
    cache holding a ``context``-token prompt; steps interleaved round-robin across the layers."""
    caches, x = {}, torch.randn(batch, 1, d_model, device=device, dtype=dtype)
    for name, layer in layers.items():
        cache = layer.primitive.init_cache(batch, context + warmup + steps + 1, device, dtype)
        layer.forward_cached(torch.randn(batch, context, d_model, device=device, dtype=dtype), cache, 0)
        caches[name] = cache
    times: dict[str, list[float]] = {name: [] for name in layers}
    for i in range(warmup + steps):
        for name in (list(layers) if i % 2 == 0 else list(reversed(layers))):
            sync(device)
            start = time.perf_counter()
            layers[name].forward_cached(x, caches[name], context + i)
            sync(device)
            if i >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def decode_rows(layers, arch, args, device, dtype) -> list[dict]:
    """:func:`time_decode` at each ``--decode-batch-sizes``, with the rate per FLOP against ``M``'s."""
    configs, rows = arch.primitive_configs(), []
    # None where the primitives predate the count (a tree from before the cost model, timed for comparison)
    counts = {s: getattr(REGISTRY.get(s), "decode_flops_per_token", None) for s in layers}
    flops = {s: count(configs[s], args.decode_context) if count else None for s, count in counts.items()}
    for batch in (int(b) for b in args.decode_batch_sizes.split(",")):
        medians = time_decode(layers, arch.d_model, batch, args.decode_context, args.steps, args.warmup, device,
                              dtype)
        mlp_rate = flops["M"] * batch / medians["M"] if flops.get("M") else None
        for s, seconds in medians.items():
            rate = flops[s] * batch / seconds if flops[s] else None
            rows.append({"primitive": s, "batch": batch, "context": args.decode_context, "step_ms": seconds * 1e3,
                         "decode_flops_per_token": flops[s], "gflops_per_s": rate / 1e9 if rate else None,
                         "flop_rate_vs_mlp": rate / mlp_rate if rate and mlp_rate else None})
    return rows


def agreement(reference: ResidualLayer, kernel: ResidualLayer, x: torch.Tensor) -> dict[str, float]:
    """Relative max error of the kernel's output and input gradient against the reference, same weights."""
    kernel.load_state_dict(reference.state_dict())
    results = []
    for layer in (reference, kernel):
        xi = x.detach().clone().requires_grad_(True)
        out = layer(xi)
        out.float().square().mean().backward()
        results.append((out.detach().float(), xi.grad.detach().float()))
    (out_r, grad_r), (out_k, grad_k) = results
    return {"output": ((out_k - out_r).abs().max() / out_r.abs().max()).item(),
            "input_grad": ((grad_k - grad_r).abs().max() / grad_r.abs().max()).item()}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    unknown = [s for s in args.primitives if s not in REGISTRY]
    if unknown:
        print(f"unknown primitive(s) {unknown}; registered: {REGISTRY.describe()}", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    arch = make_arch(args)
    symbols = list(dict.fromkeys(("A", "M", *args.primitives)))
    layers = {s: build_layer(arch, s, device, dtype) for s in symbols}
    x = torch.randn(args.batch_size, args.seq_len, args.d_model, device=device, dtype=dtype)
    tokens = args.batch_size * args.seq_len
    medians = time_round_robin(layers, x, args.steps, args.warmup, device)
    configs = arch.primitive_configs()
    flops = {s: REGISTRY.get(s).flops_per_token(configs[s], args.seq_len) for s in symbols}
    rate = {s: flops[s] * tokens / medians[s] for s in symbols}  # training FLOP/s
    rows = [{"primitive": s, "name": REGISTRY.get(s).name, "median_ms": medians[s] * 1e3,
             "tokens_per_s": tokens / medians[s], "vs_attention": medians["A"] / medians[s],
             "flops_per_token": flops[s], "gflops_per_s": rate[s] / 1e9, "flop_rate_vs_mlp": rate[s] / rate["M"]}
            for s in symbols]

    decode = decode_rows(layers, arch, args, device, dtype) if args.decode else []
    kernels = []
    if device.type == "cuda":
        for symbol in symbols:
            if symbol not in KERNEL_BACKENDS:
                continue
            ref_backend, fast_backend = KERNEL_BACKENDS[symbol]
            try:
                pair = {b: build_layer(arch, symbol, device, dtype, b) for b in (ref_backend, fast_backend)}
                t = time_round_robin(pair, x, args.steps, args.warmup, device)
                err = agreement(pair[ref_backend], pair[fast_backend], x)
            except Exception as exc:  # the kernel's package is missing or refuses this shape
                kernels.append({"primitive": symbol, "error": f"{type(exc).__name__}: {exc}"[:200]})
                continue
            kernels.append({"primitive": symbol, "reference": ref_backend, "kernel": fast_backend,
                            "reference_ms": t[ref_backend] * 1e3, "kernel_ms": t[fast_backend] * 1e3,
                            "speedup": t[ref_backend] / t[fast_backend], **{f"rel_err_{k}": v for k, v in err.items()}})

    result = {"device": str(device), "dtype": str(dtype).removeprefix("torch."), "torch": torch.__version__,
              "threads": torch.get_num_threads(), "shape": [args.batch_size, args.seq_len, args.d_model],
              "peer": "A (causal GQA, torch scaled_dot_product_attention); per FLOP: M (SwiGLU MLP, GEMM-bound)",
              "preset": args.preset, "primitives": rows, "decode": decode, "kernels": kernels}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"one residual layer, forward + backward, {args.batch_size} x {args.seq_len} x d {args.d_model}, "
          f"{result['dtype']} on {device} ({result['threads']} threads), torch {torch.__version__}; "
          f"peer: {result['peer']}")
    print(f"{'primitive':<28}{'median ms':>10}{'tokens/s':>12}{'vs A':>8}{'GFLOP/s':>10}{'per FLOP vs M':>15}")
    for r in rows:
        print(f"{r['primitive'] + ' ' + r['name']:<28}{r['median_ms']:>10.2f}{r['tokens_per_s']:>12,.0f}"
              f"{r['vs_attention']:>8.2f}{r['gflops_per_s']:>10.1f}{r['flop_rate_vs_mlp']:>15.2f}")
    if decode:
        print(f"\none decoding step per layer after {args.decode_context:,} tokens (no gradients); per FLOP: "
              f"decode FLOPs per token x batch / step time, against M's")
        print(f"{'primitive':<12}{'batch':>6}{'step ms':>10}{'GFLOP/s':>10}{'per FLOP vs M':>15}")
        for r in decode:
            rate = "-" if r["gflops_per_s"] is None else f"{r['gflops_per_s']:.2f}"
            ratio = "-" if r["flop_rate_vs_mlp"] is None else f"{r['flop_rate_vs_mlp']:.2f}"
            print(f"{r['primitive']:<12}{r['batch']:>6}{r['step_ms']:>10.3f}{rate:>10}{ratio:>15}")
    for k in kernels:
        if "error" in k:
            print(f"kernel {k['primitive']}: not run ({k['error']})")
        else:
            print(f"kernel {k['primitive']}: {k['kernel']} {k['kernel_ms']:.2f} ms vs {k['reference']} "
                  f"{k['reference_ms']:.2f} ms = {k['speedup']:.2f}x; rel. error output {k['rel_err_output']:.1e}, "
                  f"input grad {k['rel_err_input_grad']:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
