"""``composer hybridize --search-placement --keep K``: train a supernet, rank placements of K kept attention layers,
distil
the best (composer/hybridize/supernet.py says why and how).

Every stage writes under ``out`` and is skipped when it has finished, so a killed search re-run with the same
command resumes:

* ``supernet/``: the supernet's ``composer train`` run (``supernet_keep``; resumes from its checkpoints);
* ``placement-scores.json``: every placement scored so far, written after each one, so a search killed while it
  scores placements rescored none of them (scores are deterministic: the resumed ranking equals an unkilled one);
* ``placements.json`` / ``.csv`` / ``.md`` / ``.png``: every scored placement, best (lowest held-out loss) first,
  with its KL to the teacher, and the uniform placement marked, the unsearched baseline;
* ``best-init/``: the best placement's starting point: the supernet's replacement layers with the teacher's
  attention at the kept positions;
* ``distill/``: that placement distilled as ``composer hybridize`` does, with its ``summary.json``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composer.errors import ConfigError
from composer.files import atomic_write_json, write_outputs


@dataclass
class PlacementSearchConfig:
    source: str  # the teacher: a Composer model directory
    pattern: str  # the hybrid with every attention layer replaced
    keep: int  # attention layers that stay
    out: str
    train: dict[str, Any] = field(default_factory=dict)  # TrainConfig fields of both trainings (data, tokens, ...)
    supernet_tokens: int | None = None  # default: train["tokens"]
    max_candidates: int = 256  # score every placement up to this many, else beam search
    beam_width: int = 8
    score_tokens: int = 65_536  # held-out tokens each placement is scored on
    distill_best: bool = True

    def __post_init__(self) -> None:
        if self.keep < 1 or self.max_candidates < 1 or self.beam_width < 1 or self.score_tokens < 1:
            raise ConfigError("keep, max_candidates, beam_width and score_tokens must be positive")


class PlacementSearch:
    def __init__(self, config: PlacementSearchConfig, echo: Callable[[str], None] = print) -> None:
        self.config = config
        self.out = Path(config.out)
        self.echo = echo

    # -- stages -------------------------------------------------------------------------------------------------
    def train_config(self, **changes: Any):
        from composer.training.config import TrainConfig

        c = self.config
        base = {"freeze": ["mlp", "embeddings"], "lr": 1e-3, **c.train}
        return TrainConfig(**{**base, "init_from": c.source, "teacher": c.source, **changes})

    def run_training(self, config, what: str) -> dict[str, Any]:
        import json

        from composer.training.checkpoint import latest_checkpoint
        from composer.training.run import train

        out = Path(config.out)
        summary = out / "summary.json"
        if summary.is_file():
            self.echo(f"== {what}: finished before, kept ({summary})")
            return json.loads(summary.read_text())
        self.echo(f"== {what}: {config.arch} -> {out}")
        return train(config, resume=latest_checkpoint(out / "checkpoints") is not None)

    def supernet_config(self):
        c = self.config
        return self.train_config(arch=c.pattern, supernet_keep=c.keep, out=str(self.out / "supernet"),
                                 tokens=c.supernet_tokens or c.train.get("tokens", 1_000_000))

    def run(self) -> dict[str, Any]:
        from composer.training.run import composer_model_dir, preflight

        c = self.config
        preflight(self.supernet_config())  # the teacher, the pattern over it, tokens, data: before --out (issue 61)
        self.out.mkdir(parents=True, exist_ok=True)
        c.source = composer_model_dir(c.source, self.out / "imported")  # a transformers checkpoint is imported
        supernet = self.supernet_config()
        self.run_training(supernet, f"supernet (every step keeps {c.keep} random attention layers)")
        report = self.rank_placements()
        if c.distill_best:
            best = report["placements"][0]
            init = self.best_init(tuple(best["kept"]))
            distilled = self.run_training(
                self.train_config(arch=best["pattern"], init_from=str(init), out=str(self.out / "distill")),
                f"distill the best placement {best['compact']}")
            report["distilled"] = {"pattern": best["pattern"], "val_loss": distilled["val_loss"],
                                   "val_kl": distilled.get("hybridize", {}).get("val_kl"),
                                   "summary": str(self.out / "distill" / "summary.json")}
            self.write(report)
        return report

    # -- scoring ------------------------------------------------------------------------------------------------
    def held_out_batches(self, seq_len: int):
        """The held-out split the training validated on (same data, tokenizer and data_seed), ``score_tokens``."""
        from composer.data import DataConfig, TokenDataModule
        from composer.data.tokenizer import find_tokenizer

        c, train = self.config, self.train_config(arch=self.config.pattern)
        data = DataConfig(source=train.data, tokenizer=train.tokenizer or find_tokenizer(c.source)[0],
                          text_field=train.text_field, seq_len=seq_len, val_fraction=train.val_fraction,
                          seed=train.seed, split_seed=train.data_seed,
                          val_sequences=math.ceil(c.score_tokens / seq_len), cache_dir=train.data_cache,
                          max_documents=train.max_documents)
        module = TokenDataModule(data, micro_batch_size=8)
        module.prepare_data()
        module.setup("validate")
        return list(module.val_dataloader())

    def rank_placements(self) -> dict[str, Any]:
        import json

        import torch

        from composer.hybridize.supernet import (
            attention_positions,
            beam_search,
            candidate_placements,
            copy_recall,
            placement_forward,
            placement_pattern,
            score_placement,
            uniform_placement,
        )
        from composer.interop.model_dir import load_pretrained
        from composer.pattern import compact_pattern

        c = self.config
        path = self.out / "placements.json"
        settings = {"keep": c.keep, "max_candidates": c.max_candidates, "beam_width": c.beam_width,
                    "score_tokens": c.score_tokens, "probes": ["copy_recall"]}
        if path.is_file():
            report = json.loads(path.read_text())
            if report.get("settings") == settings:
                self.echo(f"== placements: scored before, kept ({path})")
                return report
        student = load_pretrained(self.out / "supernet" / "model")
        teacher = load_pretrained(c.source)
        seq_len = int(json.loads((self.out / "supernet" / "summary.json").read_text())["seq_len"])
        batches = self.held_out_batches(seq_len)
        positions = attention_positions(teacher.arch)
        scores = self.scored_before(settings)
        if scores:
            self.echo(f"   {len(scores)} placement(s) scored before the last run stopped, kept")
        with torch.no_grad():  # the same for every placement: computed once
            teacher_logits = [teacher(batch[:, :-1]).logits for batch in batches]

        def score(kept: tuple[int, ...]) -> float:
            if kept not in scores:
                result = score_placement(student, teacher, batches, kept, teacher_logits)
                result["copy_recall"] = copy_recall(lambda ids: placement_forward(student, teacher, ids, kept), batches)
                scores[kept] = result
                self.save_scores(settings, scores)
                self.echo(f"   kept {list(kept)}: val_loss {scores[kept]['val_loss']:.4f}, "
                          f"KL {scores[kept]['val_kl']:.4f}, copy recall {scores[kept]['copy_recall']:.3f} "
                          f"({len(scores)} scored)")
            return scores[kept]["val_loss"]

        candidates = candidate_placements(positions, c.keep, c.max_candidates)
        method = "exhaustive" if candidates is not None else f"beam search (width {c.beam_width})"
        self.echo(f"== placements: {math.comb(len(positions), c.keep)} possible, {method}")
        if candidates is not None:
            for kept in candidates:
                score(kept)
        else:
            beam_search(positions, c.keep, score, c.beam_width)
        uniform = uniform_placement(positions, c.keep)
        score(uniform)
        ranked = sorted((p for p in scores if len(p) == c.keep), key=lambda p: (scores[p]["val_loss"], p))
        rows = []
        for rank, kept in enumerate(ranked, 1):
            pattern = placement_pattern(student.arch.pattern, teacher.arch, kept)
            rows.append({"rank": rank, "kept": list(kept), "pattern": pattern, "compact": compact_pattern(pattern),
                         **scores[kept], "uniform": kept == uniform})
        report = {"settings": settings, "method": method, "teacher": c.source, "supernet_pattern": c.pattern,
                  "attention_positions": positions, "scored_tokens": sum(b[:, 1:].numel() for b in batches),
                  "teacher_copy_recall": copy_recall(lambda ids: teacher(ids).logits, batches),
                  "placements": rows}
        self.write(report)
        return report

    def scored_before(self, settings: dict[str, Any]) -> dict[tuple[int, ...], dict[str, float]]:
        """Placements a killed run scored under the same settings (none if the settings changed)."""
        import json

        path = self.out / "placement-scores.json"
        if not path.is_file():
            return {}
        saved = json.loads(path.read_text())
        if saved.get("settings") != settings:
            return {}
        return {tuple(row["kept"]): row["scores"] for row in saved["scores"]}

    def save_scores(self, settings: dict[str, Any], scores: dict[tuple[int, ...], dict[str, float]]) -> None:
        atomic_write_json(self.out / "placement-scores.json", {
            "settings": settings, "scores": [{"kept": list(kept), "scores": row} for kept, row in scores.items()]})

    def best_init(self, kept: tuple[int, ...], out: Path | None = None) -> Path:
        """The supernet's replacement layers with the teacher's attention (and its norm) at ``kept``, written as a
        model directory (default ``<out>/best-init``)."""
        from composer.data.tokenizer import load_tokenizer_for
        from composer.hybridize.supernet import placement_pattern
        from composer.interop.model_dir import export_weights, load_pretrained

        student = load_pretrained(self.out / "supernet" / "model")
        teacher = load_pretrained(self.config.source)
        state = student.state_dict()
        for i in kept:
            prefix = f"layers.{i}."
            state = {n: t for n, t in state.items() if not n.startswith(prefix)}
            state.update({n: t for n, t in teacher.state_dict().items() if n.startswith(prefix)})
        arch = student.arch.replace(pattern=placement_pattern(student.arch.pattern, teacher.arch, kept))
        out = out or self.out / "best-init"
        export_weights(state, arch, out, tokenizer=load_tokenizer_for(self.config.source))
        return out

    # -- reports ------------------------------------------------------------------------------------------------
    def write(self, report: dict[str, Any]) -> None:
        columns = ["rank", "compact", "kept", "val_loss", "val_kl", "copy_recall", "uniform", "pattern"]
        write_outputs(self.out, "placements", report, rows=(report["placements"], columns),
                     table=format_placements(report), plot=plot_placements)


def format_placements(report: dict[str, Any]) -> str:
    rows = report["placements"]
    lines = [f"# Where attention stays: {len(rows)} placements of {report['settings']['keep']} kept attention "
             f"layers ({report['method']})", "",
             f"Teacher `{report['teacher']}`, supernet `{report['supernet_pattern']}`; each placement scored on "
             f"{report['scored_tokens']:,} held-out tokens without retraining. Copy recall: the share of a random "
             "span written at the start of each sequence that the placement copies at its end (the teacher: "
             f"{report.get('teacher_copy_recall', float('nan')):.3f}).", "",
             "| rank | kept layers | pattern | val loss | KL to teacher | copy recall | |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['rank']} | {', '.join(map(str, row['kept']))} | `{row['compact']}` | "
                     f"{row['val_loss']:.4f} | {row['val_kl']:.4f} | {row.get('copy_recall', float('nan')):.3f} | "
                     f"{'uniform' if row['uniform'] else ''} |")
    if "distilled" in report:
        d = report["distilled"]
        lines += ["", f"Best placement distilled: val loss {d['val_loss']:.4f}"
                      + (f", KL {d['val_kl']:.4f}" if d.get("val_kl") is not None else "") + f" ({d['summary']})."]
    return "\n".join(lines)


def plot_placements(report: dict[str, Any], path: Path, top: int = 30) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["placements"][:top]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.3 * len(rows) + 2), 3.8))
    colors = ["tab:orange" if row["uniform"] else "tab:blue" for row in rows]
    ax.bar(range(len(rows)), [row["val_loss"] for row in rows], color=colors)
    ax.set_xticks(range(len(rows)), [",".join(map(str, row["kept"])) for row in rows], rotation=90, fontsize=7)
    low = min(row["val_loss"] for row in rows)
    high = max(row["val_loss"] for row in rows)
    ax.set_ylim(low - 0.1 * (high - low + 1e-3), high + 0.1 * (high - low + 1e-3))
    ax.set_xlabel("kept attention layers (orange: uniform placement)")
    ax.set_ylabel("held-out loss (supernet, no retraining)")
    ax.set_title(f"Placements of {report['settings']['keep']} attention layers, best first", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["PlacementSearch", "PlacementSearchConfig", "format_placements"]
