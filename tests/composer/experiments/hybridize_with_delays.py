"""``composer`` with every supernet step and every placement score slowed down, so a test can kill the process
inside the stage it means to (tests/composer/experiments/test_placement_search.py). Delays in seconds: HYBRIDIZE_STEP_DELAY,
HYBRIDIZE_SCORE_DELAY. Test harness only: nothing in the product reads these."""

import os
import sys
import time

import composer.hybridize.supernet as supernet
from composer.training.stability import StabilityMonitor

step_delay = float(os.environ.get("HYBRIDIZE_STEP_DELAY", "0"))
score_delay = float(os.environ.get("HYBRIDIZE_SCORE_DELAY", "0"))
original_step, original_score = StabilityMonitor.on_train_batch_end, supernet.score_placement


def slow_step(self, *args, **kwargs):
    time.sleep(step_delay)
    return original_step(self, *args, **kwargs)


def slow_score(*args, **kwargs):
    time.sleep(score_delay)
    return original_score(*args, **kwargs)


StabilityMonitor.on_train_batch_end = slow_step
supernet.score_placement = slow_score

if __name__ == "__main__":
    from composer.cli import main

    sys.exit(main(sys.argv[1:]))
