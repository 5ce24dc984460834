"""The helpers every docs-figure test reads a report with (``tests/docs_figures/reading.py``), checked on
figures whose printed precision decides the answer.
"""

from __future__ import annotations

import pytest

from tests.docs_figures.reading import agree


@pytest.mark.parametrize("printed, value, ok", [("0.05", 0.0476, True), ("-0.05", -0.0476, True),
                                                ("+0.079", 0.0785, True), ("1,827", 1826.85, True),
                                                ("0.04", 0.0476, False), ("0.86", 0.857, True)])
def test_agree_reads_the_printed_precision(printed, value, ok):
    if ok:
        agree(printed, value, "example")
    else:
        with pytest.raises(AssertionError):
            agree(printed, value, "example")
