"""The cost model's calibration: the measurements and fits that write ``composer/costmodel/constants.json``, and
the checks of what it predicts. ``python benchmarks/cost_model.py fit|validate|loo`` runs it (:mod:`.cli`).

Its own room, beside the cost model it calibrates: predicting (:mod:`composer.costmodel`) reads the table and
never imports this package (an import-linter contract in pyproject.toml says so), so ``composer info`` and the
search pay nothing for the profiler, the timing harness or the stored GPU runs. One job a module:

- :mod:`.record`: where results go, and the command and paths a result names;
- :mod:`.timing`: the clock a timing reads, the wait for a quiet machine, and the timing loop;
- :mod:`.units`: one layer (or the head) as the fit times it, and the cost model's work for it;
- :mod:`.op_counts` and :mod:`.roofs`: the ops and kernels a unit runs, and the CPU's measured roofs;
- :mod:`.cases`: what fit and validate measure (the fit's shapes, the held-out models);
- :mod:`.cpu_fit`: the CPU's constants, fitted to single-layer timings;
- :mod:`.validate`: whole models the fit never ran, measured beside their prediction;
- :mod:`.gpu_runs` and :mod:`.leave_one_out`: the stored GPU runs, and each pattern predicted from the others;
- :mod:`.store`: the fitted constants written into the table, each naming its source;
- :mod:`.markdown`: the tables the commands print; :mod:`.cli`: the command line.

Paths (``benchmarks/results``) are the source checkout's: calibration is run from a clone, not an installed wheel.
"""
