"""Two-process CPU DDP runs (gloo) of TokenDataModule; run by test_ddp.py under torchrun.

Usage: ``python -m torch.distributed.run --nproc-per-node 2 ddp_resume_script.py OUT_DIR``. For each kind of data
(packed, streaming) the same two processes train 6 steps uninterrupted, then 5 steps saving a checkpoint at step 3,
then resume from it to step 6; every rank logs its batches under OUT_DIR/KIND. Rank 0 prints one JSON line: the
checks per kind. (Launched once, the two processes serve all six fits: spawning per fit cost a Python start each.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import lightning as L
import torch

sys.path.insert(0, str(Path(__file__).parent))
from conftest import words, write_jsonl

from composer.data import DataConfig, TokenDataModule


class Recorder(L.LightningModule):
    def __init__(self, vocab_size: int, out: Path, tag: str) -> None:
        super().__init__()
        self.embed, self.head = torch.nn.Embedding(vocab_size, 8), torch.nn.Linear(8, vocab_size)
        self.out, self.tag = out, tag

    def log_batch(self, kind: str, batch: torch.Tensor) -> None:
        with open(self.out / f"{self.tag}-{kind}-{self.global_rank}.jsonl", "a") as f:
            f.write(json.dumps(batch.tolist()) + "\n")

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.embed(batch[:, :-1]))
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())

    def training_step(self, batch, batch_idx):
        self.log_batch("train", batch)
        return self.loss(batch)

    def validation_step(self, batch, batch_idx):
        if self.tag == "full" and self.global_step <= 3:  # the first validation run only
            self.log_batch("val", batch)
        return self.loss(batch)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class SaveAt(L.Callback):
    def __init__(self, path: Path) -> None:
        self.path = path

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == 3:
            trainer.save_checkpoint(self.path)


def fit(config: DataConfig, out: Path, tag: str, steps: int, ckpt: Path | None = None, callbacks=()) -> None:
    dm = TokenDataModule(config, micro_batch_size=2)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",  # the torchrun processes: Lightning joins them instead of launching its own
        max_steps=steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        val_check_interval=3,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        callbacks=list(callbacks),
    )
    trainer.fit(Recorder(dm.vocab_size, out, tag), datamodule=dm, ckpt_path=ckpt)


def main(kind: str, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    if kind == "packed":
        source = write_jsonl(out / "c.jsonl", [words(i, n=8 + i % 13) for i in range(60)])
        config = DataConfig(source=str(source), cache_dir=str(out / "cache"), seq_len=16, val_fraction=0.2)
    else:
        texts = [words(i, n=3 + i % 7) for i in range(48)]
        for f in range(4):
            write_jsonl(out / "shards" / f"p{f}.jsonl", texts[f * 12 : (f + 1) * 12])
        config = DataConfig(
            source=str(out / "shards"), cache_dir=str(out / "cache"), streaming=True, seq_len=16,
            val_documents=6, shuffle_buffer=0,
        )  # fmt: skip
    config = config.replace(num_workers=1)
    ckpt = out / "step3.ckpt"
    fit(config, out, "full", 6)
    fit(config, out, "part", 5, callbacks=[SaveAt(ckpt)])
    fit(config, out, "resumed", 6, ckpt=ckpt)

    def batches(tag: str, what: str, rank: int) -> list:
        path = out / f"{tag}-{what}-{rank}.jsonl"
        return [json.loads(line) for line in open(path)] if path.exists() else []

    train_rows = [tuple(row) for r in range(2) for batch in batches("full", "train", r) for row in batch]
    val_rows = [tuple(row) for r in range(2) for batch in batches("full", "val", r) for row in batch]
    return {
        "resume_exact": [
            batches("part", "train", r)[:3] + batches("resumed", "train", r) == batches("full", "train", r)
            for r in range(2)
        ],
        "train_rows": len(train_rows),
        "train_unique": len(set(train_rows)),
        "val_rows": len(val_rows),
        "val_unique": len(set(val_rows)),
        "state_kind": torch.load(ckpt, weights_only=True)["TokenDataModule"]["train"]["kind"],
    }


if __name__ == "__main__":
    checks = {kind: main(kind, Path(sys.argv[1]) / kind) for kind in ("packed", "streaming")}
    if torch.distributed.get_rank() == 0:
        print(json.dumps(checks))
