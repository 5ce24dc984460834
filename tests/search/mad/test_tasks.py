"""MAD task generators: deterministic, answers derivable from the inputs, knobs do what they say."""

from __future__ import annotations

import pytest
import torch

from composer.errors import ConfigError
from search.mad import IGNORE_INDEX, TASKS, TaskConfig, chance_accuracy, mad_benchmark_tasks, make_dataset
from search.mad.tasks import (
    fuzzy_recall_vocab,
    generate_compression,
    generate_fuzzy_in_context_recall,
    generate_in_context_recall,
    generate_memorization,
    generate_noisy_in_context_recall,
    generate_selective_copying,
    memorization_map,
    recall_vocab,
)

# Small but not trivial settings of every generator, so the whole file runs in a few seconds.
SMALL = {
    "in-context-recall": {"seq_len": 64},
    "fuzzy-in-context-recall": {"seq_len": 64},
    "noisy-in-context-recall": {"seq_len": 64, "frac_noise": 0.3},
    "selective-copying": {"seq_len": 64, "num_tokens_to_copy": 8},
    "compression": {"seq_len": 32},
    "memorization": {"vocab_size": 64, "seq_len": 32, "kv_map_seed": 7},
    "multi-query-associative-recall": {"vocab_size": 256, "seq_len": 64, "num_kv_pairs": 4},
}


def generate(name: str, n: int, seed, split: str = "test", **knobs):
    return TASKS[name].generate(n, seed, split=split, **{**SMALL[name], **knobs})


@pytest.mark.parametrize("name", list(TASKS))
@pytest.mark.parametrize("split", ["train", "test"])
def test_deterministic_for_a_seed_and_different_across_seeds(name, split):
    a_in, a_t = generate(name, 64, 1, split)
    b_in, b_t = generate(name, 64, 1, split)
    c_in, _c_t = generate(name, 64, 2, split)
    assert torch.equal(a_in, b_in) and torch.equal(a_t, b_t)
    assert not torch.equal(a_in, c_in)


@pytest.mark.parametrize("name", list(TASKS))
def test_shapes_dtypes_and_token_ranges(name):
    knobs = {**TASKS[name].defaults, **SMALL[name]}
    inputs, targets = generate(name, 32, 0)
    assert inputs.shape == targets.shape == (32, knobs["seq_len"])
    assert inputs.dtype == targets.dtype == torch.long
    assert 0 <= int(inputs.min()) and int(inputs.max()) < knobs["vocab_size"]
    scored = targets[targets != IGNORE_INDEX]
    assert scored.numel() > 0
    assert 0 <= int(scored.min()) and int(scored.max()) < knobs["vocab_size"]


# -- recall ------------------------------------------------------------------------------------------------------


def rederive_recall(inputs: torch.Tensor, vocab_size: int, noise_vocab_size: int) -> torch.Tensor:
    """Targets recomputed from the inputs alone: at a key whose key was paired earlier, the value paired then."""
    keys, values, noise = recall_vocab(vocab_size, noise_vocab_size)
    expected = torch.full_like(inputs, IGNORE_INDEX)
    for row in range(inputs.shape[0]):
        seen: dict[int, int] = {}
        tokens = inputs[row].tolist()
        for t in range(0, len(tokens), 2):
            k, v = tokens[t], tokens[t + 1]
            if k in noise:
                assert v in noise  # noise replaces a whole pair
                continue
            assert k in keys and v in values
            if k in seen:
                assert seen[k] == v, "a key keeps its value within a sequence"
                expected[row, t] = v
            seen[k] = v
    return expected


@pytest.mark.parametrize(
    "generator, knobs",
    [
        (generate_in_context_recall, {"seq_len": 64}),
        (generate_in_context_recall, {"vocab_size": 32, "seq_len": 48}),
        (generate_noisy_in_context_recall, {"seq_len": 64}),
        (generate_noisy_in_context_recall, {"seq_len": 64, "frac_noise": 0.6, "vocab_size": 48}),
    ],
)
def test_recall_targets_are_the_values_paired_with_the_queried_keys_earlier(generator, knobs):
    inputs, targets = generator(200, 3, **knobs)
    defaults = generator.__kwdefaults__
    vocab, noise = knobs.get("vocab_size", defaults["vocab_size"]), defaults["noise_vocab_size"]
    assert torch.equal(targets, rederive_recall(inputs, vocab, noise))
    # The last pair always queries a key presented before: its value is scored in every row.
    assert (targets[:, -2] != IGNORE_INDEX).all()
    assert (targets[:, -1] == IGNORE_INDEX).all()


def test_noisy_recall_inserts_noise_from_its_own_vocabulary():
    inputs, _ = generate_noisy_in_context_recall(400, 0, seq_len=64, frac_noise=0.4)
    _, _, noise = recall_vocab(32, 16)
    share = ((inputs >= noise.start) & (inputs < noise.stop)).float().mean().item()
    assert 0.3 < share < 0.5
    clean, _ = generate_in_context_recall(100, 0, seq_len=64)
    assert int(clean.max()) < 16


def test_recall_training_targets_are_every_next_token_or_only_the_scored_ones():
    inputs, lm = generate_in_context_recall(8, 0, split="train", seq_len=32)
    assert torch.equal(lm[:, :-1], inputs[:, 1:]) and (lm[:, -1] == IGNORE_INDEX).all()
    _, test_targets = generate_in_context_recall(8, 0, split="test", seq_len=32)
    _, scored = generate_in_context_recall(8, 0, split="train", seq_len=32, train_on_all_tokens=False)
    assert torch.equal(scored, test_targets)


def parse_fuzzy(tokens: list[int], vocab_size: int) -> list[tuple[str, int, int]]:
    """Runs (kind, start, end) of key and value tokens after the left padding."""
    keys, values, _, pad = fuzzy_recall_vocab(vocab_size)
    runs: list[tuple[str, int, int]] = []
    for i, tok in enumerate(tokens):
        if tok == pad:
            assert not runs, "padding only on the left"
            continue
        kind = "k" if tok in keys else "v"
        assert tok in keys or tok in values
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1], i + 1)
        else:
            runs.append((kind, i, i + 1))
    return runs


@pytest.mark.parametrize("split", ["test", "train"])
def test_fuzzy_recall_targets_are_the_multi_token_values_of_keys_seen_before(split):
    vocab, k_max, v_max = 16, 3, 3
    inputs, targets = generate_fuzzy_in_context_recall(
        150, 5, split=split, vocab_size=vocab, seq_len=64, train_on_all_tokens=False
    )
    for row in range(inputs.shape[0]):
        # The last target is the last token of the final value (the row ends one token before it).
        full = inputs[row].tolist() + [int(targets[row, -1])]
        runs = parse_fuzzy(full, vocab)
        assert runs[0][0] == "k" and runs[-1][0] == "v" and len(runs) % 2 == 0
        expected = [IGNORE_INDEX] * len(full)
        seen: dict[tuple, tuple] = {}
        for (_, ks, ke), (_, vs, ve) in zip(runs[::2], runs[1::2]):
            key, value = tuple(full[ks:ke]), tuple(full[vs:ve])
            assert 1 <= len(key) <= k_max and 1 <= len(value) <= v_max
            if split == "test":
                assert len(key) == k_max, "test keys are always the longest"
            if key in seen:
                assert seen[key] == value
                expected[vs:ve] = value
            seen[key] = value
        assert expected[-1] != IGNORE_INDEX, "the final query is always answerable"
        assert targets[row].tolist() == expected[1:]


# -- selective copying, compression, memorization --------------------------------------------------------------


def test_selective_copying_targets_are_the_data_tokens_in_order():
    vocab, seq_len, k = 16, 64, 8
    inputs, targets = generate_selective_copying(
        200, 0, vocab_size=vocab, seq_len=seq_len, num_tokens_to_copy=k
    )
    copy_token, blank = vocab - 1, vocab - 2
    for row in range(inputs.shape[0]):
        tokens = inputs[row].tolist()
        assert tokens.index(copy_token) == seq_len - k - 1 and tokens.count(copy_token) == 1
        data = [t for t in tokens if t not in (copy_token, blank)]
        assert len(data) == k
        assert targets[row, -k:].tolist() == data
        assert (targets[row, :-k] == IGNORE_INDEX).all()
        assert tokens[-k:] == [blank] * k
    # The data tokens really are scattered: not always at the same positions.
    assert (
        len({tuple((inputs[r, : seq_len - k - 1] != blank).nonzero().flatten().tolist()) for r in range(20)})
        > 1
    )


def test_compression_targets_are_the_inputs_ending_in_the_compression_token():
    inputs, targets = generate_compression(100, 0, vocab_size=16, seq_len=32)
    assert torch.equal(inputs, targets)
    assert (inputs[:, -1] == 15).all() and int(inputs[:, :-1].max()) < 15
    noisy_in, noisy_t = generate_compression(
        100, 0, vocab_size=24, seq_len=32, noise_vocab_size=8, frac_noise=0.5
    )
    noise = noisy_in >= 15
    noise[:, -1] = False
    assert noise.any() and (noisy_t[noise] == IGNORE_INDEX).all()
    assert torch.equal(noisy_t[~noise], noisy_in[~noise])


def test_memorization_maps_every_key_to_one_value_across_examples_and_splits():
    vocab = 64
    train_in, train_t = generate_memorization(300, 1, split="train", vocab_size=vocab, kv_map_seed=9)
    test_in, test_t = generate_memorization(300, 2, split="test", vocab_size=vocab, kv_map_seed=9)
    insert = vocab - 1
    mapping: dict[int, int] = {}
    for inputs, targets in ((train_in, train_t), (test_in, test_t)):
        assert (inputs[:, 1::2] == insert).all() and (targets[:, ::2] == IGNORE_INDEX).all()
        for key, value in zip(inputs[:, ::2].flatten().tolist(), targets[:, 1::2].flatten().tolist()):
            assert mapping.setdefault(key, value) == value
    assert mapping == memorization_map(vocab, seed=9)
    assert len(set(mapping.values())) == len(mapping) == (vocab - 1) // 2  # every key, a bijection
    # Without kv_map_seed the map follows the seed (MAD seeds it with the run seed).
    assert memorization_map(vocab, seed=1) != memorization_map(vocab, seed=2)


# -- knobs, configs, datasets ----------------------------------------------------------------------------------


def test_knobs_change_shapes_and_vocabularies():
    assert generate_in_context_recall(4, 0, seq_len=32)[0].shape == (4, 32)
    assert int(generate_in_context_recall(500, 0, vocab_size=64, seq_len=64)[0].max()) > 16
    assert (
        generate_selective_copying(4, 0, seq_len=128, num_tokens_to_copy=32)[1]
        .ne(IGNORE_INDEX)
        .sum(1)
        .eq(32)
        .all()
    )
    assert int(generate_memorization(50, 0, vocab_size=512, seq_len=64)[0].max()) == 511
    assert generate_compression(4, 0, seq_len=64)[0].shape == (4, 64)
    dataset = make_dataset(
        TaskConfig("in-context-recall", seq_len=32, num_train_examples=100, num_test_examples=20)
    )
    assert dataset.train_inputs.shape == (100, 32) and dataset.test_inputs.shape == (20, 32)


@pytest.mark.parametrize(
    "call",
    [
        lambda: generate_in_context_recall(2, 0, seq_len=33),
        lambda: generate_noisy_in_context_recall(2, 0, noise_vocab_size=0),
        lambda: generate_selective_copying(2, 0, seq_len=32, num_tokens_to_copy=16),
        lambda: generate_fuzzy_in_context_recall(2, 0, seq_len=12),
        lambda: generate_fuzzy_in_context_recall(2, 0, vocab_size=6),
        lambda: TaskConfig("in-context-recall", num_tokens_to_copy=3),
        lambda: TaskConfig("recall"),
        lambda: TaskConfig("compression", seq_len=0),
    ],
)
def test_bad_knobs_are_reported(call):
    with pytest.raises(ConfigError):
        call()


def test_task_config_defaults_overrides_and_round_trip():
    config = TaskConfig("selective-copying", seq_len=64, num_tokens_to_copy=8)
    assert config.vocab_size == 16 and config.seq_len == 64 and config.num_train_examples == 12_800
    assert config.overrides == {"seq_len": 64, "num_tokens_to_copy": 8}
    assert config.label == "selective-copying[seq_len=64,num_tokens_to_copy=8]"
    assert TaskConfig.from_dict(config.to_dict()) == config
    assert hash(config) == hash(TaskConfig("selective-copying", {"num_tokens_to_copy": 8}, seq_len=64))
    assert config.replace(seq_len=256) == TaskConfig("selective-copying", num_tokens_to_copy=8)
    assert TaskConfig("memorization").vocab_size == 256 and TaskConfig("compression").seq_len == 32


def test_make_dataset_is_a_function_of_task_and_seed():
    task = TaskConfig("noisy-in-context-recall", seq_len=32, num_train_examples=64, num_test_examples=32)
    a, b, c = make_dataset(task, 0), make_dataset(task, 0), make_dataset(task, 1)
    assert torch.equal(a.train_inputs, b.train_inputs) and torch.equal(a.test_targets, b.test_targets)
    assert not torch.equal(a.train_inputs, c.train_inputs)
    assert not torch.equal(a.train_inputs[:32], a.test_inputs), "train and test are different streams"
    assert a.vocab_size == 32 and a.seq_len == 32


def test_mad_benchmark_is_the_66_settings_of_mad():
    configs = mad_benchmark_tasks()
    assert len(configs) == 66 and len(set(configs)) == 66
    assert sum(c.name == "memorization" for c in configs) == 6


def test_chance_levels():
    assert chance_accuracy(TaskConfig("in-context-recall")) == 1 / 8
    assert chance_accuracy(TaskConfig("selective-copying")) == 1 / 14
    assert chance_accuracy(TaskConfig("memorization")) == 1 / 128


# -- MQAR (Zoology) ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("random_non_queries", [True, False])
def test_mqar_queries_every_key_once_after_its_pairs_and_scores_only_the_queries(random_non_queries):
    from search.mad.tasks import generate_mqar

    pairs, length, vocab = 8, 128, 512
    inputs, targets = generate_mqar(100, 0, vocab_size=vocab, seq_len=length, num_kv_pairs=pairs,
                                    random_non_queries=random_non_queries)
    for row in range(100):
        tokens, due = inputs[row].tolist(), targets[row].tolist()
        keys, values = tokens[0 : 2 * pairs : 2], tokens[1 : 2 * pairs : 2]
        assert len(set(keys)) == pairs and all(1 <= k < vocab // 2 for k in keys)
        assert len(set(values)) == pairs and all(vocab // 2 <= v < vocab for v in values)
        answer = dict(zip(keys, values))
        queried = [t for t in range(length) if due[t] != IGNORE_INDEX]
        assert len(queried) == pairs and min(queried) >= 2 * pairs and all(t % 2 == 0 for t in queried)
        assert sorted(tokens[t] for t in queried) == sorted(keys)
        assert all(due[t] == answer[tokens[t]] for t in queried)
        if not random_non_queries:
            assert all(tokens[t] == 0 for t in range(2 * pairs, length) if t not in queried)
    near = (torch.nonzero(targets != IGNORE_INDEX)[:, 1] - 2 * pairs).float().mean().item()
    assert near < (length - 2 * pairs) / 2, "the power law puts most queries soon after the context"


def test_mqar_refuses_a_length_without_room_for_its_queries():
    from search.mad.tasks import generate_mqar

    with pytest.raises(ConfigError, match="seq_len >= 4 \\* num_kv_pairs"):
        generate_mqar(4, 0, vocab_size=256, seq_len=32, num_kv_pairs=16)
    assert TaskConfig("multi-query-associative-recall") not in mad_benchmark_tasks()
