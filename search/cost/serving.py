"""What a candidate costs to serve, on the model that is trained: the pattern grown to the target, not its 6 layers.

Why: a deployer choosing a layout pays for its inference cache at the lengths it serves, and that cache belongs
to the model that will be pretrained. The 6-layer pattern at the target's widths understated it (``AMAMAM`` at
demo-4m: 768 bytes per token for the 6 layers, 2,304 for the 18-layer stack that is trained), and training
tokens/s at 128 tokens says nothing about decoding. So every trial records, for its model at the target
(``search.growth.Grown``):

* ``params`` / ``non_embedding_params``, ``kv_bytes_per_token`` (full attention's cache per token of context),
  ``state_bytes`` (fixed state: Mamba-2, Gated DeltaNet) and ``cache_bytes`` per sequence at ``COST_LENGTHS``
  (4K and 32K tokens: KV, sliding windows and fixed states together, bf16; ``composer.accounting``). Analytic,
  so ``--max-kv BYTES@LENGTH`` filters a candidate before it trains;
* for the finalists and known layouts of the final ranking, what they cost measured on the machine the search
  runs on: training and prefill tokens/s, decode ms per token at batch 1 and 64, peak memory
  (``search.cost.measured``; searches written before it carry ``cost["decode"]``, decode tokens/s at batch 1
  after 1,024 tokens, which ``composer report`` still prints).

``--max-kv`` with ``--min-recall`` can ask for the impossible: a pattern stacked to the target repeats its
attention layers with it (at demo-4m every ``AMSD`` pattern with one ``A`` in 6 holds 2 or more, 16 MiB at 32K),
so a limit near a published family's cache (Nemotron-H keeps 1 attention layer of 23: 8.4 MiB) leaves only
fixed-state patterns, which the recall probe has never seen recall (0.008-0.015 at 1,024 tokens, docs/recall.md).
``recall_under_max_kv`` finds that out in seconds, before a search spends hours to answer with a known layout.
"""

from __future__ import annotations

import math
import re
from typing import Any

from composer.accounting import format_bytes
from composer.errors import ConfigError
from scaling.extrapolate import OffTarget
from search.growth import Growth

COST_LENGTHS = (4_096, 32_768)  # the serving lengths every trial's cache is reported at
# --max-kv's units, read in any case: a size in bytes takes B, KB/MB/GB (powers of 1,000, as disks count) or
# KiB/MiB/GiB (powers of 1,024, as the reports print caches); a bare K, M or G is refused in a size, where it could
# mean either. A length in tokens takes K and M as powers of 1,024 (32K is 32,768 tokens, as model cards write it).
SIZE_UNITS = {"": 1, "B": 1, "KB": 1_000, "KIB": 1_024, "MB": 1_000_000, "MIB": 1_024**2, "GB": 1_000_000_000,
              "GIB": 1_024**3}
LENGTH_UNITS = {"": 1, "K": 1_024, "M": 1_024**2}
UNITS_SAID = ("sizes take B, KB/MB/GB (10^3/10^6/10^9 bytes) or KiB/MiB/GiB (2^10/2^20/2^30), lengths K (1,024 "
              "tokens) or M, in any case, e.g. 64MiB@32K")
_AMOUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*$")


def _amount(text: str, what: str, unit_words: dict[str, int]) -> int:
    match = _AMOUNT.match(text)
    unit = match.group(2).upper() if match else None
    if match is None or unit not in unit_words:
        raise ConfigError(f"--max-kv: {what} {text.strip()!r} is not a number with a unit: {UNITS_SAID}")
    return int(float(match.group(1)) * unit_words[unit])


def parse_max_kv(text: str) -> tuple[int, int]:
    """``"64MiB@32K"`` -> ``(67108864, 32768)``: the most cache bytes per sequence allowed at a length in tokens.

    Units as ``SIZE_UNITS`` and ``LENGTH_UNITS`` say, in any case: ``10MB`` is 10,000,000 bytes, ``10mib``
    10,485,760."""
    size, at, length = str(text).partition("@")
    if not at:
        raise ConfigError(f"--max-kv takes BYTES@LENGTH, such as 64MiB@32K (the cache of one sequence of 32,768 "
                          f"tokens); got {text!r}")
    limit = _amount(size, "the size", SIZE_UNITS)
    tokens = _amount(length, "the length", LENGTH_UNITS)
    if limit <= 0 or tokens <= 0:
        raise ConfigError(f"--max-kv: size and length must be positive, got {text!r}")
    return limit, tokens


def serving_cost(arch, lengths: tuple[int, ...] = COST_LENGTHS) -> dict[str, Any]:
    """The analytic serving cost of ``arch`` (a pattern at the target's widths): see the module docstring."""
    from composer.accounting import analyze

    stats = analyze(arch)
    return {"pattern": arch.pattern, "n_layers": arch.n_layers, "params": stats.params,
            "non_embedding_params": stats.non_embedding_params,
            "kv_bytes_per_token": stats.kv_cache_bytes_per_token, "state_bytes": stats.state_bytes_per_sequence,
            "cache_bytes": {str(n): analyze(arch, seq_len=n).cache_bytes_per_sequence for n in lengths}}


def over_max_kv(arch, max_kv: tuple[int, int]) -> str | None:
    """Why ``arch`` (the model at the target) breaks ``--max-kv``: its cache per sequence at the length is over the
    limit; or None. Short, in the units the reports use, so that a progress line shows it whole (issue 47: cut at
    "holds 12,582,912", it never said the limit it was over)."""
    from composer.accounting import analyze

    limit, length = max_kv
    cache = analyze(arch, seq_len=length).cache_bytes_per_sequence
    if cache <= limit:
        return None
    held, most = format_bytes(cache), format_bytes(limit)
    if held == most:  # over by less than the rounding: the bytes say it
        held, most = f"{cache:,} B", f"{limit:,} B"
    return f"cache@{tokens_text(length)} at target {held} > --max-kv {most}"


def tokens_text(length: int) -> str:
    """``32768`` -> ``"32K"`` (the reports' cache@32K), a length that is no whole number of K as it is."""
    return f"{length // 1_024}K" if length % 1_024 == 0 else f"{length:,}"


def keeps_every_token(arch, length: int) -> bool:
    """Whether a layer of ``arch`` keeps all of the last ``length`` tokens (full attention, or a window at least
    that long): what recall at ``length`` tokens needs, where a fixed state must compress them."""
    from composer.accounting import analyze

    return _keeps_every_token(analyze(arch, seq_len=length), length)


def _keeps_every_token(stats, length: int) -> bool:
    """:func:`keeps_every_token` read from an accounting at any length (a layer's per-token cache and window do
    not depend on it)."""
    return any(entry["kv_bytes_per_token"] > 0 and (entry["window"] is None or entry["window"] >= length)
               for entry in stats.per_primitive.values())


MAX_PATTERNS_CHECKED = 20_000  # past this the check would take longer than it saves; it is skipped


def recall_under_max_kv(patterns: list[str], target: str, max_kv: tuple[int, int], length: int,
                        growth: Growth = Growth()) -> dict | None:
    """Of ``patterns`` (a search space's), how many fit ``max_kv`` on their model at ``target`` (grown by the
    search's ``growth``), how many of
    those keep every token of ``length`` (:func:`keeps_every_token`), and the least cache a pattern that keeps
    them holds at the limit's length (None when none does). None when there are too many patterns to check."""
    from composer.accounting import analyze

    if len(patterns) > MAX_PATTERNS_CHECKED:
        return None
    limit, at = max_kv
    fit = keeping = 0
    cheapest = None
    for pattern in patterns:
        try:
            stats = analyze(growth.grow(pattern, target).arch, seq_len=at)
        except OffTarget:  # not within the growth's tolerance: skipped by the search, whatever its cache
            continue
        cache, keeps = stats.cache_bytes_per_sequence, _keeps_every_token(stats, length)
        fit += cache <= limit
        keeping += cache <= limit and keeps
        if keeps and (cheapest is None or cache < cheapest[1]):
            cheapest = (pattern, cache)
    return {"patterns": len(patterns), "fit": fit, "fit_and_keep": keeping, "cheapest_keeping": cheapest}


def first_within(patterns: list[str], widths: str, target: str, max_params: int | None,
                 max_kv: tuple[int, int] | None, growth: Growth = Growth()) -> dict | None:
    """The first of ``patterns`` (a space's, within its shares) with at most ``max_params`` non-embedding
    parameters at ``widths`` and at most ``max_kv`` on its model at ``target`` (grown by the search's ``growth``),
    as ``{"fits": pattern}``; where none is, ``fits`` None with the smallest pattern (its
    parameters) and the least cache of a pattern within ``max_params``. None when there are too many patterns to
    check in seconds. What refuses a search whose limits admit no pattern before it trains (issue 47:
    --max-params -5 skipped every candidate it proposed, without end)."""
    from composer.accounting import analyze
    from composer.presets import get_preset

    if len(patterns) > MAX_PATTERNS_CHECKED:
        return None
    at_widths = get_preset(widths).arch
    smallest = least = None  # (params, pattern) of all; (cache, pattern) of those within max_params
    for pattern in patterns:
        params = analyze(at_widths.with_pattern(pattern)).non_embedding_params
        smallest = min(smallest or (params, pattern), (params, pattern))
        if max_params is not None and params > max_params:
            continue
        if max_kv is None:
            return {"fits": pattern}
        try:
            grown = growth.grow(pattern, target).arch
        except OffTarget:  # not within the growth's tolerance: skipped by the search, whatever its cache
            continue
        cache = analyze(grown, seq_len=max_kv[1]).cache_bytes_per_sequence
        if cache <= max_kv[0]:
            return {"fits": pattern}
        least = min(least or (cache, pattern), (cache, pattern))
    return {"fits": None, "patterns": len(patterns), "smallest": smallest, "least_cache": least}


def max_kv_holding(cache: int, max_kv: str) -> str:
    """The ``--max-kv`` that admits ``cache`` bytes at ``max_kv``'s length: MiB rounded up to a tenth, so that it
    then fits (``16MiB@32K``)."""
    return f"{math.ceil(cache / 2**20 * 10) / 10:g}MiB@{max_kv.partition('@')[2]}"


__all__ = ["COST_LENGTHS", "MAX_PATTERNS_CHECKED", "first_within", "keeps_every_token",
           "max_kv_holding", "over_max_kv", "parse_max_kv", "recall_under_max_kv", "serving_cost"]
