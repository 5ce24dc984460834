"""TokenDataModule with and without a Lightning Trainer, including checkpoint resume mid-run."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import lightning as L
import pytest
import torch

from composer.data import DataConfig, DataError, TokenDataModule

from .conftest import words, write_jsonl

pytestmark = pytest.mark.filterwarnings(
    "ignore::lightning.fabric.utilities.warnings.PossibleUserWarning",
    "ignore:.*does not have many workers:UserWarning",
    "ignore:You have overridden `on_before_batch_transfer` in both",  # Recorder does, on purpose
)


def test_engine_usage_offline_default(tmp_path):
    dm = TokenDataModule(
        DataConfig(seq_len=128, cache_dir=str(tmp_path), max_documents=40), micro_batch_size=8
    )
    assert dm.vocab_size == 257 and dm.tokenizer.eos_id == 256
    dm.prepare_data()
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert batch.shape == (8, 129) and batch.dtype == torch.long
    val = list(dm.val_dataloader())
    assert val and all(b.shape[1] == 129 and b.shape[0] <= 8 for b in val)
    stats = dm.stats()
    assert stats["documents"] == 40 and stats["train_chunks"] > 0
    assert sum(b.shape[0] for b in val) == stats["val_chunks"] > 0
    for key in ("documents", "tokens", "train_chunks", "val_chunks", "dropped_tail_tokens"):
        assert isinstance(stats[key], int)


def test_micro_batch_size_is_checked():
    with pytest.raises(DataError, match="micro_batch_size must be an integer >= 1"):
        TokenDataModule(DataConfig(), micro_batch_size=0)


def test_state_round_trip_without_a_trainer(config):
    config = config.replace(num_workers=2)
    reference = TokenDataModule(config, micro_batch_size=2)
    reference.setup()
    expected = list(islice(reference.train_dataloader(), 12))
    dm = TokenDataModule(config, micro_batch_size=2)
    dm.setup()
    head = list(islice(dm.train_dataloader(), 5))
    state = dm.state_dict()
    assert state["train"]["micro_batches_per_rank"] == 5
    resumed = TokenDataModule(config, micro_batch_size=2)
    resumed.load_state_dict(state)  # before train_dataloader(), as Lightning does
    assert resumed.state_dict() == state  # nothing consumed yet: the loaded position
    resumed.setup()
    tail = list(islice(resumed.train_dataloader(), 7))
    assert all(torch.equal(a, b) for a, b in zip(head + tail, expected, strict=True))
    assert resumed.state_dict()["train"]["micro_batches_per_rank"] == 12


def test_a_new_train_dataloader_continues_the_previous_one(config):
    reference = TokenDataModule(config, micro_batch_size=2)
    reference.setup()
    expected = list(islice(reference.train_dataloader(), 9))
    dm = TokenDataModule(config, micro_batch_size=2)
    dm.setup()
    first = list(islice(dm.train_dataloader(), 4))
    second = list(islice(dm.train_dataloader(), 5))
    assert all(torch.equal(a, b) for a, b in zip(first + second, expected, strict=True))


class Recorder(L.LightningModule):
    """A tiny language model that records every training batch it is given."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, 8)
        self.head = torch.nn.Linear(8, vocab_size)
        self.seen: list[torch.Tensor] = []
        self.val_batches = 0
        self.transfers = 0

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.embed(batch[:, :-1]))
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())

    def training_step(self, batch, batch_idx):
        self.seen.append(batch.clone())
        return self.loss(batch)

    def validation_step(self, batch, batch_idx):
        self.val_batches += 1
        return self.loss(batch)

    def on_before_batch_transfer(self, batch, dataloader_idx):
        self.transfers += 1
        return batch

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class SaveAt(L.Callback):
    def __init__(self, step: int, path: Path) -> None:
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)


def fit(
    config: DataConfig, steps: int, ckpt_path: Path | None = None, callbacks=()
) -> tuple[Recorder, TokenDataModule]:
    dm = TokenDataModule(config, micro_batch_size=2)
    model = Recorder(dm.vocab_size)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        val_check_interval=2,
        check_val_every_n_epoch=None,
        limit_val_batches=2,
        num_sanity_val_steps=1,
        callbacks=list(callbacks),
    )
    trainer.fit(model, datamodule=dm, ckpt_path=ckpt_path)
    return model, dm


@pytest.fixture
def stream_config(tmp_path) -> DataConfig:
    texts = [words(i, n=3 + i % 7) for i in range(48)]
    for f in range(4):
        write_jsonl(tmp_path / "shards" / f"part-{f}.jsonl", texts[f * 12 : (f + 1) * 12])
    return DataConfig(
        source=str(tmp_path / "shards"),
        cache_dir=str(tmp_path / "cache"),
        streaming=True,
        seq_len=16,
        val_documents=4,
        shuffle_buffer=0,
        num_workers=2,
    )


@pytest.mark.parametrize("kind", ["packed", "streaming"])
def test_lightning_resume_mid_run_sees_the_uninterrupted_batches(kind, config, stream_config, tmp_path):
    config = config.replace(num_workers=2) if kind == "packed" else stream_config
    uninterrupted, _ = fit(config, steps=7)
    assert len(uninterrupted.seen) == 7 and uninterrupted.val_batches > 0
    assert uninterrupted.transfers >= 7  # the module's own hook still runs

    ckpt = tmp_path / "step3.ckpt"
    interrupted, _ = fit(config, steps=5, callbacks=[SaveAt(3, ckpt)])
    saved = torch.load(ckpt, weights_only=True)
    assert saved["TokenDataModule"]["train"]["micro_batches_per_rank"] == 3
    resumed, _ = fit(config, steps=7, ckpt_path=ckpt)
    assert len(resumed.seen) == 4
    replay = interrupted.seen[:3] + resumed.seen
    assert all(torch.equal(a, b) for a, b in zip(replay, uninterrupted.seen, strict=True))


def test_lightning_resume_from_a_checkpoint_saved_after_fit(config, tmp_path):
    config = config.replace(num_workers=1)
    uninterrupted, _ = fit(config, steps=6)
    first, dm = fit(config, steps=4)
    ckpt = tmp_path / "end.ckpt"
    dm.trainer.save_checkpoint(ckpt)  # the fetcher has already drawn batch 5; the state must not count it
    resumed, _ = fit(config, steps=6, ckpt_path=ckpt)
    assert all(torch.equal(a, b) for a, b in zip(first.seen + resumed.seen, uninterrupted.seen, strict=True))
    assert len(first.seen + resumed.seen) == 6
