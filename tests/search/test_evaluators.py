"""``make_evaluator``: built-ins take precision/compile; a custom factory that is not one is refused up front."""

from __future__ import annotations

import pytest

from composer.errors import ConfigError
from search.evaluators import MadEvaluator, make_evaluator


class NotAnEvaluator:
    def __init__(self, **_):
        pass


def old_style_factory(budget, widths, data, tokenizer):
    """Written before precision= and compile= existed: still called, without them."""
    from tests.search.toy_evaluator import make

    return make(budget=budget, widths=widths, data=data, tokenizer=tokenizer)


@pytest.mark.parametrize(
    "name, message",
    [
        ("os:system", "cannot be called as factory"),
        ("json:dumps", "cannot be called as factory"),
        ("math:pi", "is not a factory"),
        (f"{__name__}:NotAnEvaluator", r"returned NotAnEvaluator \(not callable\), not an evaluator"),
        ("no_such_module_xyz:make", "cannot load evaluator"),
    ],
)
def test_a_factory_that_does_not_make_an_evaluator_is_one_clear_error(name, message):
    with pytest.raises(ConfigError, match=message):
        make_evaluator(name, "smoke", "tiny", precision="fp32")


def test_a_factory_on_a_moved_module_names_its_new_path():
    with pytest.raises(ConfigError, match=r"composer\.pipeline:run moved to composer\.experiments\.pipeline:run"):
        make_evaluator("composer.pipeline:run", "cpu", "search-1m")


def test_factories_without_the_new_options_keep_working():
    evaluator = make_evaluator(f"{__name__}:old_style_factory", "smoke", "tiny", precision="bf16", compile=True)
    assert evaluator.direction in ("maximize", "minimize")


def test_the_mad_evaluator_resolves_its_precision():
    assert make_evaluator("mad", "smoke", "tiny", precision="fp32").precision == "fp32"
    assert MadEvaluator("smoke", "tiny", precision="bf16").precision == "bf16"
    assert MadEvaluator("smoke", "tiny").precision in ("fp32", "bf16")


def test_the_module_docs_list_the_built_in_evaluators_and_mark_the_searchs_default():
    """Issue 34: the docs called ``mad`` the default and spoke of two built-in evaluators; there are three and
    ``lm`` is the default."""
    import re

    import search.evaluators
    from search.config import SearchConfig

    bullets = dict(re.findall(r"^\* ``(\w+)``( \(default)?", search.evaluators.__doc__, flags=re.M))
    assert sorted(bullets) == ["lm", "mad", "recall"]
    for name in bullets:  # each one the docs list is a built-in
        assert make_evaluator(name, "cpu", "search-1m").name == name
    assert [name for name, default in bullets.items() if default] == [SearchConfig.evaluator]
    assert "Both built-in" not in search.evaluators.__doc__
