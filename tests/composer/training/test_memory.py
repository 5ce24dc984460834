"""The training memory floor (composer/training/memory.py): below what training really keeps, for every primitive,
so that no run that fits is refused; and a refusal that names the size and the fix."""

from __future__ import annotations

import pytest
import torch

from composer.errors import ConfigError
from composer.model import build_model
from composer.presets import resolve_architecture
from composer.training.memory import TrainingMemory, check_training_memory, training_memory

BATCH, SEQ = 4, 128


def saved_bytes(pattern: str, autocast: bool) -> int:
    """The bytes one forward of ``pattern``'s layers at tiny widths keeps for the backward pass, each storage once
    (``saved_tensors_hooks``), on the CPU, in fp32 or under bf16 autocast."""
    arch, _ = resolve_architecture(pattern, "tiny", "tiny")
    model = build_model(arch)
    seen: dict[int, int] = {}

    def keep(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    h = torch.randn(BATCH, SEQ, arch.d_model, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast), \
            torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
        for layer in model.layers:
            h = layer(h)
    return sum(seen.values())


# how far below what is kept the floor may be: linear layers are most of what attention and the MLP keep; a scan
# keeps its chunks' states beside them, and the MoE's experts are not linear modules (measured: 1.4-1.7x, 3-6x, 15x)
LOOSENESS = {"A": 2, "M": 2, "W": 2, "S": 8, "D": 8, "[AS]": 8, "AMSD": 5, "E": 20}


@pytest.mark.parametrize("pattern", list(LOOSENESS))
@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_the_activation_floor_is_below_what_training_keeps(pattern, precision):
    arch, _ = resolve_architecture(pattern, "tiny", "tiny")
    floor = training_memory(arch, micro_batch_size=BATCH, seq_len=SEQ, precision=precision).activations
    kept = saved_bytes(pattern, autocast=precision == "bf16-mixed")
    assert kept / LOOSENESS[pattern] <= floor <= kept, (floor, kept)


def test_state_is_weights_gradients_and_two_moments_split_by_fsdp():
    arch, _ = resolve_architecture("(AM)x2", "tiny", "tiny")
    params = sum(p.numel() for p in build_model(arch).parameters())
    memory = training_memory(arch, micro_batch_size=1, seq_len=8, precision="32-true")
    assert memory.state == 16 * params
    assert training_memory(arch, micro_batch_size=1, seq_len=8, precision="bf16-true").state == 8 * params
    assert training_memory(arch, micro_batch_size=1, seq_len=8, precision="32-true", shards=4).state == 4 * params
    assert training_memory(arch, micro_batch_size=1, seq_len=8, precision="32-true", frozen=True).state == 4 * params
    checkpointed = training_memory(arch, micro_batch_size=1, seq_len=8, precision="32-true",
                                   activation_checkpointing=True)
    assert checkpointed.activations < memory.activations
    assert memory.logits == 2 * 8 * arch.vocab_size * 4


def test_a_run_that_cannot_fit_is_refused_in_one_line_naming_the_size_and_the_fix(monkeypatch):
    monkeypatch.setattr("composer.training.memory.available_memory_bytes", lambda device: 3 << 30)
    need = TrainingMemory(state=1 << 30, activations=2 << 30, logits=1 << 29, tokens=4096)
    with pytest.raises(ConfigError) as refused:
        check_training_memory(need, "cpu", 1, "(AM)x999")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("(AM)x999 needs at least 3.5 GiB to train (weights, gradients and AdamW state 1.0 GiB, "
                              "activations 2.0 GiB at 4,096 tokens per forward, logits 512.0 MiB) but the CPU has "
                              "3.0 GiB free: lower --micro-batch-size")
    check_training_memory(TrainingMemory(state=1 << 30, activations=1 << 30, logits=0, tokens=1), "cpu", 1, "x")
    with pytest.raises(ConfigError, match=r"needs at least 4.0 GiB to train \(2 processes of 2.0 GiB: "):
        check_training_memory(TrainingMemory(state=1 << 30, activations=1 << 30, logits=0, tokens=1), "cpu", 2, "x")
    monkeypatch.setattr("composer.training.memory.available_memory_bytes", lambda device: None)
    check_training_memory(need, "cpu", 1, "x")  # unknown free memory: the run is let through
