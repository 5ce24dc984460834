"""Statistics of per-seed results: intervals, paired differences and rank agreement with the noise shown.

The users of these functions are ML researchers comparing architectures that were each trained over a few
seeds. Seed-to-seed variation in a final loss is often as large as the difference between two architectures,
so a single number (a mean, a point correlation) can say "A beats B" when the noise could just as well
explain it. Every function here therefore returns the estimate *together with* how far the seeds let us
trust it, and a difference the noise can explain is reported as such, in words, rather than left for the
reader to infer from a decimal.

The package is deliberately small and pure: numpy and ``scipy.stats`` only, no torch and no imports from the
rest of the project, so it can be used on result files anywhere (a notebook, a report script, CI). Every
returned dict holds plain Python ``int``/``float``/``str``/``list`` values (no numpy types) with NaN turned
into ``None``, so it goes straight into ``json.dumps``.

One module a job: ``intervals`` (one architecture's figure over seeds, proportions), ``differences`` (two
architectures, paired seed by seed, and the verdict in words), ``ranks`` (rank agreement, the noise ceiling,
whether a budget separates architectures at all); ``_numbers`` holds what they share.
"""

from composer.statistics.differences import (
    VERDICT_HIGHER,
    VERDICT_LOWER,
    VERDICT_NO_COMMON_SEEDS,
    VERDICT_SINGLE_SEED,
    VERDICT_WITHIN_NOISE,
    difference_of_means,
    paired_difference,
)
from composer.statistics.intervals import (
    cluster_spread,
    clustered_proportion_interval,
    format_interval,
    proportion_interval,
    seed_summary,
)
from composer.statistics.ranks import (
    POWER_THRESHOLD,
    UNDERPOWERED,
    bootstrap_rank_correlation,
    compare_rank_correlations,
    kendall,
    noise_ceiling,
    seed_separation,
    selection_optimism,
    spearman,
)

__all__ = [
    "POWER_THRESHOLD",
    "UNDERPOWERED",
    "VERDICT_HIGHER",
    "VERDICT_LOWER",
    "VERDICT_NO_COMMON_SEEDS",
    "VERDICT_SINGLE_SEED",
    "VERDICT_WITHIN_NOISE",
    "bootstrap_rank_correlation",
    "cluster_spread",
    "clustered_proportion_interval",
    "compare_rank_correlations",
    "difference_of_means",
    "format_interval",
    "kendall",
    "noise_ceiling",
    "paired_difference",
    "proportion_interval",
    "seed_separation",
    "seed_summary",
    "selection_optimism",
    "spearman",
]
