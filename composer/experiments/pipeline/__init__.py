"""The whole method in one job: search -> aggregate -> extrapolate -> train composite and baselines -> compare.

A pipeline recipe (recipes/pipeline/*.yaml) has one section per stage::

    out: runs/pipeline          # everything goes under here
    search: {...}               # SearchConfig fields (composer search); out is <out>/search
    aggregate: {c: 0, k: 5}     # N_c voting over the top K-means cluster (search.aggregate)
    # or, instead of search and aggregate: from_search: runs/search (a finished search's answer, below)
    extrapolate: {target: llama-3.2-1b, method: auto}   # or params: N (non-embedding) instead of the preset's
                                                     # size; attention: keep|repeat (default: the search's rule)
    baselines: [llama, sandwich, striped-1:2]        # scaling.matching names, matched to the composite
    train: {...}                # TrainConfig fields shared by every model (arch/preset/out/seed set per run)
                                # plus lr_sweep: [rates] for a learning rate per model (composer.experiments.lr_sweep)
                                # and recall_sequences: N (each trained model's recall; 32, 0: not measured)
    seeds: [0, 1, 2]            # every model trains once per seed (--seeds 0,1,2)
    eval: {tasks: [arc_easy, hellaswag], limit: 500}   # optional: lm-eval tasks for every trained model

From a finished search (``from_search: DIR``, ``composer pipeline --from-search DIR``; issue 49): no search runs
and nothing is voted. The composite is the search's answer, best.json's ``recommended`` pattern
(``search.results.answer_of``), the one ``composer train --from-search`` and ``composer extrapolate --from-search``
take; it grows to the target by the search's own ``--attention-at-target`` (read from DIR's config.json) and
starts at the rate the search chose for it, its baselines at the rates the search chose for their layouts where
its final leaderboard holds them. So the model trained is the one the search scored and costed, without copying
its pattern into an aggregate.json by hand. The answer is read again on every run (a few JSON files) and recorded
in aggregate.json with ``from_search``. A recipe gives ``search`` or ``from_search``, not both; ``aggregate`` votes
over a search this pipeline runs, so it is refused beside ``from_search``; the ``--from-search`` flag replaces a
recipe's ``search`` and ``aggregate`` sections.

The target preset was ``extrapolate.to`` before issue 49 ("one name, one meaning": ``--target`` on every command);
the old key is still read, with a one-line notice.

Every stage writes its result before the next starts, so a killed pipeline re-run with the same recipe resumes:
the search resumes its Optuna study, aggregation and extrapolation are recomputed from it (cheap and
deterministic), finished (model, seed) trainings are kept (their summary.json), an interrupted one continues
from its last checkpoint.

All models train on the same data, tokens, batch and schedule, once per seed, and are scored on the same
held-out text (the validation split follows the data, not the seed; summary.json's val_fingerprint proves it).
The comparison (comparison.json/.csv/.md) gives per model the mean, std and a Student-t 95% interval of the
validation loss over seeds, and the paired per-seed difference to the matched Llama with its interval and a
verdict in words ("lower", "higher", "within noise"); plus tokens/s, parameters and KV-cache bytes per token at
the target widths. loss_curves.png plots each model's mean curve over seeds with the seeds' range as a band.

How the winner's attention grows to the target (``extrapolate.attention``, ``composer pipeline --attention-at-target``):
``repeat`` stacks its attention layers with the rest, ``keep`` keeps their number (``scaling.extrapolate``). Left
out, it is the rule the search scored and costed its candidates by: the ``attention_at_target`` of the search's
``config.json`` in ``from_search`` or under ``<out>/search`` (what the search ran with), else of the recipe's
``search`` section, else ``repeat``. The pattern grows by ``search.growth.grow``, the rule every command grows a
search's answer by: a published family the search entered (best.json's ``known_layouts``) in its own layout at the
target, as the search trained it; Llama's and the paper's layouts stacked, whatever the rule.
extrapolate.json records the rule (``attention``) and where it came from (``attention_from``).

Learning rates (``composer.experiments.search_rates``), strongest rule first: with ``train.lr_sweep`` every model first trains
at each rate on a short budget (one seed) and uses its best rate for all its seeds (``composer.experiments.lr_sweep``;
``lr_sweep.json/.csv/.md/.png``); an explicit ``train.lr`` is shared by every model; otherwise, when the search
recorded a rate per trial (its ``lm`` and ``recall`` evaluators), the composite starts at the rate the search chose
for the composite's own pattern if the search scored it, else for the best member of the aggregation's top
cluster, and a depth-matched baseline (llama, striped-1:R, a published family) at the rate of its layout at the
search depth when the search scored that layout (so the composite's tuned start is not set against a baseline at
an untuned default); every other model shares the default rate. A search rate was found at the search's widths:
a starting point, not a rate tuned at the target, and the notes say so. comparison.json gives per model
``chosen_lr``, ``lr_source`` (``search``, ``sweep`` or ``shared``), ``search_lr`` and ``search_lr_pattern``.

Power: ``comparison.json``'s ``power`` gives the seed spread within each model against the spread between them
and the seeds' rank agreement (``composer.statistics.seed_separation``). When that says the budget cannot decide,
or the composite's interval against Llama contains 0, the ``conclusion`` reads "underpowered: raise --tokens or
--seeds" instead of naming a winner, and no row is starred as best.

Recall (issue 48): after each (model, seed) training the trained model's recall is measured as ``composer eval
--tasks recall`` measures it, on ``train.recall_sequences`` held-out sequences (``--recall-sequences``; default
32, 0: none), and kept in its run's ``recall.json``, so a resumed pipeline measures only the runs without one
(``composer.experiments.pipeline_recall``). The comparison gives per model the random copy gain at the longest
distance and the AR slice's contrasts, each sequence averaged over the seeds and the t interval over the sequences,
and says plainly when no model retrieves, so that small gains do not read as a ranking.

The optional ``eval`` stage (a recipe with an ``eval`` section: ``tasks``, and ``limit``, ``include_path``,
``num_fewshot``, ``batch_size``, ``device``) scores every trained model, each model at each seed, on
lm-evaluation-harness tasks (composer/evaluation/downstream.py; ``pip install 'composer-hnas[eval]'``) into its run's
``eval.json``, kept on a re-run with the same options. The comparison then gives each task metric's mean over
seeds with its interval, per model, and comparison.md a second table of them.
"""


from composer.experiments.pipeline.config import COMPOSITE, REFERENCE, STAGES, PipelineConfig
from composer.experiments.pipeline.report import (
    conclusion,
    format_comparison,
    format_downstream,
    read_loss_curve,
    write_comparison,
)
from composer.experiments.pipeline.stages import Pipeline
from composer.experiments.replicates import run_dir

__all__ = ["COMPOSITE", "REFERENCE", "STAGES", "Pipeline", "PipelineConfig", "conclusion", "format_comparison",
           "format_downstream", "read_loss_curve", "run_dir", "write_comparison"]
