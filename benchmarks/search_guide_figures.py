"""The figures docs/search.md states about the verdict's seed spread and the cache the search costs, recomputed:
rung-cpu-2's pooled seed sd (``LMBudget.seed_noise``) from the 3-seed runs it was measured on, the interval it
gives two single runs, the paired estimate beside it, and the KV cache per token of a 6-layer pattern against
the model it grows to at ``demo-4m``. No training: a few JSON values and the analytic accounting.

    python benchmarks/search_guide_figures.py > benchmarks/results/search_guide_figures-2026-11-29.json
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from scipy import stats

from composer import analyze, get_preset
from search.growth import grow
from search.lm import get_lm_budget

SOURCE = "benchmarks/results/curve_out_of_sample-2026-11-27.json"


def main() -> None:
    runs = json.loads(Path(SOURCE).read_text())["wsd_cosine_seeds"]["patterns"]
    wsd = {p: [runs[p]["wsd"][s] for s in ("0", "1", "2")] for p in ("AMAMAM", "MMAMMM")}
    pooled = math.sqrt(statistics.mean(statistics.variance(v) for v in wsd.values()))
    df = sum(len(v) - 1 for v in wsd.values())
    differences = [b - a for a, b in zip(wsd["AMAMAM"], wsd["MMAMMM"], strict=True)]
    paired = statistics.stdev(differences)
    grown = grow("AMAMAM", "demo-4m")
    layout, how, arch = grown.layout, grown.how, get_preset(grown.widths).arch
    print(json.dumps({
        "rung_cpu_2_seed_noise": {
            "source": f"{SOURCE} wsd_cosine_seeds (wsd, lr 1e-3, demo-4m, 500K tokens, seeds 0-2)",
            "wsd_losses": wsd, "pooled_sd": pooled, "df": df,
            "seed_noise_in_code": get_lm_budget("rung-cpu-2").seed_noise.sd,
            "two_single_runs_halfwidth": stats.t.ppf(0.975, df) * pooled * math.sqrt(2),
            "paired_differences_MMAMMM_minus_AMAMAM": differences, "paired_sd": paired,
            "paired_single_run_halfwidth": stats.t.ppf(0.975, len(differences) - 1) * paired},
        "kv_cache_AMAMAM_at_demo_4m": {
            "pattern_bytes_per_token": analyze(arch.with_pattern("AMAMAM")).kv_cache_bytes_per_token,
            "model_at_target": layout, "how": how,
            "model_at_target_bytes_per_token": analyze(arch.with_pattern(layout)).kv_cache_bytes_per_token},
    }, indent=1))


if __name__ == "__main__":
    main()
