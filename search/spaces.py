"""The search spaces ``--space`` names, one module each (as Optuna has one module per sampler).

``layers`` (default, ``search.space``): one primitive per layer at ``--layers`` layers, the Composer paper's space.
``mixers`` (``search.mixer_space``): Nemotron-Flash's, mixer slots each followed by 0, 1 or 2 FFNs, the number of
slots searched between half of ``--layers`` and ``--layers``. :func:`build_space` is the one place a stage's space
is made from the settings, so the config's up-front check, the strategies, the plan and the ETA build the same one.
"""

from __future__ import annotations

from typing import Union

from composer.errors import ConfigError
from search.mixer_space import MixerSpace
from search.space import SearchSpace

SPACES = ("layers", "mixers")
Space = Union[SearchSpace, MixerSpace]  # what a stage searches: suggest, pattern_of, params_of, violation, size, ...


def build_space(kind: str, n_layers: int, primitives: str, min_share: dict[str, float] | None = None,
                max_share: dict[str, float] | None = None, max_params: int | None = None, head: str = "",
                tail: str = "", conditional: bool = False) -> Space:
    """The ``kind`` space over ``primitives``: ``n_layers`` searched layers between a frozen ``head`` and ``tail``
    (layers), or at most ``n_layers`` mixer slots (mixers; ``conditional``: only the active slots' parameters, for
    brute force)."""
    shares = dict(min_share or {}), dict(max_share or {})
    if kind == "layers":
        return SearchSpace(n_layers, primitives, *shares, max_params, head, tail)
    if kind == "mixers":
        if head or tail:
            raise ConfigError("--space mixers searches whole stacks, not layers around a frozen pattern: use "
                              "--strategy successive-halving or one-shot, or --space layers")
        return MixerSpace(n_layers, primitives, *shares, max_params, conditional=conditional)
    raise ConfigError(f"--space must be one of {', '.join(SPACES)}, got {kind!r}")
