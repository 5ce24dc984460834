"""``S``: the Mamba-2 block (Dao & Gu 2024, "Transformers are SSMs"), a selective state-space sequence mixer.

Layout follows the reference block ``mamba_ssm/modules/mamba2.py`` (state-spaces/mamba), with the same
parameter names so its state dicts load:

* ``in_proj`` (no bias) maps ``d_model`` to ``[z, x, B, C, dt]``: gate ``z`` and input ``x`` of width
  ``d_inner = expand * d_model``, ``B`` and ``C`` of width ``n_groups * d_state``, one ``dt`` per head;
* a causal depthwise ``conv1d`` (kernel ``d_conv``, with bias) and SiLU over ``xBC``;
* the SSD scan, per head ``h`` with a scalar decay ``A_h = -exp(A_log_h)`` and step
  ``dt = softplus(dt + dt_bias)``::

      state_t = exp(dt_t A_h) * state_{t-1} + dt_t * x_t B_t^T        # [head_dim, d_state]
      y_t     = state_t C_t + D_h * x_t

  (``n_heads / n_groups`` heads share one ``B``/``C``, like grouped-query attention's key/value heads);
* a gated grouped RMSNorm ``norm(y * silu(z))`` (one norm group per ``B``/``C`` group) and ``out_proj``
  (no bias).

Kernels, chosen per call (``backend="auto"``): with tensors on CUDA and the optional CUDA extra installed,
``mamba_ssm``'s Triton ``mamba_chunk_scan_combined`` and gated ``rmsnorm_fn`` (loaded by
:mod:`primitives.mamba_ssm_triton`, also from a mamba-ssm built without its CUDA extensions) and
``causal_conv1d``'s ``causal_conv1d_fn``; each falls back on its own to pure PyTorch when it does not import,
and ``_kernels`` says which ones a call uses. The PyTorch scan is
the chunked SSD algorithm of the paper's ``ssd_minimal`` listing (:func:`ssd_chunked`): quadratic
attention-like blocks inside chunks of ``chunk_size`` tokens, a linear recurrence between chunk states. It
runs anywhere (CPU, MPS, CUDA without the extra) and is the reference the CUDA path is tested against.

Decoding (:class:`Mamba2Cache`): the SSM state and the last ``d_conv - 1`` convolution inputs; a prompt runs
:func:`ssd_chunked` from the cached state (and returns the new one), a single token one step of
:func:`ssd_recurrent_reference`, both in PyTorch on every device.

Options (``arch.options["S"]``): ``d_state`` (64), ``expand`` (2), ``head_dim`` (default: the largest divisor
of ``d_inner`` not above 64, i.e. Mamba-2's 64 at any width that is a multiple of 32; smaller widths get
smaller heads instead of an error), ``n_groups`` (1), ``d_conv`` (4), ``chunk_size`` (64), the dt
initialisation ``dt_min`` / ``dt_max`` / ``dt_init_floor`` (1e-3 / 0.1 / 1e-4), ``A_init_range`` ((1, 16))
and ``backend`` (``"auto"`` | ``"torch"`` | ``"cuda"``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from primitives.base import CacheSpec, InitScheme, LayerCache, Primitive
from primitives.mamba_ssm_triton import load_triton_kernels
from primitives.short_conv import causal_depthwise_conv1d, conv_step
from primitives.short_conv import cpu_batch_slices as conv_batch_slices

# optional CUDA extra: pip install "composer-hnas[cuda]"; None where mamba_ssm's Triton kernels do not import
_ssd_kernel, _gated_rmsnorm_kernel = load_triton_kernels() or (None, None)
try:
    from causal_conv1d import causal_conv1d_fn as _conv_kernel
except (ImportError, OSError):
    _conv_kernel = None

Mamba2Backend = Literal["auto", "torch", "cuda"]
_BACKENDS = ("auto", "torch", "cuda")
_MAX_AUTO_HEAD_DIM = 64  # Mamba-2's head dimension at every published size
_CONV_KERNEL_WIDTHS = (2, 3, 4)  # kernel sizes causal_conv1d's CUDA kernel implements


@dataclass(frozen=True)
class Mamba2Config:
    d_model: int
    d_state: int = 64
    expand: int = 2
    head_dim: int | None = None  # None: the largest divisor of d_inner <= 64 (resolved on construction)
    n_groups: int = 1
    d_conv: int = 4
    chunk_size: int = 64
    dt_min: float = 1e-3
    dt_max: float = 0.1
    dt_init_floor: float = 1e-4
    A_init_range: tuple[float, float] = (1.0, 16.0)
    norm_eps: float = 1e-5
    backend: Mamba2Backend = "auto"

    def __post_init__(self) -> None:
        for name in ("d_model", "d_state", "expand", "n_groups", "d_conv", "chunk_size"):
            _check_positive_int(name, getattr(self, name))
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", default_head_dim(self.d_inner))
        _check_positive_int("head_dim", self.head_dim)
        if self.d_inner % self.head_dim:
            raise ValueError(
                f"head_dim ({self.head_dim}) must divide d_inner = expand * d_model = {self.d_inner}"
            )
        if self.n_heads % self.n_groups:
            raise ValueError(
                f"n_groups ({self.n_groups}) must divide the number of heads "
                f"d_inner / head_dim = {self.n_heads}"
            )
        if not 0 < self.dt_min <= self.dt_max:
            raise ValueError(f"need 0 < dt_min <= dt_max, got dt_min={self.dt_min}, dt_max={self.dt_max}")
        if not self.dt_init_floor > 0:
            raise ValueError(f"dt_init_floor must be positive, got {self.dt_init_floor}")
        try:
            low, high = (float(v) for v in self.A_init_range)
        except (TypeError, ValueError):
            raise ValueError(
                f"A_init_range must be two numbers (low, high), got {self.A_init_range!r}"
            ) from None
        if not 0 < low <= high:
            raise ValueError(f"A_init_range must satisfy 0 < low <= high, got {self.A_init_range!r}")
        object.__setattr__(self, "A_init_range", (low, high))
        if not self.norm_eps > 0:
            raise ValueError(f"norm_eps must be positive, got {self.norm_eps}")
        if self.backend not in _BACKENDS:
            raise ValueError(f"unknown mamba2 backend {self.backend!r}; choose one of {_BACKENDS}")

    @classmethod
    def from_arch(cls, arch, **options) -> Mamba2Config:
        """``d_model`` and ``norm_eps`` from the architecture; everything else from ``arch.options["S"]``."""
        valid = sorted(f.name for f in dataclasses.fields(cls) if f.name not in ("d_model", "norm_eps"))
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ValueError(f"unknown option(s) {unknown}; valid: {valid}")
        return cls(d_model=arch.d_model, norm_eps=arch.norm_eps, **options)

    # -- derived widths -----------------------------------------------------------------------------------
    @property
    def d_inner(self) -> int:
        return self.expand * self.d_model

    @property
    def n_heads(self) -> int:
        return self.d_inner // self.head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the depthwise convolution: ``x``, ``B`` and ``C``."""
        return self.d_inner + 2 * self.n_groups * self.d_state

    @property
    def in_proj_dim(self) -> int:
        """Output width of ``in_proj``: ``z``, ``x``, ``B``, ``C`` and one ``dt`` per head."""
        return self.d_inner + self.conv_dim + self.n_heads


def _check_positive_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def default_head_dim(d_inner: int) -> int:
    """The largest divisor of ``d_inner`` that is at most 64 (64 whenever ``d_inner`` is a multiple of 64)."""
    return max(d for d in range(1, min(d_inner, _MAX_AUTO_HEAD_DIM) + 1) if d_inner % d == 0)


# -- the SSD scan in pure PyTorch ----------------------------------------------------------------------------


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Scans accumulate products of many decays: run them in at least float32 (float64 stays float64)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _intra_chunk_decay(a_cum: torch.Tensor) -> torch.Tensor:
    """``exp(a_cum[i] - a_cum[j])`` for ``j <= i``, 0 above the diagonal: the decay from position ``j`` to ``i``
    within a chunk.

    The difference of cumulative sums is what the Triton kernels use inside a chunk: one broadcast subtraction,
    masked before ``exp`` so that nothing overflows, in place on the fresh difference (no autograd here: the
    caller, :class:`_DecayedScores`, gives the gradient). Chunks are short (64), so the cumulative sums stay
    small enough for float32.
    """
    length = a_cum.shape[-1]
    upper = torch.ones(length, length, dtype=torch.bool, device=a_cum.device).triu(1)
    return (a_cum[..., :, None] - a_cum[..., None, :]).masked_fill_(upper, -torch.inf).exp_()


class _DecayedScores(torch.autograd.Function):
    """``(C B^T) * decay`` within chunks, ``decay = exp(a_cum[i] - a_cum[j])`` masked causal
    (:func:`_intra_chunk_decay`): the SSD's attention-like scores.

    Why a function of its own: these ``[.., chunk, chunk]`` tensors, one per head, are the largest of the scan,
    and on a CPU every pass over them is memory-bound. Autograd's backward of the four ops (subtract, mask, exp,
    multiply) makes about seven passes; this one makes two and three reductions: ``g = grad * decay`` gives
    ``C B^T``'s gradient (summed over the heads that share it), ``h = g * C B^T`` the decay's, and the
    cumulative sums get ``h``'s row sums minus its column sums. Masked entries have ``decay = 0``, so they give
    nothing. Runs under ``torch.compile`` (tests/primitives/test_compile.py).
    """

    @staticmethod
    def forward(ctx, cb: torch.Tensor, a_cum: torch.Tensor) -> torch.Tensor:
        decay = _intra_chunk_decay(a_cum)
        ctx.save_for_backward(cb, decay)
        return cb * decay

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cb, decay = ctx.saved_tensors
        g = grad * decay
        if cb.shape == g.shape:
            grad_cb, h = g, g * cb
        else:  # C B^T is shared by the heads of a group: its gradient sums over them
            grad_cb, h = g.sum_to_size(cb.shape), g.mul_(cb)
        return grad_cb, h.sum(-1) - h.sum(-2)


# On a CPU the scan runs a slice of the batch at a time, as many sequences as keep their per-head
# [chunk, chunk] score blocks within this many bytes: the blocks then stay in a core's L2 cache (1-2 MiB on
# server CPUs) from one op to the next, where a whole batch spills each to memory. At demo-4m widths, 16 x 128
# tokens, one thread, the scan (forward and backward) took 0.65x the time in slices of 4 sequences.
_CPU_SCAN_BLOCK_BYTES = 1 << 20


def ssd_chunked(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    chunk_size: int,
    D: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    return_final_state: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The SSD scan by chunks (the Mamba-2 paper's ``ssd_minimal``), any sequence length, any device.

    Shapes: ``x`` ``[batch, seq, heads, head_dim]``; ``dt`` ``[batch, seq, heads]`` (already positive, i.e.
    after softplus); ``A`` ``[heads]`` (negative); ``B``, ``C`` ``[batch, seq, groups, d_state]``; ``D``
    ``[heads]``;
    ``initial_state`` ``[batch, heads, head_dim, d_state]``. Returns ``y`` like ``x`` (and the final state).

    The sequence is cut into chunks of ``min(chunk_size, seq)`` tokens (zero-padded at the end: a zero ``dt``
    neither decays nor writes the state, so padding changes nothing). Inside a chunk the output is a masked,
    decay-weighted ``(C B^T) x`` product (the "attention" form); each chunk's final state is a decay-weighted
    ``B^T x``; states pass from chunk to chunk through the decays of whole chunks (a scaled add per chunk, as
    the kernels do: ``ssd_minimal``'s ``(chunks+1)^2`` matrix of chunk decays cost a batched matmul of tiny
    matrices, a concatenation and a zero fill, a sixth of the CPU scan at 2 chunks); and every position reads
    the state that entered its chunk through ``C``.

    On a CPU the scan is bound by memory traffic over the per-head ``[chunk, chunk]`` blocks, so each operand
    is laid out once, contiguous, for the batched matmuls (not copied again by each of them), and the scores
    are :class:`_DecayedScores`.
    """
    batch, seq, heads, head_dim = x.shape
    block = _scan_sequences_per_slice(seq, heads, chunk_size, _compute_dtype(x.dtype).itemsize)
    if x.device.type == "cpu" and batch > block:
        parts = [_ssd_chunked(x[i : i + block], dt[i : i + block], A, B[i : i + block], C[i : i + block],
                              chunk_size, D, None if initial_state is None else initial_state[i : i + block],
                              return_final_state) for i in range(0, batch, block)]
        if return_final_state:
            return torch.cat([y for y, _ in parts]), torch.cat([state for _, state in parts])
        return torch.cat(parts)
    return _ssd_chunked(x, dt, A, B, C, chunk_size, D, initial_state, return_final_state)


def _scan_sequences_per_slice(seq: int, heads: int, chunk_size: int, itemsize: int) -> int:
    """Sequences whose per-head ``[chunk, chunk]`` score blocks fit :data:`_CPU_SCAN_BLOCK_BYTES` (at least 1)."""
    q = min(chunk_size, seq)
    return max(1, _CPU_SCAN_BLOCK_BYTES // (heads * -(-seq // q) * q * q * itemsize))


def cpu_scan_slices(batch: int, seq: int, heads: int, chunk_size: int, dtype: torch.dtype = torch.float32) -> int:
    """How many slices of the batch :func:`ssd_chunked` runs the scan in on a CPU (inputs of ``dtype``; the scan
    computes in at least float32). Every slice runs the whole scan's ops again, so a layer's op count grows with
    this number: the cost model counts ops by it, from this rule, so the two cannot drift apart."""
    return -(-batch // _scan_sequences_per_slice(seq, heads, chunk_size, _compute_dtype(dtype).itemsize))


def _ssd_chunked(x, dt, A, B, C, chunk_size, D, initial_state, return_final_state):
    """:func:`ssd_chunked` on one slice of the batch."""
    out_dtype = x.dtype
    f = _compute_dtype(x.dtype)
    batch, seq, heads, head_dim = x.shape
    groups, d_state = B.shape[-2:]
    if heads % groups:
        raise ValueError(f"{groups} B/C groups do not divide {heads} heads")
    rep = heads // groups
    q = min(chunk_size, seq)
    pad = -seq % q
    x_in = x
    x, dt, B, C = (F.pad(t.to(f), (0, 0) * (t.dim() - 2) + (0, pad)) for t in (x, dt, B, C))
    chunks = (seq + pad) // q

    # Layout [batch, groups, rep, chunks, q, ...] throughout, so every step below is one batched matmul;
    # B and C are shared by the rep = heads / groups heads of their group (a broadcast dimension of size 1).
    def grouped(t: torch.Tensor, heads_in_group: int) -> torch.Tensor:
        return t.view(batch, chunks, q, groups, heads_in_group, -1).permute(0, 3, 4, 1, 2, 5).contiguous()

    xdt = grouped(x * dt[..., None], rep)
    B, C = grouped(B, 1), grouped(C, 1)
    a = (dt * A.to(f)).view(batch, chunks, q, groups, rep).permute(0, 3, 4, 1, 2)
    a_cum = a.cumsum(dim=-1)

    # 1. within chunks: y_l = sum_{s<=l} (C_l . B_s) exp(a_{s+1} + ... + a_l) dt_s x_s
    y = _DecayedScores.apply(C @ B.transpose(-1, -2), a_cum) @ xdt

    # Steps 2-4 carry state across chunk boundaries; a sequence of one chunk with no state in or out needs
    # none of them (every MAD task at the cpu budget: seq 32 <= chunk 64), which saves a third of the scan.
    final_state = None
    if chunks > 1 or initial_state is not None or return_final_state:
        # 2. what each chunk writes to the state from its own inputs, as [d_state, head_dim]
        decay_to_end = torch.exp(a_cum[..., -1:] - a_cum)
        written = (B * decay_to_end[..., None]).transpose(-1, -2) @ xdt
        chunk_decay = torch.exp(a_cum[..., -1])[..., None, None]  # a whole chunk's decay

        # 3. between chunks: the state entering chunk c decays through c and gains what c writes
        state = None  # no state entering: nothing to read (chunk 0 of a fresh sequence)
        if initial_state is not None:
            state = initial_state.to(f).view(batch, groups, rep, head_dim, d_state).transpose(-1, -2)
        entering = []
        for c in range(chunks):
            entering.append(state)
            state = written[:, :, :, c] if state is None else state * chunk_decay[:, :, :, c] + written[:, :, :, c]
        final_state = state

        # 4. what each position reads from the state entering its chunk
        first = 0 if entering[0] is not None else 1
        if first < chunks:
            held = torch.stack(entering[first:], dim=3)
            read = (C[:, :, :, first:] @ held) * torch.exp(a_cum[..., first:, :])[..., None]
            y = y + read if first == 0 else torch.cat([y[:, :, :, :1], y[:, :, :, 1:] + read], dim=3)

    y = y.permute(0, 3, 4, 1, 2, 5)
    y = y.reshape(batch, chunks * q, heads, head_dim)[:, :seq]
    if D is not None:
        y = y + x_in.to(f) * D.to(f)[:, None]
    y = y.to(out_dtype)
    if return_final_state:
        return y, final_state.transpose(-1, -2).reshape(batch, heads, head_dim, d_state)
    return y


def ssd_recurrent_reference(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    return_final_state: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The SSD recurrence one token at a time (slow; the definition the chunked scan and kernels must match).

    Same arguments as :func:`ssd_chunked` without ``chunk_size``. It is also the token-by-token form an
    inference step uses, which is why the cache holds ``heads * head_dim * d_state`` numbers per layer.
    """
    batch, seq, heads, head_dim = x.shape
    groups, d_state = B.shape[-2:]
    rep = heads // groups
    B, C = B.repeat_interleave(rep, dim=2), C.repeat_interleave(rep, dim=2)
    state = x.new_zeros(batch, heads, head_dim, d_state) if initial_state is None else initial_state.clone()
    outputs = []
    for t in range(seq):
        decay = torch.exp(dt[:, t] * A)[..., None, None]
        write = (dt[:, t, :, None] * x[:, t])[..., None] * B[:, t, :, None, :]
        state = decay * state + write
        outputs.append(torch.einsum("bhpn,bhn->bhp", state, C[:, t]))
    y = torch.stack(outputs, dim=1)
    if D is not None:
        y = y + x * D[:, None]
    return (y, state) if return_final_state else y


def ssd_step(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None,
    state: torch.Tensor,
) -> torch.Tensor:
    """One token of :func:`ssd_recurrent_reference`, writing ``state [batch, heads, head_dim, d_state]`` in
    place: a decoding step. ``x`` ``[batch, heads, head_dim]``, ``dt`` ``[batch, heads]`` (after softplus),
    ``B``, ``C`` ``[batch, groups, d_state]``; returns ``y [batch, heads, head_dim]``.

    The reference's loop body with the heads of a group as a broadcast dimension (no copies of ``B`` and ``C``
    per head): a decoding step costs its ops' dispatch, not their arithmetic, on a CPU. The read ``state C`` is
    a multiply and a sum: as a batched matrix-vector product MKL took 3x as long (2.0 ms against 0.6 ms at
    batch 64, demo-4m widths)."""
    batch, heads, head_dim = x.shape
    groups, d_state = B.shape[-2:]
    grouped = state.view(batch, groups, heads // groups, head_dim, d_state)
    grouped.mul_(torch.exp(dt * A).view(batch, groups, -1, 1, 1))
    xdt = (x * dt[..., None]).view(batch, groups, -1, head_dim, 1)
    grouped.addcmul_(xdt, B.view(batch, groups, 1, 1, d_state))
    y = (grouped * C.view(batch, groups, 1, 1, d_state)).sum(-1).view(batch, heads, head_dim)
    return y if D is None else y.addcmul_(x, D[:, None])


# -- the block's smaller pieces ------------------------------------------------------------------------------


class GatedRMSNorm(nn.Module):
    """``rmsnorm(y * silu(z)) * weight`` with one RMS per ``group_size`` channels (mamba_ssm's
    ``RMSNormGated`` with ``norm_before_gate=False``), computed in at least float32."""

    def __init__(self, dim: int, group_size: int, eps: float) -> None:
        super().__init__()
        self.group_size, self.eps = group_size, eps
        self.weight = nn.Parameter(torch.ones(dim))

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)

    def forward(self, y: torch.Tensor, z: torch.Tensor, use_kernel: bool = False) -> torch.Tensor:
        if use_kernel:
            return _gated_rmsnorm_kernel(
                y, self.weight, None, z=z, eps=self.eps, group_size=self.group_size, norm_before_gate=False
            )
        f = _compute_dtype(y.dtype)
        gated = y.to(f) * F.silu(z.to(f))
        if self.group_size == gated.shape[-1]:  # one group (n_groups 1): F.rms_norm's fused op and backward
            return F.rms_norm(gated, (self.group_size,), self.weight.to(f), self.eps).to(y.dtype)
        normed = F.rms_norm(gated.unflatten(-1, (-1, self.group_size)), (self.group_size,), eps=self.eps)
        return (normed.flatten(-2) * self.weight).to(y.dtype)


@dataclass
class Mamba2Cache(LayerCache):
    """``conv``: the last ``d_conv - 1`` inputs of the convolution, ``[batch, d_conv - 1, conv_dim]``;
    ``ssm``: the SSM state, ``[batch, heads, head_dim, d_state]`` (:func:`ssd_chunked`'s ``initial_state``)."""

    conv: torch.Tensor
    ssm: torch.Tensor


# -- the primitive -------------------------------------------------------------------------------------------


class Mamba2(Primitive):
    """Mamba-2 block: in_proj -> causal conv + SiLU -> SSD scan (+ D skip) -> gated RMSNorm -> out_proj."""

    symbol = "S"
    name = "mamba2"
    Config = Mamba2Config
    description = "Mamba-2 selective state-space block (SSD)"

    def __init__(self, config: Mamba2Config) -> None:
        super().__init__(config)
        c = config
        self.in_proj = nn.Linear(c.d_model, c.in_proj_dim, bias=False)
        # Padding is applied in forward (left only, for causality); the weight layout is mamba_ssm's.
        self.conv1d = nn.Conv1d(c.conv_dim, c.conv_dim, c.d_conv, groups=c.conv_dim, bias=True)
        self.dt_bias = nn.Parameter(torch.empty(c.n_heads))
        self.A_log = nn.Parameter(torch.empty(c.n_heads))
        self.D = nn.Parameter(torch.empty(c.n_heads))
        self.norm = GatedRMSNorm(c.d_inner, group_size=c.d_inner // c.n_groups, eps=c.norm_eps)
        self.out_proj = nn.Linear(c.d_inner, c.d_model, bias=False)
        if not self.A_log.is_meta:  # usable on its own; a model re-initialises it with its InitScheme
            self.reset_parameters(InitScheme())

    @torch.no_grad()
    def reset_parameters(self, init: InitScheme) -> None:
        c = self.config
        nn.init.normal_(self.in_proj.weight, std=init.std)
        nn.init.normal_(self.out_proj.weight, std=init.out_std)
        self.conv1d.reset_parameters()
        self.norm.reset_parameters()
        device = self.dt_bias.device
        # dt log-uniform in [dt_min, dt_max] (floored), stored through the inverse of softplus: a per-head
        # spread of time scales is what lets some heads remember long and others react fast.
        log_min, log_max = math.log(c.dt_min), math.log(c.dt_max)
        dt = torch.exp(torch.rand(c.n_heads, device=device) * (log_max - log_min) + log_min)
        dt = dt.clamp(min=c.dt_init_floor)
        self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        low, high = c.A_init_range
        self.A_log.copy_(torch.log(torch.empty(c.n_heads, device=device).uniform_(low, high)))
        nn.init.ones_(self.D)

    def no_weight_decay(self) -> set[str]:
        # Decaying A_log / dt_bias would pull the time scales toward exp(0) / softplus(0), D toward no skip.
        return {"A_log", "D", "dt_bias", "conv1d.bias", "norm.weight"}

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        c = self.config
        batch, seq, _ = u.shape
        kernels = self._kernels(u)
        z, xbc, dt = self.in_proj(u).split([c.d_inner, c.conv_dim, c.n_heads], dim=-1)
        xbc = self._conv(xbc, kernels["conv"])
        x, B, C = self._split_heads(xbc)
        f = _compute_dtype(u.dtype)
        A = -torch.exp(self.A_log.to(f))
        if kernels["ssd"]:
            y = _ssd_kernel(x, dt, A, B, C, c.chunk_size, D=self.D, dt_bias=self.dt_bias, dt_softplus=True)
        else:
            dt = F.softplus(dt.to(f) + self.dt_bias.to(f))
            y = ssd_chunked(x, dt, A, B, C, c.chunk_size, D=self.D)
        y = self.norm(y.reshape(batch, seq, c.d_inner), z, use_kernel=kernels["norm"])
        return self.out_proj(y)

    def _split_heads(self, xbc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The convolved ``x | B | C`` channels as ``x [..., heads, head_dim]`` and ``B``, ``C [..., groups, state]``."""
        c = self.config
        x, B, C = xbc.split([c.d_inner, c.n_groups * c.d_state, c.n_groups * c.d_state], dim=-1)
        return (x.unflatten(-1, (c.n_heads, c.head_dim)), B.unflatten(-1, (c.n_groups, c.d_state)),
                C.unflatten(-1, (c.n_groups, c.d_state)))

    # -- incremental decoding -----------------------------------------------------------------------------
    def init_cache(self, batch, max_len, device=None, dtype=None) -> Mamba2Cache:
        """``max_len`` does not matter: the state has the same size at any context length."""
        c = self.config
        device, dtype = self._cache_placement(device, dtype)
        return Mamba2Cache(
            conv=torch.zeros(batch, c.d_conv - 1, c.conv_dim, device=device, dtype=dtype),
            ssm=torch.zeros(batch, c.n_heads, c.head_dim, c.d_state, device=device, dtype=dtype),
        )

    def forward_cached(self, u: torch.Tensor, cache: Mamba2Cache, start_pos: int) -> torch.Tensor:
        """The block continuing from ``cache``: the chunked scan from the cached state for several tokens (a
        prompt), one step of the recurrence for a single token. PyTorch forms on every device (the CUDA kernels
        serve the training forward)."""
        return self._continue(u, cache, fresh=start_pos == 0)

    def decode_step(self, u: torch.Tensor, cache: Mamba2Cache, pos: torch.Tensor) -> torch.Tensor:
        """One token continuing a started sequence: :meth:`forward_cached`'s recurrent step. ``pos`` is not read:
        the state carries the context, so the step is the same at every position."""
        return self._continue(u, cache, fresh=False)

    def _continue(self, u: torch.Tensor, cache: Mamba2Cache, fresh: bool) -> torch.Tensor:
        """:meth:`forward_cached`, ``fresh`` for a new sequence (``start_pos == 0``)."""
        c = self.config
        batch, seq, _ = u.shape
        if batch != cache.ssm.shape[0]:
            raise ValueError(
                f"batch of {batch} sequences for an inference cache allocated for {cache.ssm.shape[0]}"
            )
        if fresh:  # a new sequence: empty convolution window, zero state
            cache.conv.zero_()
        z, xbc, dt = self.in_proj(u).split([c.d_inner, c.conv_dim, c.n_heads], dim=-1)
        xbc = F.silu(conv_step(cache.conv, xbc, self.conv1d.weight, self.conv1d.bias))
        x, B, C = self._split_heads(xbc)
        f = _compute_dtype(u.dtype)
        A = -torch.exp(self.A_log.to(f))
        dt = F.softplus(dt.to(f) + self.dt_bias.to(f))
        if seq == 1 and not fresh:  # a decoding step: the recurrence, once, on the cached state in place
            state = cache.ssm if cache.ssm.dtype == f else cache.ssm.to(f)
            y = ssd_step(x[:, 0].to(f), dt[:, 0], A, B[:, 0].to(f), C[:, 0].to(f), self.D.to(f), state)
            if state is not cache.ssm:
                cache.ssm.copy_(state)
            y = y.to(u.dtype).unsqueeze(1)
        else:
            initial = None if fresh else cache.ssm
            y, state = ssd_chunked(
                x, dt, A, B, C, c.chunk_size, D=self.D, initial_state=initial, return_final_state=True
            )
            cache.ssm.copy_(state)
        y = self.norm(y.reshape(batch, seq, c.d_inner), z)
        return self.out_proj(y)

    def _conv(self, xbc: torch.Tensor, use_kernel: bool) -> torch.Tensor:
        if use_kernel:
            xt = xbc.transpose(
                1, 2
            )  # [batch, channels, seq], channel-last in memory (a slice of in_proj's output)
            if (
                xt.stride(0) % 8 or xt.stride(2) % 8
            ):  # causal_conv1d's channel-last path needs 8-aligned strides
                xt = xt.contiguous()
            out = _conv_kernel(xt, self.conv1d.weight.squeeze(1), self.conv1d.bias, activation="silu")
            return out.transpose(1, 2)
        return F.silu(causal_depthwise_conv1d(xbc, self.conv1d.weight, self.conv1d.bias))

    def _kernels(self, u: torch.Tensor) -> dict[str, bool]:
        """Which CUDA kernels this call uses: each that imported, on CUDA tensors, unless backend='torch'."""
        backend = self.config.backend
        if backend == "torch":
            return {"ssd": False, "norm": False, "conv": False}
        on_cuda = u.is_cuda
        kernels = {
            "ssd": on_cuda and _ssd_kernel is not None,
            "norm": on_cuda and _gated_rmsnorm_kernel is not None,
            "conv": on_cuda and _conv_kernel is not None and self.config.d_conv in _CONV_KERNEL_WIDTHS,
        }
        if backend == "cuda" and not all(kernels.values()):
            missing = [name for name, used in kernels.items() if not used]
            raise RuntimeError(
                f"mamba2 backend 'cuda' needs CUDA tensors, mamba-ssm and causal-conv1d installed "
                f"(pip install 'composer-hnas[cuda]') and d_conv in {_CONV_KERNEL_WIDTHS}; unavailable here: "
                f"{missing} (device={u.device}); use backend 'auto'"
            )
        return kernels

    # -- analytic accounting ------------------------------------------------------------------------------
    @classmethod
    def cpu_batch_slices(cls, config: Mamba2Config, batch: int, seq_len: int,
                         activation_bytes: int = 4) -> dict[str, int]:
        """The short convolution's slices (its input ``xBC``, ``conv_dim`` channels) and the SSD scan's (which
        computes in float32 whatever the activations' dtype)."""
        c = config
        return {"short_conv": conv_batch_slices(batch, seq_len, c.conv_dim, activation_bytes),
                "ssd_scan": cpu_scan_slices(batch, seq_len, c.n_heads, c.chunk_size)}

    @classmethod
    def param_count(cls, config: Mamba2Config) -> int:
        c = config
        return (
            c.d_model * c.in_proj_dim  # in_proj
            + c.conv_dim * (c.d_conv + 1)  # depthwise conv weight + bias
            + 3 * c.n_heads  # dt_bias, A_log, D
            + c.d_inner  # gated norm weight
            + c.d_inner * c.d_model  # out_proj
        )

    @classmethod
    def flops_per_token(cls, config: Mamba2Config, seq_len: int) -> int:
        """``6 * (in_proj + out_proj + conv weights) + 3 * SSD forward``, the SSD counted as the chunked scan.

        Forward SSD FLOPs per token, with chunk length ``Q = min(chunk_size, seq_len)``, ``H`` heads of dim
        ``P``, ``G`` groups and state size ``N``:

        * within a chunk, ``C B^T`` (per group) and its product with ``x`` (per head) over the causal half of
          the chunk (``Q / 2`` positions on average, as attention counts ``seq_len / 2``):
          ``2 * Q/2 * (G*N + H*P) = Q * (G*N + H*P)``;
        * each chunk's state ``B^T x`` and each position's read ``C state``: ``2 * H*P*N`` each.

        The chunk-to-chunk state passing is a scaled add per chunk (elementwise, not counted; the torch path's
        small ``(chunks+1)^2`` matrix of ssd_minimal is an implementation detail the kernel does linearly).
        """
        c = config
        q = min(c.chunk_size, seq_len)
        matmul_params = c.d_model * c.in_proj_dim + c.d_inner * c.d_model + c.conv_dim * c.d_conv
        ssd_forward = (
            q * (c.n_groups * c.d_state + c.n_heads * c.head_dim) + 4 * c.n_heads * c.head_dim * c.d_state
        )
        return 6 * matmul_params + 3 * ssd_forward

    @classmethod
    def inference_cache(cls, config: Mamba2Config, dtype_bytes: int = 2) -> CacheSpec:
        """A fixed-size state per sequence: the SSM state ``[heads, head_dim, d_state]`` plus the last
        ``d_conv - 1`` inputs of the convolution; nothing grows with the context."""
        c = config
        numbers = c.n_heads * c.head_dim * c.d_state + (c.d_conv - 1) * c.conv_dim
        return CacheSpec(fixed_bytes=numbers * dtype_bytes)

    @classmethod
    def decode_flops_per_token(cls, config: Mamba2Config, context: int) -> int:
        """One recurrent step, whatever the context: 2 per projection and convolution weight, plus the state
        update ``dt x B^T`` and the read ``state C``, ``2 * heads * head_dim * d_state`` each (as the chunked
        count's state terms in :meth:`flops_per_token`)."""
        c = config
        matmul_params = c.d_model * c.in_proj_dim + c.d_inner * c.d_model + c.conv_dim * c.d_conv
        return 2 * matmul_params + 4 * c.n_heads * c.head_dim * c.d_state
