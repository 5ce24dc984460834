"""Scaling a searched pattern up to a target model: extrapolation, matched baselines, training rules.

* :mod:`scaling.extrapolate`: stacking and stretching (docs/method.md, "Extrapolation").
* :mod:`scaling.matching`: Llama, Sandwich, striped and random baselines matched to a composite.
* :mod:`scaling.rules`: token budgets and learning rate / batch by scale, each with its source.
"""

from scaling.extrapolate import Extrapolation, extrapolate
from scaling.matching import matched_baselines
from scaling.rules import hyperparameters, token_budget

__all__ = ["Extrapolation", "extrapolate", "hyperparameters", "matched_baselines", "token_budget"]
