"""docs/reports/cpu-decode-across-machines-2026-12-08.md: each validation model's decode over 6 processes, both
fits' predictions and errors, the class medians, and the two one-process validations' disagreement, against the
JSON benchmarks/decode_noise.py and cost_model.py validate wrote."""

from __future__ import annotations

import statistics

from tests.docs_figures.reading import agree, doc, find, plain, results, section, table

REPORT = "reports/cpu-decode-across-machines-2026-12-08.md"


def test_every_model_and_both_fits_against_the_median_over_processes():
    noise = results("decode_noise-2026-12-08.json")
    (fresh,) = noise["compared_tables"]
    text = section(doc(REPORT), "Refitting on an idle machine does not change the predictions")
    rows = table(text, "| class | widths | pattern |")
    assert len(rows) == len(noise["rows"]) == len(fresh["rows"])
    for cells, row, other in zip(rows, noise["rows"], fresh["rows"], strict=True):
        assert (cells[0], cells[1], plain(cells[2])) == (row["layout_class"], row["preset"], row["compact"])
        agree(cells[3], row["median_ms"], f"{row['compact']} median")
        assert abs(row["median_ms"] - statistics.median(row["process_medians_ms"])) < 1e-9
        agree(cells[4].rstrip("%"), 100 * row["across_processes_spread"], f"{row['compact']} spread")
        agree(cells[5], row["predicted_ms"], f"{row['compact']} committed")
        agree(cells[6].rstrip("%"), 100 * row["error_vs_median"], f"{row['compact']} committed error")
        agree(cells[7], other["predicted_ms"], f"{row['compact']} fresh")
        agree(cells[8].rstrip("%"), 100 * other["error_vs_median"], f"{row['compact']} fresh error")
    medians = {plain(r[0]): r[1:] for r in table(text, "| table | A/M-heavy |")}
    for name, by_class in (("committed fit", noise["error_vs_median_by_class"]),
                           ("fresh fit", fresh["error_vs_median_by_class"])):
        for cell, layout_class in zip(medians[name], ("A/M-heavy", "S/D-heavy"), strict=True):
            agree(cell.rstrip("%"), 100 * by_class[layout_class]["median_abs"], f"{name} {layout_class}")
    assert noise["table_fitted_on"] == "AMD EPYC" and noise["machine"].startswith("AMD EPYC (family 25, model 17)")
    assert fresh["fit_source"] == "fit-cpu-2026-12-08" and noise["table_fit_source"] == "fit-cpu-2026-12-07"
    find(doc(REPORT), rf"median\s+spread over all 12 was {100 * noise['across_processes_spread_median']:.0f}%")


def test_one_process_figures_of_two_validations_disagree():
    committed = results("cost_model_validation_committed_amd-2026-12-08.json")
    fresh = results("cost_model_validation_refit_amd-2026-12-08.json")
    apart = [abs(a["decode_ms_per_token"] / b["decode_ms_per_token"] - 1)
             for a, b in zip(committed["rows"], fresh["rows"], strict=True)]
    text = " ".join(section(doc(REPORT), "One process's decode figure does not repeat").split())
    found = find(text, r"differed by a median of ([\d.]+)%, and at worst by ([\d.]+)%")
    agree(found[1], 100 * statistics.median(apart), "median apart")
    agree(found[2], 100 * max(apart), "worst apart")
    assert fresh["fit_source"]["id"] == "fit-cpu-2026-12-08" and committed["fit_source"]["id"] == "fit-cpu-2026-12-07"
