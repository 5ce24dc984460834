"""The recall-bearing training stream: a share of the windows repeat a span of their own text, the same windows
whatever the workers or a resume, and the validation text never changes."""

from __future__ import annotations

from itertools import islice

import numpy as np
import pytest
import torch

from composer.data import DataConfig, DataError, PackedTokenDataset
from composer.data.pipeline import DataPipeline
from composer.data.repeated_spans import RepeatedSpans, default_span

SEQ_LEN, MICRO_BATCH, SPAN = 31, 4, 6
TOKENS = np.arange(200 * (SEQ_LEN + 1), dtype=np.uint32)  # every token distinct: a repeat is visible as one


def stream(share: float, seed: int = 3) -> PackedTokenDataset:
    return PackedTokenDataset(TOKENS, SEQ_LEN, MICRO_BATCH, seed=seed, fingerprint="t",
                              repeats=RepeatedSpans(share, SPAN, seed))


def repeats_in(window: torch.Tensor) -> list[tuple[int, int]]:
    """(first, second) starts of the spans of ``SPAN`` tokens that occur twice in a window of distinct tokens."""
    values = window.tolist()
    found = []
    for second in range(SPAN, len(values) - SPAN + 1):
        for first in range(0, second - SPAN + 1):
            if values[first:first + SPAN] == values[second:second + SPAN]:
                found.append((first, second))
    return found


def test_the_share_of_windows_repeats_one_span_of_their_own_text_later_in_the_window():
    windows = torch.cat(list(islice(iter(stream(0.5)), 100)))
    plain = torch.cat(list(islice(iter(stream(0.0)), 100)))
    repeated = 0
    for window, original in zip(windows, plain):
        found = repeats_in(window)
        if not found:
            assert torch.equal(window, original)  # the others are untouched
            continue
        repeated += 1
        (first, second), = found
        assert second >= first + SPAN  # the second copy after the first, not overlapping it
        assert torch.equal(window[second:second + SPAN], original[first:first + SPAN])
        changed = (window != original).nonzero().flatten().tolist()
        assert set(changed) <= set(range(second, second + SPAN))  # only the second copy's tokens changed
    assert 0.4 < repeated / len(windows) < 0.6  # 400 windows at share 0.5


def test_repeats_depend_on_the_stream_position_so_a_resume_sees_the_same_windows():
    uninterrupted = list(islice(iter(stream(0.5)), 20))
    first = stream(0.5)
    iterator = iter(first)
    for _ in range(7):
        next(iterator)
    resumed = stream(0.5)
    resumed.load_state_dict(first.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(islice(iter(resumed), 13), uninterrupted[7:]))
    other_seed = list(islice(iter(stream(0.5, seed=4)), 20))
    assert not all(torch.equal(a, b) for a, b in zip(other_seed, uninterrupted))


@pytest.mark.parametrize("share, span, why", [(1.5, 4, "repeat_share"), (-0.1, 4, "repeat_share"),
                                              (0.5, 0, "repeat_span")])
def test_bad_settings_name_the_knob(share, span, why):
    with pytest.raises(DataError, match=why):
        RepeatedSpans(share, span)


def test_a_span_that_cannot_fit_twice_is_refused_with_the_fix():
    with pytest.raises(DataError, match="repeat_span of at most 16"):
        PackedTokenDataset(TOKENS, SEQ_LEN, MICRO_BATCH, repeats=RepeatedSpans(0.5, 17))


def test_the_default_span_is_a_line_of_bytes_or_32_subwords_at_most_a_quarter_of_the_context():
    assert default_span(True, 512) == 64 and default_span(False, 512) == 32 and default_span(True, 128) == 32


def pipelines(tmp_path, **repeats) -> tuple[DataPipeline, DataPipeline]:
    source = tmp_path / "corpus.txt"
    rng = np.random.default_rng(0)
    source.write_text("\n\n".join("".join(chr(c) for c in rng.integers(97, 123, 300)) for _ in range(200)))
    base = DataConfig(source=str(source), seq_len=64, cache_dir=str(tmp_path / "cache"), val_fraction=0.1)
    return DataPipeline(base), DataPipeline(base.replace(**repeats))


def test_the_pipeline_repeats_in_training_windows_only_and_validation_text_is_unchanged(tmp_path):
    plain, repeating = pipelines(tmp_path, repeat_share=1.0)
    assert repeating.repeated_spans() == RepeatedSpans(1.0, 16, 0)  # a quarter of the 64-byte context
    assert torch.equal(torch.cat(list(repeating.val_dataset(4))), torch.cat(list(plain.val_dataset(4))))
    assert not torch.equal(next(iter(repeating.train_dataset(4))), next(iter(plain.train_dataset(4))))
    with pytest.raises(DataError, match="repeat_share"):
        DataConfig(repeat_share=2.0)


def test_a_run_resumed_with_other_repeats_is_refused(tmp_path):
    plain, repeating = pipelines(tmp_path, repeat_share=0.5)
    trained = repeating.train_dataset(4)
    next(iter(trained))
    with pytest.raises(DataError):
        plain.train_dataset(4).load_state_dict(trained.state_dict(1))
