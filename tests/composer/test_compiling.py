"""``recompile_limit_at_least``: dynamo's limit raised inside the block only, and never lowered."""

from __future__ import annotations

import torch

from composer.compiling import recompile_limit_at_least


def test_the_limit_is_raised_inside_the_block_and_restored_after():
    before = torch._dynamo.config.recompile_limit
    with recompile_limit_at_least(before + 40):
        assert torch._dynamo.config.recompile_limit == before + 40
    assert torch._dynamo.config.recompile_limit == before


def test_a_higher_limit_is_left_as_it_is():
    before = torch._dynamo.config.recompile_limit
    with recompile_limit_at_least(1):
        assert torch._dynamo.config.recompile_limit == before
