"""Measuring a trained model: downstream tasks and inference speed.

* :mod:`composer.evaluation.downstream`: lm-evaluation-harness tasks on a Composer model directory
  (``composer eval``, the pipeline's eval stage).
* :mod:`composer.evaluation.bench_inference`: prefill and decode throughput and cache memory of presets and
  patterns (``composer bench-inference``).
"""
