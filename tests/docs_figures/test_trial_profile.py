"""docs/reports/trial-profile-2026-12-07.md: where a search trial's time goes, against its results JSON."""

from __future__ import annotations

from tests.docs_figures.reading import agree, doc, find, plain, results, table

# the report's rows -> the JSON's rows they are (a row of several: their sum)
DEFAULT_ROWS = {
    "forward: MLP": ["forward: mlp"],
    "forward: attention (rotary included)": ["forward: attention"],
    "forward: head and loss": ["forward: head and loss"],
    "forward: embedding, norms, residuals": ["forward: the rest (embedding, norms, residuals)"],
    "backward, whole model": ["backward (whole model)"],
    "optimizer update (AdamW)": ["optimizer update (AdamW)"],
    "gradient clipping": ["gradient clipping"],
    "Lightning's loop (hooks, self.log, callbacks)": ["lightning's loop (its runs less the rows above)"],
    "data (preparation and batches)": ["data: preparation (outside the loader)", "data: the loader's batches"],
    "model build, checkpoints, the rest": ["model build", "checkpoints and trunks",
                                           "the rest (the evaluator outside Lightning)"],
}
AMSD_ROWS = {
    "forward: MLP (7 layers)": ["forward: mlp"],
    "forward: Gated DeltaNet (7 layers)": ["forward: gated_deltanet"],
    "forward: Mamba-2 (3 layers)": ["forward: mamba2"],
    "forward: attention (1 layer)": ["forward: attention"],
    "forward: head and loss": ["forward: head and loss"],
    "forward: embedding, norms, residuals": ["forward: the rest (embedding, norms, residuals)"],
    "backward, whole model": ["backward (whole model)"],
    "optimizer update (AdamW) and clipping": ["optimizer update (AdamW)", "gradient clipping"],
    "checkpoints and trunks": ["checkpoints and trunks"],
    "Lightning's loop": ["lightning's loop (its runs less the rows above)"],
    "data, model build, the rest": ["data: preparation (outside the loader)", "data: the loader's batches",
                                    "model build", "the rest (the evaluator outside Lightning)"],
}


def check(cells: list[str], run: dict, rows: dict, columns: tuple[int, int]) -> None:
    name = plain(cells[0]).strip("*")
    seconds, share = columns
    if name == "trial":
        agree(cells[seconds].strip("*"), run["trial_wall_s"], "trial")
        assert not cells[share], "a trial's share"
        return
    if name.startswith("of which validation"):
        value = run["overlapping"]["validation (its forward is in the forward rows)"]
    else:
        value = sum(run["seconds"][key] for key in rows[name])
    agree(cells[seconds], value, f"{name} seconds")
    agree(cells[share].rstrip("%"), 100 * value / run["trial_wall_s"], f"{name} share")


def test_where_a_trials_time_goes():
    text = doc("reports/trial-profile-2026-12-07.md")
    runs = list(results("trial_profile-2026-12-07.json")["runs"].values())
    bf16, fp32, amsd = runs
    default = table(text, "| job | bf16")
    assert len(default) == len(DEFAULT_ROWS) + 2
    for cells in default:
        check(cells, bf16, DEFAULT_ROWS, (1, 2))
        check(cells, fp32, DEFAULT_ROWS, (3, 4))
    amsd_table = table(text, "| job | seconds")
    assert len(amsd_table) == len(AMSD_ROWS) + 2
    for cells in amsd_table:
        check(cells, amsd, AMSD_ROWS, (1, 2))
    said = find(text, r"took (\d+\.\d) s against (\d+\.\d) s with it")
    agree(said.group(1), bf16["trial_s_bare"], "the trial without the profiler")
    agree(said.group(2), bf16["trial_wall_s"], "the trial with it")
    for run in runs:  # the rows split the trial: each second counted once
        assert abs(sum(run["seconds"].values()) - run["trial_wall_s"]) < 0.01 * run["trial_wall_s"]
