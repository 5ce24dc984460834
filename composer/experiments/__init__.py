"""Experiments that run many trainings and weigh the results with their noise.

* :mod:`composer.experiments.pipeline`: search, extrapolate, train the winner against matched baselines,
  evaluate (``composer pipeline``).
* :mod:`composer.experiments.transfer`: does the proxy's ranking hold at the target scale (``composer transfer``).
* :mod:`composer.experiments.lr_sweep`: a learning rate per architecture before comparing them.
* :mod:`composer.experiments.search_rates`: the rates a search evaluator trains each candidate at.
* :mod:`composer.experiments.replicates`: one configuration over several seeds.
* :mod:`composer.experiments.placement_search`: trains a hybrid's supernet, then picks where its attention layers
  stay (``composer hybridize --search-placement``; the pieces it trains are in :mod:`composer.hybridize`).

The statistics they report (intervals, paired differences) live in :mod:`composer.statistics`.
"""
