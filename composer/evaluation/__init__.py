"""Measuring a trained model: downstream tasks, in-context recall and inference speed.

* :mod:`composer.evaluation.downstream`: lm-evaluation-harness tasks on a Composer model directory
  (``composer eval``, the pipeline's eval stage).
* :mod:`composer.evaluation.context_recall`: the copy gain and the associative-recall slice of a trained model on
  held-out text, no extra training (``composer eval --tasks recall``).
* :mod:`composer.evaluation.loading`: a model directory, its tokenizer, its trained context and its run's held-out
  text, without lm-eval.
* :mod:`composer.evaluation.bench_inference`: prefill and decode throughput and cache memory of presets and
  patterns (``composer bench-inference``).
* :mod:`composer.evaluation.bench_cost`: what a model costs where it runs: training and prefill tokens/s, decode
  ms per token at batch 1 and 64, peak memory, with repeats and spread (a search's finalists and known layouts).
"""
