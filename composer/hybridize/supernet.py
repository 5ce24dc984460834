"""Where should attention stay? A once-for-all supernet over a pretrained model (PostNAS-style, arXiv 2508.15884).

Jet-Nemotron's PostNAS freezes a pretrained model's MLPs and trains one supernet in which every attention layer
may stay or become linear; a search then places the few full-attention layers, because *where* they sit matters as
much as how many there are. Here:

* The supernet is the hybrid student in which **every** teacher attention layer is replaced (``composer
  hybridize``'s pattern ``P``, e.g. ``DMDMDMDM`` for an ``(AM)x4`` teacher), plus the teacher itself, frozen. A
  *placement* is the set of attention positions that keep the teacher's attention; the model it defines runs the
  teacher's layer at those positions and the student's everywhere else (:func:`placement_forward`). MLPs and
  embeddings are frozen copies of the teacher's in both, so only the replacements train.
* Each training step samples one placement of exactly ``keep`` kept layers (uniformly, from a generator seeded by
  the step, so a resumed run draws the same ones) and distils the teacher through it (KL). Every replacement layer
  so learns to work beside kept attention anywhere.
* Placements are then scored without retraining, on held-out text: validation loss and KL to the teacher
  (:func:`score_placement`). All placements are scored when there are at most ``max_candidates``; otherwise a beam
  search adds kept layers one at a time (:func:`beam_search`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence

import torch

from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.pattern import layers

ATTENTION = "A"


def attention_positions(teacher: ArchConfig) -> list[int]:
    """Layer indices of the teacher's full-attention layers: the choices of a placement."""
    return [i for i, token in enumerate(teacher.layers) if token == ATTENTION]


def check_supernet_pattern(teacher: ArchConfig, pattern: str, keep: int) -> list[int]:
    """The attention positions, after checking that ``pattern`` replaces every one of them and that ``keep`` of
    them can stay."""
    positions = attention_positions(teacher)
    tokens = layers(pattern)
    kept = [i for i in positions if tokens[i] == ATTENTION]
    if kept:
        raise ConfigError(f"with --search-placement the pattern names each attention layer's replacement; layers "
                          f"{', '.join(map(str, kept))} are still A (write e.g. D or S there)")
    if not 1 <= keep < len(positions):
        raise ConfigError(f"--keep must be between 1 and {len(positions) - 1} (the teacher has {len(positions)} "
                          f"attention layers), got {keep}")
    return positions


def placement_pattern(pattern: str, teacher: ArchConfig, kept: Iterable[int]) -> str:
    """The hybrid's pattern with the teacher's attention back at the ``kept`` positions."""
    tokens = layers(pattern)
    for i in kept:
        tokens[i] = teacher.layers[i]
    return "".join(tokens)


def sample_placement(positions: Sequence[int], keep: int, generator: torch.Generator) -> tuple[int, ...]:
    order = torch.randperm(len(positions), generator=generator)[:keep]
    return tuple(sorted(positions[i] for i in order.tolist()))


def placement_forward(student, teacher, input_ids: torch.Tensor, kept: Iterable[int]) -> torch.Tensor:
    """Logits of the placement: the teacher's layer at each kept position, the student's elsewhere; embeddings,
    final norm and head are the student's (frozen copies of the teacher's)."""
    kept = set(kept)
    h = student.tok_embeddings(input_ids)
    for i, layer in enumerate(student.layers):
        h = (teacher.layers[i] if i in kept else layer)(h)
    return student.logits_and_loss(h, None)[0]


@torch.no_grad()
def score_placement(student, teacher, batches: Sequence[torch.Tensor], kept: Iterable[int],
                    teacher_logits: Sequence[torch.Tensor] | None = None) -> dict[str, float]:
    """Mean held-out cross-entropy and KL to the teacher of one placement, token-weighted over ``batches``.
    ``teacher_logits`` (one tensor per batch) saves recomputing the teacher for every placement."""
    from composer.hybridize.distill import kl_divergence
    from composer.loss import cross_entropy

    kept = tuple(kept)
    loss = kl = tokens = 0.0
    for index, batch in enumerate(batches):
        inputs, targets = batch[:, :-1], batch[:, 1:]
        logits = placement_forward(student, teacher, inputs, kept)
        reference = teacher_logits[index] if teacher_logits is not None else teacher(inputs).logits
        n = targets.numel()
        loss += cross_entropy(logits, targets).item() * n
        kl += kl_divergence(logits, reference).item() * n
        tokens += n
    return {"val_loss": loss / tokens, "val_kl": kl / tokens}


@torch.no_grad()
def copy_recall(forward, batches: Sequence[torch.Tensor], span: int = 16, seed: int = 0) -> float:
    """A retrieval probe that needs no training: in each held-out sequence a random ``span`` of tokens is written
    at the start and again at the end, and the probe is the share of the second copy's tokens (after its first)
    that ``forward(input_ids) -> logits`` predicts exactly. Only a model that looks back across the whole sequence
    can copy; a fixed-size state or a short window loses the span as the distance grows."""
    generator = torch.Generator().manual_seed(seed)
    correct = total = 0
    for batch in batches:
        ids = batch[:, :-1].clone()
        length = ids.size(1)
        if length < 2 * span + 1:
            raise ConfigError(f"copy_recall needs sequences longer than 2 * span = {2 * span}, got {length}")
        vocab_high = int(ids.max().item()) + 1  # tokens the text uses: a copy of them is in distribution
        span_tokens = torch.randint(0, vocab_high, (ids.size(0), span), generator=generator)
        ids[:, :span] = span_tokens
        ids[:, length - span:] = span_tokens
        predicted = forward(ids).argmax(-1)[:, length - span: length - 1]
        correct += (predicted == span_tokens[:, 1:]).sum().item()
        total += predicted.numel()
    return correct / max(total, 1)


def beam_search(positions: Sequence[int], keep: int, score: Callable[[tuple[int, ...]], float],
                width: int = 8) -> list[tuple[tuple[int, ...], float]]:
    """Placements of ``keep`` kept layers grown one layer at a time, keeping the ``width`` lowest-scoring at each
    size; returns every full-size placement scored, best first."""
    beam: list[tuple[int, ...]] = [()]
    scored: dict[tuple[int, ...], float] = {}
    for _ in range(keep):
        grown = sorted({tuple(sorted((*p, q))) for p in beam for q in positions if q not in p})
        for placement in grown:
            if placement not in scored:
                scored[placement] = score(placement)
        beam = sorted(grown, key=lambda p: (scored[p], p))[:width]
    full = [(p, s) for p, s in scored.items() if len(p) == keep]
    return sorted(full, key=lambda item: (item[1], item[0]))


def candidate_placements(positions: Sequence[int], keep: int, max_candidates: int) -> list[tuple[int, ...]] | None:
    """Every placement when there are at most ``max_candidates``, else None (use :func:`beam_search`)."""
    if math.comb(len(positions), keep) > max_candidates:
        return None
    return [tuple(p) for p in itertools.combinations(positions, keep)]


def uniform_placement(positions: Sequence[int], keep: int) -> tuple[int, ...]:
    """``keep`` attention positions spread evenly (the middle of equal segments): the unsearched baseline."""
    n = len(positions)
    return tuple(positions[(2 * j + 1) * n // (2 * keep)] for j in range(keep))
