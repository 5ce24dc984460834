"""MAD synthetic-task evaluator (Poli et al. 2024): task generators and the pattern scorer.

```python
from search.mad import BUDGETS, TaskConfig, evaluate_pattern, make_dataset

result = evaluate_pattern("AAMMMM", budget="cpu", seed=0)   # ~20 s on 2 CPU cores
result.score, result.accuracies
```

See ``docs/mad.md`` for the tasks, the budgets and measured scores.
"""

from search.mad.evaluate import (
    BUDGETS,
    Budget,
    CandidateFailed,
    MadResult,
    TaskResult,
    evaluate_pattern,
    get_budget,
    resolve_precision,
)
from search.mad.models import CompressionAutoEncoder, build_task_model
from search.mad.tasks import (
    IGNORE_INDEX,
    TASKS,
    MadDataset,
    TaskConfig,
    TaskSpec,
    chance_accuracy,
    get_task,
    mad_benchmark_tasks,
    make_dataset,
)

__all__ = [
    "BUDGETS",
    "IGNORE_INDEX",
    "TASKS",
    "Budget",
    "CandidateFailed",
    "CompressionAutoEncoder",
    "MadDataset",
    "MadResult",
    "TaskConfig",
    "TaskResult",
    "TaskSpec",
    "build_task_model",
    "chance_accuracy",
    "evaluate_pattern",
    "get_budget",
    "get_task",
    "mad_benchmark_tasks",
    "make_dataset",
    "resolve_precision",
]
