"""The flags that grow a model to equal cost, shared by every command that grows one (``extrapolate``, ``train``,
``info``; ``search`` has them among its own): ``--equal-cost FAMILY``, ``--deployed-at PRESET``, ``--cost-device``
and ``--equal-cost-figure`` (``scaling.equal_cost``).

Why one place: the search grows each candidate by these four words, and ``train --from-search`` and ``extrapolate
--from-search`` must build the model it scored from the same words (issue 68), so the flags, their help and how a
search's own settings fill them in are written once.
"""

from __future__ import annotations

import argparse
from typing import Any

from composer.errors import ConfigError

EQUAL_COST_HELP = (
    "FAMILY (e.g. nemotron-h): grow to equal cost, not equal size: the layout the growth rule gives, at the widest "
    "d_model whose cost on --cost-device (cost model) is no more than FAMILY's own layout's at --deployed-at "
    "(default: the search's with --from-search)")
DEPLOYED_HELP = ("with --equal-cost: the preset the model will be deployed at, where its cost is taken (default: the "
                 "target); a larger one is scaled down to the target as FAMILY's own layout is")
FIGURE_HELP = ("with --equal-cost: the cost held equal: both (default; the binding one wins), decode (ms per token at "
               "batch 1 after 4,096 tokens) or train (training tokens/s)")
DEVICE_HELP = "with --equal-cost: the device the cost model predicts for: cpu (default), h100, h200"
FIELDS = ("equal_cost", "deployed_at", "cost_device", "equal_cost_figure")


def add_equal_cost_flags(parser: argparse.ArgumentParser, cost_device: bool = True) -> None:
    """``--equal-cost``, ``--deployed-at``, ``--equal-cost-figure`` and (where the command has no ``--cost-device`` of
    its own) ``--cost-device``."""
    parser.add_argument("--equal-cost", dest="equal_cost", metavar="FAMILY", default=None, help=EQUAL_COST_HELP)
    parser.add_argument("--deployed-at", dest="deployed_at", metavar="PRESET", default=None, help=DEPLOYED_HELP)
    parser.add_argument("--equal-cost-figure", dest="equal_cost_figure", choices=("both", "decode", "train"),
                        default=None, help=FIGURE_HELP)
    if cost_device:
        parser.add_argument("--cost-device", dest="cost_device", metavar="DEVICE", default=None, help=DEVICE_HELP)


def equal_cost_of(args: argparse.Namespace, answer: dict[str, Any] | None = None, *, own_device: bool = True):
    """The ``scaling.equal_cost.EqualCost`` the flags give, or, where ``answer`` (a search's,
    ``search.results.answer_of``) grew to equal cost, the search's own with any flag given overriding its part of
    it; None for growth to equal size. ``own_device``: the command's ``--cost-device`` serves only ``--equal-cost``
    (``extrapolate``, ``train``), so giving it alone is a usage error; ``info``'s also costs its serving table."""
    from scaling.equal_cost import EqualCost

    searched = (answer or {}).get("equal_cost_rule") or {}
    values = {name: getattr(args, name, None) for name in FIELDS}
    values = {name: value if value is not None else searched.get(name) for name, value in values.items()}
    if values["equal_cost"] is None and own_device and getattr(args, "cost_device", None) is not None:
        raise ConfigError("--cost-device says where --equal-cost is costed: give --equal-cost FAMILY (e.g. "
                          "--equal-cost nemotron-h), or drop it")
    return EqualCost.of(values["equal_cost"], values["deployed_at"], values["cost_device"],
                        values["equal_cost_figure"])


def cost_rows(grown) -> list[tuple[str, str]]:
    """What a command prints of a model grown to equal cost: the reference and its budget, this model's figures
    against it, the binding one, and where a deployed shape was scaled down."""
    from scaling.equal_cost import FIGURE_NAMES, EqualCost, assumed_constants, reference_model

    record = grown.cost
    if record is None:
        return []
    ratios = ", ".join(f"{FIGURE_NAMES[figure]} {record['costs'][figure] / record['budget'][figure]:.3f}x"
                       for figure in record["figures"])
    rows = [("equal cost", f"{record['reference']}'s own layout at {record['deployed']} on {record['device']} (cost "
                           f"model): {ratios}; binding: {record['binding']}")]
    if record["deployed_pattern"] != grown.layout or record["deployed_d_model"] != grown.arch.d_model:
        rows.append(("deployed shape", f"{len(record['deployed_pattern'])} layers at d_model "
                                       f"{record['deployed_d_model']} ({record['deployed']})"))
    rule = EqualCost(record["reference"], record["deployed"], record["device"], tuple(record["figures"]))
    assumed = assumed_constants(rule, reference_model(rule.reference, record["deployed"]))
    if assumed:
        rows.append(("assumed", f"the {record['device']} figures rest on assumed constants: {', '.join(assumed)}"))
    return rows
