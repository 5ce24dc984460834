"""Rotary position embeddings (RoPE) with Llama-3 frequency scaling.

Uses the "rotate half" layout of Hugging Face's Llama so that checkpoints convert without permuting q/k weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RopeScaling:
    """Llama-3 long-context frequency scaling (``rope_type: llama3`` in Hugging Face configs).

    Low frequencies (wavelengths longer than ``original_max_seq_len / low_freq_factor``) are divided by
    ``factor``; high frequencies are kept; the band between is interpolated smoothly.
    """

    factor: float = 32.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_seq_len: int = 8192

    def __post_init__(self) -> None:
        if self.factor <= 0 or self.high_freq_factor <= self.low_freq_factor:
            raise ValueError(
                f"invalid rope scaling {self}: need factor > 0 and high_freq_factor > low_freq_factor"
            )

    def apply(self, inv_freq: torch.Tensor) -> torch.Tensor:
        low_freq_wavelen = self.original_max_seq_len / self.low_freq_factor
        high_freq_wavelen = self.original_max_seq_len / self.high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / self.factor, inv_freq)
        smooth = (self.original_max_seq_len / wavelen - self.low_freq_factor) / (
            self.high_freq_factor - self.low_freq_factor
        )
        smoothed = (1 - smooth) * scaled / self.factor + smooth * scaled
        is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
        return torch.where(is_medium, smoothed, scaled)


def inverse_frequencies(head_dim: int, theta: float, scaling: RopeScaling | None) -> torch.Tensor:
    """Per-pair rotation frequencies, float32, shape ``[head_dim // 2]``."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    return scaling.apply(inv_freq) if scaling is not None else inv_freq


def rotary_cos_sin(
    inv_freq: torch.Tensor, seq_len: int, dtype: torch.dtype, start: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables of shape ``[seq_len, 1, head_dim]`` (broadcast over batch and heads) for positions
    ``start .. start + seq_len - 1`` (a decoding step's positions; the same values the full sequence's table
    holds there)."""
    positions = torch.arange(start, start + seq_len, device=inv_freq.device, dtype=torch.float32)
    return _cos_sin(positions, inv_freq, dtype)


def rotary_cos_sin_at(
    inv_freq: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`rotary_cos_sin` at ``positions``, an integer tensor (a decoding step's ``pos``: 0-d or ``[n]``),
    shape ``[n, 1, head_dim]``, the same values. Why a tensor: a compiled decoding step specialises on every
    Python int it sees, so a position passed as an int would recompile at every token (and a CUDA graph could
    not replay it)."""
    return _cos_sin(positions.reshape(-1).to(device=inv_freq.device, dtype=torch.float32), inv_freq, dtype)


def _cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    angles = torch.outer(positions, inv_freq)
    angles = torch.cat((angles, angles), dim=-1).unsqueeze(1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` of shape ``[batch, seq, heads, head_dim]``."""
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos + rotated * sin


class _RotarySplitQKV(torch.autograd.Function):
    """Split a fused ``[batch, seq, heads + 2 * kv_heads, head_dim]`` projection into rotated q, rotated k and v.

    Same result as ``split`` + :func:`apply_rotary`, but the backward pass writes dq, dk and dv into one buffer:
    autograd's own backward of ``split`` and of the rotate-half ``cat`` materialises several full-size copies,
    which cost more than the fused projection saves on CPU (measured in benchmarks/train_step_throughput.py).
    """

    @staticmethod
    def forward(ctx, qkv, cos, sin, n_heads: int, n_kv_heads: int):
        half = qkv.shape[-1] // 2
        c, s = cos[..., :half], sin[..., :half]
        qk = qkv[:, :, : n_heads + n_kv_heads]
        x1, x2 = qk[..., :half], qk[..., half:]
        out = torch.empty_like(qk, memory_format=torch.contiguous_format)
        o1, o2 = out[..., :half], out[..., half:]
        torch.mul(x1, c, out=o1)
        o1.addcmul_(x2, s, value=-1)
        torch.mul(x2, c, out=o2)
        o2.addcmul_(x1, s)
        ctx.save_for_backward(c, s)
        ctx.heads = (n_heads, n_kv_heads)
        q, k = out.split((n_heads, n_kv_heads), dim=2)
        return q, k, qkv[:, :, n_heads + n_kv_heads :]

    @staticmethod
    def backward(ctx, dq, dk, dv):
        c, s = ctx.saved_tensors
        n_heads, n_kv_heads = ctx.heads
        batch, seq, _, head_dim = dq.shape
        half = head_dim // 2
        dqkv = dq.new_empty(batch, seq, n_heads + 2 * n_kv_heads, head_dim)
        for grad, lo, hi in ((dq, 0, n_heads), (dk, n_heads, n_heads + n_kv_heads)):
            g1, g2 = grad[..., :half], grad[..., half:]
            d1, d2 = dqkv[:, :, lo:hi, :half], dqkv[:, :, lo:hi, half:]
            torch.mul(g1, c, out=d1)
            d1.addcmul_(g2, s)
            torch.mul(g2, c, out=d2)
            d2.addcmul_(g1, s, value=-1)
        dqkv[:, :, n_heads + n_kv_heads :].copy_(dv)
        return dqkv, None, None, None, None


def rotary_split_qkv(
    qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, n_heads: int, n_kv_heads: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(apply_rotary(q), apply_rotary(k), v)`` from a fused qkv projection; see :class:`_RotarySplitQKV`.

    Under ``torch.compile`` the plain ops are traced instead: the hand-written backward writes into views of one
    buffer, which AOTAutograd cannot replay, and Inductor fuses the plain split and rotation itself.
    """
    if torch.compiler.is_compiling():
        q, k, v = qkv.split((n_heads, n_kv_heads, qkv.shape[2] - n_heads - n_kv_heads), dim=2)
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v
    return _RotarySplitQKV.apply(qkv, cos, sin, n_heads, n_kv_heads)
