"""``D``: Gated DeltaNet (Yang, Kautz & Hatamizadeh, "Gated Delta Networks: Improving Mamba2 with Delta Rule",
ICLR 2025), a linear-attention sequence mixer with a fixed-size state and Mamba-2's per-head decay.

Layout follows fla's ``fla/layers/gated_deltanet.py`` (fla-org/flash-linear-attention), with the same parameter
names and shapes, for ``n_heads`` heads of key width ``K = head_dim`` and value width ``V = expand_v * K``:

* ``q_proj``, ``k_proj`` (``d_model -> n_heads * K``), ``v_proj`` (``d_model -> n_heads * V``), no biases;
* a causal depthwise short convolution (``q_conv1d``, ``k_conv1d``, ``v_conv1d``, kernel ``conv_size``, no bias)
  and SiLU on each of q, k, v; q and k are then L2-normalised per head;
* ``beta_t = sigmoid(b_proj(x_t))`` (the delta rule's write strength, per head) and the decay gate
  ``g_t = -exp(A_log) * softplus(a_proj(x_t) + dt_bias)`` (Mamba-2's parametrisation, per head, ``g_t <= 0``);
* the gated delta rule, per head, with the state ``S`` stored as ``[K, V]`` (fla's layout)::

      S_t = exp(g_t) * (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T
      o_t = S_t^T q_t * K**-0.5

  i.e. the paper's ``S_t = S_{t-1} a_t (I - beta_t k_t k_t^T) + beta_t v_t k_t^T`` with ``S`` as ``[V, K]``:
  decay the memory, erase what key ``k_t`` reads from it, write ``v_t`` under ``k_t``;
* an output RMSNorm per head (weight ``o_norm.weight`` of width ``V``, shared by the heads) gated by
  ``silu(g_proj(x))`` (fla's ``FusedRMSNormGated``: normalise, then gate) and ``o_proj`` (no bias).

Kernels (``backend="auto"``): on CUDA tensors with fla installed (the ``cuda`` extra; ``fla-core`` alone
suffices), fla's Triton ``chunk_gated_delta_rule`` (q/k L2 norm fused in the kernel); anywhere else the
pure-PyTorch chunked algorithm
:func:`gated_delta_rule_chunked` (the UT/WY form of fla's ``naive_chunk_gated_delta_rule``), which is tested
against the step-by-step recurrence :func:`gated_delta_rule_recurrent_reference`. The short convolution, the
gates and the output norm are plain PyTorch on every device.

Decoding (:class:`GatedDeltaNetCache`): the ``[heads, K, V]`` state and the last ``conv_size - 1`` inputs of the
short convolutions; a prompt runs :func:`gated_delta_rule_chunked` from the cached state, a single token one
step of :func:`gated_delta_rule_recurrent_reference`, both in PyTorch on every device.

Options (``arch.options["D"]``): ``n_heads`` (default: the fewest heads whose projections have at least the
parameters of the architecture's ``A`` layer, see :func:`default_n_heads`), ``head_dim`` (key width per head;
default the architecture's ``head_dim``), ``expand_v`` (2), ``conv_size`` (4), ``chunk_size`` (64),
``use_short_conv`` (true), ``allow_neg_eigval`` (false; ``beta = 2 * sigmoid``, Grazzi et al. 2025) and
``backend`` (``"auto"`` | ``"torch"`` | ``"cuda"``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import warnings
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from primitives.base import CacheSpec, InitScheme, LayerCache, Primitive
from primitives.short_conv import causal_depthwise_conv1d, conv_step
from primitives.short_conv import cpu_batch_slices as conv_batch_slices

try:  # optional CUDA extra: pip install "composer-hnas[cuda]" (fla's ops live in the fla-core package)
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as _fla_chunk_gated_delta_rule
except (ImportError, OSError):  # not installed, no Triton, or built against another torch/CUDA
    _fla_chunk_gated_delta_rule = None


def _fla_backward_refusal() -> str | None:
    """Why fla's kernel cannot train here, or None.

    fla refuses the gated backward on Hopper (H100/H200) with Triton >= 3.4 and < 3.7.1 (wrong results,
    fla-org/flash-linear-attention#640) unless tilelang is installed to take that kernel over. The refusal comes
    as a RuntimeError in the *backward* pass, after the forward has run: so it is checked here, from fla's own
    flags, before a training step picks the kernel. Seen on an H200 with torch 2.11 / Triton 3.6 (gpu_check).
    """
    if _fla_chunk_gated_delta_rule is None:
        return None
    try:
        from fla.utils import IS_NVIDIA_HOPPER, TRITON_ABOVE_3_4_0, TRITON_ABOVE_3_7_1
    except ImportError:  # an fla from before the guard: nothing to avoid
        return None
    if IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0 and not TRITON_ABOVE_3_7_1 and not _tilelang_installed():
        import triton

        return (f"fla's gated backward refuses Hopper GPUs with Triton {triton.__version__} (>= 3.4, < 3.7.1; "
                "fla #640): upgrade Triton to >= 3.7.1 or pip install tilelang")
    return None


def _tilelang_installed() -> bool:
    return importlib.util.find_spec("tilelang") is not None


_FLA_BACKWARD_REFUSAL = _fla_backward_refusal()
_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


GatedDeltaNetBackend = Literal["auto", "torch", "cuda"]
_BACKENDS = ("auto", "torch", "cuda")
_L2_EPS = 1e-6  # fla's l2norm: x / sqrt(sum(x^2) + 1e-6)
# Initialisation of the decay gate, as fla's layer and Mamba-2: per-head time scales spread log-uniformly.
_DT_MIN, _DT_MAX, _DT_INIT_FLOOR = 1e-3, 0.1, 1e-4
_A_INIT_RANGE = (1.0, 16.0)
# Within-chunk decays below exp(-30) (1e-13, beyond float32's resolution next to the token's own weight of 1)
# are set to exactly 0 in float32. Left alone, fast-forgetting heads produce denormals (exp(-100) = 4e-44), on
# which CPU arithmetic is slow: a layer whose heads all decay by exp(-8) per token trained 1.5x slower (d_model
# 128, 8 x 256 tokens, 1 thread). float64 (tests) keeps every term down to exp(-600).
_LOG_DECAY_CUTOFF = {torch.float32: -30.0, torch.float64: -600.0}


@dataclass(frozen=True)
class GatedDeltaNetConfig:
    d_model: int
    n_heads: int
    head_dim: int  # key (and query) width per head, fla's head_k_dim
    expand_v: float = 2.0  # value width per head = expand_v * head_dim
    conv_size: int = 4
    chunk_size: int = 64
    use_short_conv: bool = True
    allow_neg_eigval: bool = False
    norm_eps: float = 1e-5
    backend: GatedDeltaNetBackend = "auto"

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "head_dim", "conv_size", "chunk_size"):
            _check_positive_int(name, getattr(self, name))
        ev = self.expand_v
        if isinstance(ev, bool) or not isinstance(ev, (int, float)) or not ev > 0:
            raise ValueError(f"expand_v must be a positive number, got {ev!r}")
        width = self.head_dim * ev
        if abs(width - round(width)) > 1e-6 or round(width) < 1:
            raise ValueError(
                f"expand_v * head_dim must be a positive integer (the value width per head), "
                f"got {ev} * {self.head_dim} = {width}"
            )
        for name in ("use_short_conv", "allow_neg_eigval"):
            if type(getattr(self, name)) is not bool:  # 0 / 1 / "yes" are mistakes in a YAML recipe
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if not self.norm_eps > 0:
            raise ValueError(f"norm_eps must be positive, got {self.norm_eps}")
        if self.backend not in _BACKENDS:
            raise ValueError(f"unknown gated_deltanet backend {self.backend!r}; choose one of {_BACKENDS}")

    @classmethod
    def from_arch(cls, arch, **options) -> GatedDeltaNetConfig:
        """``d_model`` and ``norm_eps`` from the architecture; the rest from ``arch.options["D"]``."""
        valid = sorted(f.name for f in dataclasses.fields(cls) if f.name not in ("d_model", "norm_eps"))
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ValueError(f"unknown option(s) {unknown}; valid: {valid}")
        options.setdefault("head_dim", arch.head_dim)
        if "n_heads" not in options:
            expand_v = options.get("expand_v", 2.0)
            _check_positive_int("head_dim", options["head_dim"])
            if isinstance(expand_v, bool) or not isinstance(expand_v, (int, float)) or not expand_v > 0:
                raise ValueError(f"expand_v must be a positive number, got {expand_v!r}")
            options["n_heads"] = default_n_heads(arch, options["head_dim"], expand_v)
        return cls(d_model=arch.d_model, norm_eps=arch.norm_eps, **options)

    # -- derived widths -----------------------------------------------------------------------------------
    @property
    def head_k_dim(self) -> int:
        return self.head_dim

    @property
    def head_v_dim(self) -> int:
        return round(self.head_dim * self.expand_v)

    @property
    def key_dim(self) -> int:
        return self.n_heads * self.head_k_dim

    @property
    def value_dim(self) -> int:
        return self.n_heads * self.head_v_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the short convolutions: q, k and v."""
        return 2 * self.key_dim + self.value_dim


def _check_positive_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def default_n_heads(arch, head_dim: int, expand_v: float) -> int:
    """The fewest heads whose projections hold at least the parameters of ``arch``'s attention layer ``A``.

    fla sizes its layer to Mamba-2's ~6 d_model^2 (``n_heads * head_dim = 0.75 d_model``); here ``D`` is sized
    to replace ``A`` at the same widths, so a search comparing patterns compares mixers of about equal size.
    One head costs ``d_model * (2 K + 3 V + 2)`` projection weights (q, k; v, g, o; a, b); attention costs
    ``d_model * head_dim * (2 n_heads + 2 n_kv_heads)``. Rounding up keeps ``D`` within one head above ``A``:
    Llama-3.2-1B widths give 10 heads of K=64, V=128 (10.5M vs A's 10.5M), the tiny preset 2 heads of K=16.
    """
    attention = arch.d_model * arch.head_dim * (2 * arch.n_heads + 2 * arch.n_kv_heads)
    per_head = arch.d_model * (2 * head_dim + 3 * head_dim * expand_v + 2)
    return max(1, math.ceil(attention / per_head - 1e-9))


# -- the gated delta rule in pure PyTorch ---------------------------------------------------------------------


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The rule multiplies many decays and solves a triangular system: float32 at least (float64 stays)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _exp_decay(log_decay: torch.Tensor) -> torch.Tensor:
    """``exp(log_decay)`` with decays below ``exp(_LOG_DECAY_CUTOFF)`` set to exactly 0 (no denormals)."""
    cutoff = _LOG_DECAY_CUTOFF[log_decay.dtype]
    return torch.exp(log_decay.masked_fill(log_decay < cutoff, -torch.inf))


class _UnitLowerInverse(torch.autograd.Function):
    """``(I + A)^-1`` for strictly lower-triangular ``A [..., C, C]`` (fla also forms this inverse explicitly).

    Forward: one batched lower-triangular solve against the identity. Backward: ``dA = -(T^T dT T^T)`` on the
    strictly lower part, two matmuls. Autograd's own backward of ``solve_triangular`` needs an upper-triangular
    solve, which MKL runs ~100x slower than the lower one on CPU (0.5 s for 64 blocks of 64x64), and a batched
    solve with more than one batch dimension is as slow: hence this function and the flattening.
    """

    @staticmethod
    def forward(ctx, a: torch.Tensor) -> torch.Tensor:
        size = a.shape[-1]
        flat = a.reshape(-1, size, size)
        eye = torch.eye(size, dtype=a.dtype, device=a.device).expand_as(flat)
        inverse = torch.linalg.solve_triangular(flat, eye, upper=False, unitriangular=True).view(a.shape)
        ctx.save_for_backward(inverse)
        return inverse

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (inverse,) = ctx.saved_tensors
        inverse_t = inverse.transpose(-1, -2)
        return -(inverse_t @ grad @ inverse_t).tril(-1)


def gated_delta_rule_chunked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    chunk_size: int = 64,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    return_final_state: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule by chunks (WY / UT representation), any length, any device, differentiable.

    Shapes (fla's ``[batch, seq, heads, ...]`` layout): ``q``, ``k`` ``[B, T, H, K]`` (already L2-normalised
    by the caller); ``v`` ``[B, T, H, V]``; ``g`` (log decay, ``<= 0``) and ``beta`` ``[B, T, H]``;
    ``initial_state`` ``[B, H, K, V]``. ``scale`` defaults to ``K**-0.5``. Returns ``o`` like ``v`` (and the
    final state).

    Inside a chunk of ``C`` tokens with cumulative log decay ``G_r`` and entering state ``S_0``, the values the
    rule actually writes, ``u_r = beta_r (v_r - [state just before r]^T k_r)``, solve the unit lower-triangular
    system ``(I + A) u = beta V - diag(beta exp(G)) K S_0`` with ``A_rs = beta_r exp(G_r - G_s) k_r.k_s`` for
    ``s < r``. One triangular solve per chunk (batched over all chunks) gives ``U = (I + A)^-1 beta V`` and
    ``W = (I + A)^-1 diag(beta exp(G)) K`` (the WY factors); then, chunk after chunk,
    ``u = U - W S_0``, ``o = diag(exp(G)) Q S_0 + (Q K^T * decay) u`` and
    ``S_C = exp(G_C) S_0 + (K * exp(G_C - G))^T u``. Only this last recurrence runs sequentially, ``T / C``
    steps of small matmuls. Sequences are zero-padded to a multiple of ``C``; a padded token has ``k = 0``,
    ``beta = 0`` and ``g = 0``, so it neither writes nor decays the state.
    """
    out_dtype = v.dtype
    f = _compute_dtype(q.dtype)
    batch, seq, heads, d_k = q.shape
    d_v = v.shape[-1]
    scale = d_k**-0.5 if scale is None else scale
    size = min(chunk_size, seq)
    pad = -seq % size
    n = (seq + pad) // size

    def chunked(t: torch.Tensor) -> torch.Tensor:  # [B, T, H, ...] -> [B, H, n, C, ...]
        t = F.pad(t.to(f), (0, 0) * (t.dim() - 2) + (0, pad))
        return t.view(batch, n, size, heads, *t.shape[3:]).movedim(3, 1)

    q, k, v, g, beta = chunked(q) * scale, chunked(k), chunked(v), chunked(g), chunked(beta)
    g_cum = g.cumsum(dim=-1)  # [B, H, n, C]: log decay from the chunk's start through position r

    # decay[r, s] = exp(G_r - G_s) for s <= r, 0 above the diagonal; masked before exp so nothing overflows.
    causal = torch.ones(size, size, dtype=torch.bool, device=q.device).tril()
    decay = _exp_decay((g_cum[..., :, None] - g_cum[..., None, :]).masked_fill(~causal, -torch.inf))

    # WY factors of all chunks at once: [U | W] = (I + A)^-1 [beta V | beta exp(G) K].
    a = (beta[..., None] * (k @ k.transpose(-1, -2)) * decay).tril(-1)
    decay_in = _exp_decay(g_cum)  # from the chunk's start through position r
    rhs = torch.cat([v * beta[..., None], k * (beta * decay_in)[..., None]], dim=-1)
    u, w = (_UnitLowerInverse.apply(a) @ rhs).split([d_v, d_k], dim=-1)

    scores = (q @ k.transpose(-1, -2)) * decay  # causal, decayed q.k within each chunk
    k_to_end = k * _exp_decay(g_cum[..., -1:] - g_cum)[..., None]
    chunk_decay = decay_in[..., -1, None, None]  # [B, H, n, 1, 1]

    state = q.new_zeros(batch, heads, d_k, d_v) if initial_state is None else initial_state.to(f)
    entering, written = [], []
    for i in range(n):  # the only sequential part: one state hand-over per chunk
        entering.append(state)
        u_i = u[:, :, i] - w[:, :, i] @ state
        written.append(u_i)
        state = state * chunk_decay[:, :, i] + k_to_end[:, :, i].transpose(-1, -2) @ u_i
    entering_states = torch.stack(entering, dim=2)  # [B, H, n, K, V]
    u = torch.stack(written, dim=2)  # [B, H, n, C, V]
    o = (q * decay_in[..., None]) @ entering_states + scores @ u

    o = o.movedim(1, 3).reshape(batch, n * size, heads, d_v)[:, :seq].to(out_dtype)
    return (o, state) if return_final_state else o


def gated_delta_rule_recurrent_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    return_final_state: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule one token at a time (slow: the definition the chunked form and kernels must match).

    Same arguments as :func:`gated_delta_rule_chunked` without ``chunk_size`` (fla's
    ``naive_recurrent_gated_delta_rule``). It is also the generation step, which is why the inference cache
    holds ``heads * K * V`` numbers per layer.
    """
    batch, seq, heads, d_k = q.shape
    scale = d_k**-0.5 if scale is None else scale
    state = q.new_zeros(batch, heads, d_k, v.shape[-1]) if initial_state is None else initial_state.clone()
    outputs = []
    for t in range(seq):
        state = state * torch.exp(g[:, t])[..., None, None]
        read = torch.einsum("bhkv,bhk->bhv", state, k[:, t])
        write = beta[:, t, :, None] * (v[:, t] - read)
        state = state + k[:, t, :, :, None] * write[:, :, None, :]
        outputs.append(torch.einsum("bhkv,bhk->bhv", state, q[:, t] * scale))
    o = torch.stack(outputs, dim=1)
    return (o, state) if return_final_state else o


def gated_delta_rule_step(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """One token of :func:`gated_delta_rule_recurrent_reference`, writing ``state [B, H, K, V]`` in place: a
    decoding step. ``q``, ``k`` ``[B, H, K]`` (L2-normalised), ``v`` ``[B, H, V]``, ``g``, ``beta`` ``[B, H]``;
    returns ``o [B, H, V]``.

    The reference's loop body reordered so that one batched product reads the state for both ``k`` and ``q``
    before it changes: with ``a = exp(g)``, ``read = a S^T k``, ``write = beta (v - read)``, the new state is
    ``a S + k write^T`` and ``o = S_new^T q = a S^T q + (k . q) write``. A decoding step is a few dozen tiny
    ops, each costing its dispatch rather than its arithmetic on a CPU, so fewer ops is what makes it fast:
    no clone of the state (it is updated in place), no einsum (whose planning cost more than its product)."""
    batch, heads, d_k = q.shape
    scale = d_k**-0.5 if scale is None else scale
    decay = torch.exp(g).view(batch * heads, 1, 1)
    flat = state.view(batch * heads, d_k, -1)
    qk = torch.stack([q, k], dim=-2).view(batch * heads, 2, d_k)
    q_read, k_read = torch.bmm(qk, flat).mul_(decay).unbind(1)  # a S^T q, a S^T k: [B*H, V]
    write = (v.reshape(batch * heads, -1) - k_read).mul_(beta.reshape(-1, 1))
    flat.mul_(decay).baddbmm_(qk[:, 1:].transpose(1, 2), write.unsqueeze(1))
    o = q_read.addcmul_((qk[:, 0] * qk[:, 1]).sum(-1, keepdim=True), write).mul_(scale)
    return o.view(batch, heads, -1)


# -- the layer's smaller pieces -------------------------------------------------------------------------------


def _l2_normalize(x: torch.Tensor) -> torch.Tensor:
    """fla's ``l2norm`` over the last dimension, in at least float32."""
    f = _compute_dtype(x.dtype)
    x32 = x.to(f)
    return (x32 * torch.rsqrt(x32.square().sum(dim=-1, keepdim=True) + _L2_EPS)).to(x.dtype)


@dataclass
class GatedDeltaNetCache(LayerCache):
    """``conv``: the last ``conv_size - 1`` inputs of the q/k/v short convolutions, ``[batch, conv_size - 1,
    conv_dim]`` (``None`` without short convolutions); ``state``: the delta-rule state ``[batch, heads, K, V]``."""

    conv: torch.Tensor | None
    state: torch.Tensor


class _GatedRMSNorm(nn.Module):
    """``rmsnorm(o) * weight * silu(gate)`` over each head's ``V`` channels (fla's ``FusedRMSNormGated``:
    normalise, then gate), computed in at least float32."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)

    def forward(self, o: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        f = _compute_dtype(o.dtype)  # F.rms_norm: one fused op and its backward (1.7x faster on a CPU)
        normed = F.rms_norm(o.to(f), (o.shape[-1],), self.weight.to(f), self.eps)
        return (normed * F.silu(gate.to(f))).to(o.dtype)


# -- the primitive --------------------------------------------------------------------------------------------


class GatedDeltaNet(Primitive):
    """Gated DeltaNet layer: q/k/v projections -> short conv + SiLU -> L2 norm (q, k) -> gated delta rule
    -> gated RMSNorm -> o_proj."""

    symbol = "D"
    name = "gated_deltanet"
    Config = GatedDeltaNetConfig
    description = "Gated DeltaNet: gated delta-rule linear attention (fixed-size state)"

    def __init__(self, config: GatedDeltaNetConfig) -> None:
        super().__init__(config)
        c = config
        self.q_proj = nn.Linear(c.d_model, c.key_dim, bias=False)
        self.k_proj = nn.Linear(c.d_model, c.key_dim, bias=False)
        self.v_proj = nn.Linear(c.d_model, c.value_dim, bias=False)
        self.a_proj = nn.Linear(c.d_model, c.n_heads, bias=False)
        self.b_proj = nn.Linear(c.d_model, c.n_heads, bias=False)
        self.g_proj = nn.Linear(c.d_model, c.value_dim, bias=False)
        self.A_log = nn.Parameter(torch.empty(c.n_heads))
        self.dt_bias = nn.Parameter(torch.empty(c.n_heads))
        if c.use_short_conv:
            # Causal padding is applied in forward; weights are [channels, 1, width] as fla's ShortConvolution.
            for name, dim in (("q_conv1d", c.key_dim), ("k_conv1d", c.key_dim), ("v_conv1d", c.value_dim)):
                setattr(self, name, nn.Conv1d(dim, dim, c.conv_size, groups=dim, bias=False))
        self.o_norm = _GatedRMSNorm(c.head_v_dim, eps=c.norm_eps)
        self.o_proj = nn.Linear(c.value_dim, c.d_model, bias=False)
        if not self.A_log.is_meta:  # usable on its own; a model re-initialises it with its InitScheme
            self.reset_parameters(InitScheme())

    @torch.no_grad()
    def reset_parameters(self, init: InitScheme) -> None:
        c = self.config
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.a_proj, self.b_proj, self.g_proj):
            nn.init.normal_(proj.weight, std=init.std)
        nn.init.normal_(self.o_proj.weight, std=init.out_std)
        if c.use_short_conv:
            for conv in (self.q_conv1d, self.k_conv1d, self.v_conv1d):
                conv.reset_parameters()
        self.o_norm.reset_parameters()
        device = self.A_log.device
        # A in [1, 16] and dt log-uniform in [1e-3, 0.1] (stored through the inverse of softplus): a per-head
        # spread of forgetting time scales, as in Mamba-2 and fla's layer.
        low, high = _A_INIT_RANGE
        self.A_log.copy_(torch.log(torch.empty(c.n_heads, device=device).uniform_(low, high)))
        log_min, log_max = math.log(_DT_MIN), math.log(_DT_MAX)
        dt = torch.exp(torch.rand(c.n_heads, device=device) * (log_max - log_min) + log_min)
        dt = dt.clamp(min=_DT_INIT_FLOOR)
        self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))

    def no_weight_decay(self) -> set[str]:
        # Decaying A_log / dt_bias would pull every head's time scale toward the same value; the norm weight
        # toward zero output. (The short convolutions have no biases.)
        return {"A_log", "dt_bias", "o_norm.weight"}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.config
        batch, seq, _ = x.shape
        use_kernel = self._use_kernel(x)
        qkv, gate, a, b = self._project(x)
        if c.use_short_conv:
            qkv = causal_depthwise_conv1d(qkv, self._conv_weight())
        q, k, v, g, beta = self._rule_inputs(qkv, a, b, normalize=not use_kernel)
        if use_kernel:
            o, _ = _fla_chunk_gated_delta_rule(
                q, k, v, g, beta.to(q.dtype), scale=c.head_k_dim**-0.5, use_qk_l2norm_in_kernel=True
            )
        else:
            o = gated_delta_rule_chunked(q, k, v, g, beta, c.chunk_size)
        return self._output(o, gate)

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``qkv`` (before the short convolution), the output ``gate`` and the decay / write logits ``a``, ``b``."""
        c = self.config
        # One matmul for all six input projections (faster than six small ones, on CPU especially). The weights
        # are joined at every call, not kept joined between calls: a kept copy saved nothing measurable (a decode
        # step of a demo-4m layer, one thread: 356 us kept, 353 us joined per call; batch 16: 522 and 485 us),
        # and held three quarters of the layer's weights a second time.
        weight = torch.cat([p.weight for p in (self.q_proj, self.k_proj, self.v_proj, self.g_proj, self.a_proj,
                                               self.b_proj)])
        return F.linear(x, weight).split([c.conv_dim, c.value_dim, c.n_heads, c.n_heads], dim=-1)

    def _conv_weight(self) -> torch.Tensor:
        """The q, k and v short convolutions' taps as one depthwise convolution over ``conv_dim`` channels."""
        return torch.cat([self.q_conv1d.weight, self.k_conv1d.weight, self.v_conv1d.weight])

    def _rule_inputs(self, qkv: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                     normalize: bool = False) -> tuple[torch.Tensor, ...]:
        """q, k (L2-normalised with ``normalize``, for the PyTorch rule; fla's kernel normalises them itself),
        v per head, the log decay ``g`` and the write strength ``beta``."""
        c = self.config
        qk, v = F.silu(qkv).split([2 * c.key_dim, c.value_dim], dim=-1)
        qk = qk.unflatten(-1, (2 * c.n_heads, c.head_k_dim))  # q's heads, then k's: normalised in one pass
        q, k = (_l2_normalize(qk) if normalize else qk).split(c.n_heads, dim=-2)
        v = v.unflatten(-1, (c.n_heads, c.head_v_dim))
        f = _compute_dtype(qkv.dtype)
        g = -torch.exp(self.A_log.to(f)) * F.softplus(a.to(f) + self.dt_bias.to(f))
        beta = torch.sigmoid(b.to(f))
        if c.allow_neg_eigval:
            beta = beta * 2.0
        return q, k, v, g, beta

    def _output(self, o: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        c = self.config
        batch, seq = o.shape[:2]
        o = self.o_norm(o, gate.unflatten(-1, (c.n_heads, c.head_v_dim)))
        return self.o_proj(o.reshape(batch, seq, c.value_dim))

    # -- incremental decoding -----------------------------------------------------------------------------
    def init_cache(self, batch, max_len, device=None, dtype=None) -> GatedDeltaNetCache:
        """``max_len`` does not matter: the state has the same size at any context length."""
        c = self.config
        device, dtype = self._cache_placement(device, dtype)
        conv = None
        if c.use_short_conv:
            conv = torch.zeros(batch, c.conv_size - 1, c.conv_dim, device=device, dtype=dtype)
        state = torch.zeros(batch, c.n_heads, c.head_k_dim, c.head_v_dim, device=device, dtype=dtype)
        return GatedDeltaNetCache(conv=conv, state=state)

    def forward_cached(self, x: torch.Tensor, cache: GatedDeltaNetCache, start_pos: int) -> torch.Tensor:
        """The layer continuing from ``cache``: the chunked rule from the cached state for several tokens (a
        prompt), one step of the recurrence for a single token. PyTorch forms on every device (fla's kernel
        serves the training forward)."""
        return self._continue(x, cache, fresh=start_pos == 0)

    def decode_step(self, x: torch.Tensor, cache: GatedDeltaNetCache, pos: torch.Tensor) -> torch.Tensor:
        """One token continuing a started sequence: :meth:`forward_cached`'s recurrent step. ``pos`` is not read:
        the state carries the context, so the step is the same at every position."""
        return self._continue(x, cache, fresh=False)

    def _continue(self, x: torch.Tensor, cache: GatedDeltaNetCache, fresh: bool) -> torch.Tensor:
        """:meth:`forward_cached`, ``fresh`` for a new sequence (``start_pos == 0``)."""
        c = self.config
        batch, seq, _ = x.shape
        if batch != cache.state.shape[0]:
            raise ValueError(
                f"batch of {batch} sequences for an inference cache allocated for {cache.state.shape[0]}"
            )
        qkv, gate, a, b = self._project(x)
        if c.use_short_conv:
            if fresh:  # a new sequence: empty convolution window
                cache.conv.zero_()
            qkv = conv_step(cache.conv, qkv, self._conv_weight())
        q, k, v, g, beta = self._rule_inputs(qkv, a, b, normalize=True)
        if seq == 1 and not fresh:  # a decoding step: the recurrence, once, on the cached state in place
            f = _compute_dtype(x.dtype)
            state = cache.state if cache.state.dtype == f else cache.state.to(f)
            o = gated_delta_rule_step(q[:, 0].to(f), k[:, 0].to(f), v[:, 0].to(f), g[:, 0], beta[:, 0], state)
            if state is not cache.state:
                cache.state.copy_(state)
            o = o.to(v.dtype).unsqueeze(1)
        else:
            initial = None if fresh else cache.state
            o, state = gated_delta_rule_chunked(
                q, k, v, g, beta, c.chunk_size, initial_state=initial, return_final_state=True
            )
            cache.state.copy_(state)
        return self._output(o, gate)

    def _use_kernel(self, x: torch.Tensor) -> bool:
        """fla's Triton kernel: on CUDA tensors when it imported, unless backend='torch' or fla would refuse
        the backward here (:func:`_fla_backward_refusal`)."""
        backend = self.config.backend
        if backend == "torch":
            return False
        usable = _fla_chunk_gated_delta_rule is not None and x.is_cuda
        if usable and _FLA_BACKWARD_REFUSAL and torch.is_grad_enabled():
            # a training step would fail in backward: the forward alone (generation, evaluation) is fine
            if backend == "cuda":
                raise RuntimeError(f"gated_deltanet backend 'cuda' cannot train here: {_FLA_BACKWARD_REFUSAL}; "
                                   "use backend 'auto' (the PyTorch path)")
            _warn_once(f"gated_deltanet: training on the PyTorch path, not fla's kernel: {_FLA_BACKWARD_REFUSAL}")
            return False
        if backend == "cuda" and not usable:
            raise RuntimeError(
                "gated_deltanet backend 'cuda' needs CUDA tensors and fla installed "
                f"(pip install 'composer-hnas[cuda]'), got device={x.device}, fla "
                f"{'importable' if _fla_chunk_gated_delta_rule is not None else 'not importable'}; "
                "use backend 'auto'"
            )
        return usable

    # -- analytic accounting ------------------------------------------------------------------------------
    @classmethod
    def cpu_batch_slices(cls, config: GatedDeltaNetConfig, batch: int, seq_len: int,
                         activation_bytes: int = 4) -> dict[str, int]:
        """The short convolution's slices (one over the joined q, k, v: ``conv_dim`` channels); the delta rule
        itself runs the whole batch at once."""
        return {"short_conv": conv_batch_slices(batch, seq_len, config.conv_dim, activation_bytes)}

    @classmethod
    def _matmul_params(cls, c: GatedDeltaNetConfig) -> int:
        """Weights that do a multiply-add per token: projections and short-convolution taps."""
        projections = c.d_model * (2 * c.key_dim + 2 * c.value_dim + 2 * c.n_heads) + c.value_dim * c.d_model
        return projections + (c.conv_dim * c.conv_size if c.use_short_conv else 0)

    @classmethod
    def param_count(cls, config: GatedDeltaNetConfig) -> int:
        c = config
        return cls._matmul_params(c) + 2 * c.n_heads + c.head_v_dim  # + A_log, dt_bias, o_norm.weight

    @classmethod
    def flops_per_token(cls, config: GatedDeltaNetConfig, seq_len: int) -> int:
        """``6 * (projection + conv weights) + 3 * delta-rule forward``, the rule counted as the chunked form.

        Forward FLOPs per token and head, with chunk length ``C = min(chunk_size, seq_len)``, key width ``K``
        and value width ``V``; products over the causal part of a chunk count ``C / 2`` positions on average,
        as attention counts ``seq_len / 2``:

        * ``K K^T`` and ``Q K^T`` within the chunk: ``C * K`` each;
        * the triangular solve for the WY factors ``[U | W]``: ``C * (K + V)``;
        * ``(Q K^T * decay) u`` within the chunk: ``C * V``;
        * ``W S`` (values the state already holds), ``Q S`` (read) and ``K^T u`` (write): ``2 K V`` each.

        Total ``C * (3 K + 2 V) + 6 K V`` per head; decays, gates and norms are elementwise and not counted.
        """
        c = config
        chunk = min(c.chunk_size, seq_len)
        k, v = c.head_k_dim, c.head_v_dim
        rule_forward = c.n_heads * (chunk * (3 * k + 2 * v) + 6 * k * v)
        return 6 * cls._matmul_params(c) + 3 * rule_forward

    @classmethod
    def inference_cache(cls, config: GatedDeltaNetConfig, dtype_bytes: int = 2) -> CacheSpec:
        """A fixed-size state per sequence: ``[heads, K, V]`` plus the last ``conv_size - 1`` inputs of the
        q/k/v short convolutions; nothing grows with the context."""
        c = config
        numbers = c.n_heads * c.head_k_dim * c.head_v_dim
        if c.use_short_conv:
            numbers += (c.conv_size - 1) * c.conv_dim
        return CacheSpec(fixed_bytes=numbers * dtype_bytes)

    @classmethod
    def decode_flops_per_token(cls, config: GatedDeltaNetConfig, context: int) -> int:
        """One recurrent step, whatever the context: 2 per projection and short-convolution weight, plus per
        head the state's read ``S^T k``, its rank-one write and the output ``S^T q``, ``2 K V`` each (the
        ``6 K V`` of :meth:`flops_per_token`)."""
        c = config
        return 2 * cls._matmul_params(c) + 6 * c.n_heads * c.head_k_dim * c.head_v_dim
