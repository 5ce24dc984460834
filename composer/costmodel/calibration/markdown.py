"""The Markdown tables ``validate`` and ``loo`` print: each model or case measured beside its prediction, and the
errors by layout class (the reports paste them).
"""

from __future__ import annotations


def validation_table(rows: list[dict], summary: dict) -> str:
    lines = ["| class | widths | pattern | layers | train tok/s | predicted | error | prefill tok/s | predicted | "
             "error | decode ms/token | predicted | error |", "|---|---|---|---:|" + "---:|" * 9]
    for r in rows:
        e = r["error"]
        lines.append(f"| {r['layout_class']} | {r['preset']} | `{r['compact']}` | {r['n_layers']} | "
                     f"{r['train_tokens_per_s']:,.0f} | {r['train_tokens_per_s_predicted']:,.0f} | "
                     f"{e['train_tokens_per_s']:+.0%} | {r['prefill_tokens_per_s']:,.0f} | "
                     f"{r['prefill_tokens_per_s_predicted']:,.0f} | {e['prefill_tokens_per_s']:+.0%} | "
                     f"{r['decode_ms_per_token']:.2f} | {r['decode_ms_per_token_predicted']:.2f} | "
                     f"{e['decode_ms_per_token']:+.0%} |")
    lines += ["", "| class | measure | n | median abs error | worst |", "|---|---|---:|---:|---:|"]
    for name, measures in summary.items():
        for measure, s in measures.items():
            if s.get("n"):
                lines.append(f"| {name} | {measure} | {s['n']} | {s['median_abs']:.1%} | {s['worst_abs']:.1%} |")
    return "\n".join(lines)


def loo_table(report: dict) -> str:
    names = list(report["groupings"])
    lines = ["| held out with | configuration | class | repeats | measured tok/s | "
             + " | ".join(f"{n}: predicted (error)" for n in names) + " |",
             "|---|---|---|---:|---:|" + "---:|" * len(names)]
    for i, case in enumerate(report["cases"]):
        cells = []
        for n in names:
            p = report["groupings"][n]["predictions"][i]
            cells.append(f"{p['predicted_tokens_per_s']:,.0f} ({p['error']:+.0%})" if "error" in p else "-")
        lines.append(f"| {case['group']} | {case['device']} {case['pattern']}{' S ' + case['S'] if 'S' in case else ''}"
                     f" | {case['layout_class']} | {len(case['repeats'])} | {case['tokens_per_s']:,.0f} | "
                     + " | ".join(cells) + " |")
    for n in names:
        g = report["groupings"][n]
        s = g["errors"]
        by_class = "; ".join(f"{c} median {v['median_abs']:.1%}, worst {v['worst_abs']:.1%} over {v['n']}"
                             for c, v in g["errors_by_class"].items() if v.get("n"))
        lines.append(f"\n{n} ({g['constants_fitted']} constants): median |error| {s['median_abs']:.1%}, worst "
                     f"{s['worst_abs']:.1%} over {s['n']} configurations ({by_class}); efficiencies fitted to all: "
                     + ", ".join(f"{k} {v:.3f}" for k, v in g["efficiency_all_cases"].items()))
    return "\n".join(lines)
