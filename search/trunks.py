"""Where a search keeps its candidates' trunks, so a later rung continues them instead of training from scratch.

A trunk (``composer.training.continuation``) is a candidate's run at its peak rate up to the start of its cooldown,
saved as a Lightning checkpoint. A rung whose budget ``keeps_trunk`` stores the trunk of the rate it chose; a rung
whose budget ``continues`` finds it here and trains only the tokens it adds. The store lives in the search's
``--out`` (``trunks/``), so a resumed search continues what an earlier invocation kept, and it is keyed by
everything that makes two runs the same run except their budget (``LanguageModelEvaluator.trunk_key``).

Layout: ``trunks/<digest of the key without the rate>/lr-<rate>/step-<N>.ckpt``, with the key beside it in
``key.json``. Each checkpoint is written to a temporary name and renamed, so a killed search never leaves a
half-written trunk that a resumed one would continue. A run's trunk trains under
``trunks/<digest>/running/lr-<rate>-to-<step>/`` with a checkpoint every eighth of it, so a search killed during a
candidate continues that run from its last checkpoint; the folder goes once the candidate has scored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any


def _digest(key: dict[str, Any]) -> str:
    without_rate = {name: value for name, value in key.items() if name != "lr"}
    return hashlib.sha1(json.dumps(without_rate, sort_keys=True, default=str).encode()).hexdigest()[:16]


class TrunkStore:
    """Trunks under ``root``; with ``root`` None a store that keeps nothing (an evaluator outside a search)."""

    def __init__(self, root: str | Path | None) -> None:
        self.root = Path(root) if root is not None else None

    def _folder(self, key: dict[str, Any]) -> Path | None:
        return None if self.root is None else self.root / _digest(key)

    def rates(self, key: dict[str, Any]) -> list[float]:
        """The rates with a kept trunk for ``key`` (its ``lr`` ignored), lowest first."""
        folder = self._folder(key)
        if folder is None or not folder.is_dir():
            return []
        from composer.training.checkpoint import list_checkpoints  # here: Lightning costs every composer command
        # seconds at start-up, and the CLI's parsers import the ladders (search.fidelity -> search.lm -> here)

        return sorted(float(path.name[3:]) for path in folder.glob("lr-*") if list_checkpoints(path))

    def find(self, key: dict[str, Any], max_step: int | None = None) -> Path | None:
        """The longest kept trunk for ``key`` at this rate, no longer than ``max_step`` steps."""
        folder = self._folder(key)
        if folder is None:
            return None
        from composer.training.checkpoint import list_checkpoints
        from composer.training.continuation import checkpoint_step

        trunks = [path for path in list_checkpoints(folder / f"lr-{key['lr']:g}")
                  if max_step is None or checkpoint_step(path) <= max_step]
        return max(trunks, key=checkpoint_step, default=None)

    def running(self, key: dict[str, Any], stable: int) -> Path | None:
        """Where ``key``'s run at this rate trains its trunk to step ``stable``, so that a search killed during it
        continues from the trunk's last checkpoint (``composer.training.continuation.train_continued``); None
        without a root. Not a kept trunk: :meth:`rates` and :meth:`find` do not see it, and the candidate's
        evaluation removes it once it has scored (:meth:`discard_running`)."""
        folder = self._folder(key)
        return None if folder is None else folder / "running" / f"lr-{key['lr']:g}-to-{stable}"

    @staticmethod
    def discard_running(directories: list[Path]) -> None:
        """Remove the trunks :meth:`running` gave, once what they trained is kept or no longer needed."""
        for directory in directories:
            shutil.rmtree(directory, ignore_errors=True)
            with contextlib.suppress(OSError):
                directory.parent.rmdir()  # the key's "running" folder, once empty

    def keep(self, key: dict[str, Any], checkpoint: str | Path) -> Path | None:
        """A copy of ``checkpoint`` as ``key``'s trunk at this rate (written whole, then renamed into place)."""
        folder = self._folder(key)
        if folder is None:
            return None
        target = folder / f"lr-{key['lr']:g}" / Path(checkpoint).name
        target.parent.mkdir(parents=True, exist_ok=True)
        (folder / "key.json").write_text(json.dumps({k: v for k, v in key.items() if k != "lr"}, indent=2,
                                                    default=str))
        partial = target.with_name(target.name + ".partial")
        shutil.copy2(checkpoint, partial)
        os.replace(partial, target)
        return target
