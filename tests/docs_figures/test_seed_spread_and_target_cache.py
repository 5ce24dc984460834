"""docs/reports/seed-spread-and-target-cache-2026-11-29.md: the seed spread recomputed from the 3-seed runs
it cites, and the cache figures the accounting gives.
"""

from __future__ import annotations

import math

from tests.docs_figures.reading import (
    NUM,
    agree,
    agree_all,
    doc,
    find,
    numbers,
    plain,
    reproduced,
    results,
    table,
)


def test_the_seed_spread_and_the_cache_at_the_target():
    """The report's seed spread recomputed from the 3-seed runs it cites, equal to the one rung-cpu-2 carries, and
    the cache figures the accounting gives."""
    import statistics

    from scipy import stats

    from composer import analyze, get_preset
    from search.growth import grow
    from search.lm import get_lm_budget

    text = doc("reports/seed-spread-and-target-cache-2026-11-29.md")
    data = results("search_guide_figures-2026-11-29.json")
    runs = results("curve_out_of_sample-2026-11-27.json")["wsd_cosine_seeds"]["patterns"]
    wsd = {p: [runs[p]["wsd"][s] for s in ("0", "1", "2")] for p in ("AMAMAM", "MMAMMM")}
    assert wsd == data["rung_cpu_2_seed_noise"]["wsd_losses"]
    for cells in table(text, "| pattern | seed 0 |"):
        agree_all(numbers(" ".join(cells[1:])), wsd[plain(cells[0])], f"{cells[0]} losses")
    pooled = math.sqrt(statistics.mean(statistics.variance(v) for v in wsd.values()))
    reproduced(data["rung_cpu_2_seed_noise"]["pooled_sd"], pooled, "pooled sd")
    agree(find(text, rf"the sd of one run's score is \*\*{NUM}\*\* with 4 degrees")[1], pooled, "pooled sd")
    assert get_lm_budget("rung-cpu-2").seed_noise.sd == round(pooled, 4), "rung-cpu-2's seed_noise"
    agree(find(text, rf"interval of \*\*\+-{NUM}\*\*")[1], stats.t.ppf(0.975, 4) * pooled * math.sqrt(2), "+-")
    differences = [b - a for a, b in zip(wsd["AMAMAM"], wsd["MMAMMM"], strict=True)]
    agree_all(numbers(find(text, r"paired by seed \(([^)]+)\)")[1]), differences, "paired differences")
    paired = statistics.stdev(differences)
    agree(find(text, rf"has sd \*\*{NUM}\*\*")[1], paired, "paired sd")
    agree(find(text, rf"which would give \+-{NUM}")[1], stats.t.ppf(0.975, 2) * paired, "paired +-")
    grown_model = grow("AMAMAM", "demo-4m")
    layout, arch = grown_model.layout, get_preset(grown_model.widths).arch
    grown, fit = (analyze(arch.with_pattern(p)).kv_cache_bytes_per_token for p in (layout, "AMAMAM"))
    assert len(layout) == 18 and grown == data["kv_cache_AMAMAM_at_demo_4m"]["model_at_target_bytes_per_token"]
    find(text, rf"\*\*{grown:,}\*\* bytes per token \(bf16\), against \*\*{fit:,}\*\* for the 6-layer pattern")
