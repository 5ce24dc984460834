"""How a pretrained model becomes a hybrid: the pieces the training loop puts together.

* :mod:`composer.hybridize.student`: a student architecture over a teacher's widths, its initialisation from the
  teacher's weights, and which parameters stay frozen (``composer train --init-from``).
* :mod:`composer.hybridize.distill`: the distillation losses (KL to the teacher, layer outputs).
* :mod:`composer.hybridize.supernet`: one network that trains every placement of a few kept attention layers.

The training loop (:mod:`composer.training.module`) uses them; the search over placements that drives it
(``composer hybridize --search-placement``) is an experiment: :mod:`composer.experiments.placement_search`.
"""


def __getattr__(name: str):
    # this room was the module composer.hybridize until issue 28: its functions now live in .student
    raise AttributeError(f"module 'composer.hybridize' has no attribute {name!r}: composer.hybridize.{name} moved "
                         f"to composer.hybridize.student.{name} (issue 28)")
