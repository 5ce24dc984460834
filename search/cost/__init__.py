"""What a candidate costs: its serving cost on the model at the target (analytic: parameters and cache,
``serving``), what it costs measured on the machine the search runs on (``measured``), the latency and throughput
limits a candidate must meet before it trains (``limits``), and the loss-cost front the answer is placed on
(``front``).

The analytic names are re-exported here, as ``search.cost`` held them before it became a folder."""

from search.cost.serving import (
    COST_LENGTHS,
    MAX_PATTERNS_CHECKED,
    first_within,
    keeps_every_token,
    max_kv_holding,
    over_max_kv,
    parse_max_kv,
    recall_under_max_kv,
    serving_cost,
)

__all__ = ["COST_LENGTHS", "MAX_PATTERNS_CHECKED", "first_within", "keeps_every_token",
           "max_kv_holding", "over_max_kv", "parse_max_kv", "recall_under_max_kv", "serving_cost"]
