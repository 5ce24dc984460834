"""``composer eval`` and composer/evaluation/downstream.py: a Composer model as an lm-evaluation-harness LM, offline.

The accuracy test writes a multiple-choice task (a YAML over a JSONL file in tmp_path, loaded by HF datasets'
``json`` builder with the hub switched off), runs ``composer eval --include-path`` on a tiny model and checks
``acc`` against a hand computation on that file with the model itself. The LM's three request types are each
checked against a direct computation: loglikelihood (log-softmax of the full forward), loglikelihood_rolling
(windowed over max_seq_len) and generate_until (ComposerModel.generate, cut at the stop string).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from composer.cli import main
from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.interop.model_dir import export_weights
from composer.model import build_model

lm_eval = pytest.importorskip("lm_eval", reason="lm-eval is the [eval] extra (.ci/run installs it)")
from lm_eval.api.instance import Instance  # noqa: E402

from composer.evaluation.downstream import ComposerLM, rolling_windows  # noqa: E402

EOS = 256
MAX_LEN = 64
TASK = "composer_test_mc"
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

QUESTIONS = [
    ("The sky is", ["blue", "green", "loud", "square"], 0),
    ("Two plus two is", ["four", "five", "seven"], 0),
    ("Water freezes at zero degrees", ["Celsius", "Fahrenheit", "Kelvin"], 0),
    ("A cat says", ["meow", "woof", "moo", "quack"], 0),
    ("The opposite of hot is", ["cold", "warm", "tepid"], 0),
    ("Paris is the capital of", ["France", "Spain", "Italy", "Peru"], 0),
    ("The first month is", ["January", "May", "July"], 0),
    ("Bees make", ["honey", "milk", "steel"], 0),
    ("The sun rises in the", ["east", "west", "north", "south"], 0),
    ("Ice is", ["cold", "hot", "purple"], 0),
    ("A week has seven", ["days", "hours", "years"], 0),
    ("Fish live in", ["water", "trees", "clouds"], 0),
]


def arch(pattern: str = "(AM)x2") -> ArchConfig:
    from composer.presets import resolve_architecture

    base, _ = resolve_architecture(pattern, "tiny", "tiny")
    # 257 ids: the byte tokenizer's, so every id decodes; init_std 0.1 so the choices' scores differ clearly
    return base.replace(vocab_size=257, max_seq_len=MAX_LEN, init_std=0.1,
                        options={"W": {"window": 8}, "S": {"chunk_size": 16}})


TRAIN_TEXT = ("Once upon a time a quick brown fox jumped over the lazy dog, and the dog said: well done! "
              "The sky is blue, two plus two is four, and fish live in water. ") * 4


def train_briefly(model, steps: int = 40):
    """A few AdamW steps on TRAIN_TEXT: a random model's greedy rollout repeats one (often non-ASCII) byte;
    after these it writes varied ASCII text, which the stop-string test needs."""
    data = torch.tensor(byte_ids(TRAIN_TEXT))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, len(data) - 49, (8,))
        batch = torch.stack([data[s:s + 49] for s in starts.tolist()])
        loss = model(batch[:, :-1], targets=batch[:, 1:]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def write_run(root: Path, pattern: str = "(AM)x2") -> tuple[Path, torch.nn.Module]:
    """What composer train leaves: RUN/model (export_weights) and RUN/summary.json naming the tokenizer."""
    torch.manual_seed(0)
    model = train_briefly(build_model(arch(pattern)))
    run = root / "run"
    export_weights(model.state_dict(), model.arch, run / "model")
    (run / "summary.json").write_text(json.dumps({"tokenizer": None}))  # None: composer train's byte default
    return run / "model", model


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("downstream"))


def byte_ids(text: str) -> list[int]:
    return list(text.encode("utf-8"))


@torch.no_grad()
def direct_loglikelihood(model, context: list[int], continuation: list[int]) -> float:
    """sum_i log p(continuation_i | context, continuation_<i) from one full forward."""
    ids = torch.tensor([context + continuation])
    logprobs = model(ids).logits[0].log_softmax(-1)
    positions = torch.arange(len(context) - 1, len(context) + len(continuation) - 1)
    return float(logprobs[positions, torch.tensor(continuation)].sum())


def write_task(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "questions.jsonl"
    data.write_text("".join(json.dumps({"question": q, "choices": c, "answer": a}) + "\n" for q, c, a in QUESTIONS))
    (directory / f"{TASK}.yaml").write_text(
        f"task: {TASK}\n"
        "dataset_path: json\n"
        "dataset_kwargs:\n"
        f"  data_files:\n    test: {json.dumps(str(data))}\n"
        "test_split: test\n"
        "output_type: multiple_choice\n"
        'doc_to_text: "{{question}}"\n'
        'doc_to_choice: "{{choices}}"\n'
        'doc_to_target: "{{answer}}"\n'
        "metric_list:\n"
        "  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"
        "  - metric: acc_norm\n    aggregation: mean\n    higher_is_better: true\n"
        "metadata:\n  version: 1.0\n"
    )
    return directory


def test_eval_accuracy_on_a_local_task_equals_a_hand_computation(trained, tmp_path):
    model_dir, model = trained
    tasks = write_task(tmp_path / "tasks")
    # by hand: each choice's log-likelihood after the question (lm-eval joins them with a space), argmax vs gold
    correct, margins = [], []
    for question, choices, gold in QUESTIONS:
        scores = [direct_loglikelihood(model, byte_ids(question), byte_ids(" " + c)) for c in choices]
        best = max(range(len(scores)), key=scores.__getitem__)
        correct.append(best == gold)
        margins.append(sorted(scores)[-1] - sorted(scores)[-2])
    assert min(margins) > 1e-3, "a near tie would make the comparison fragile"
    expected = sum(correct) / len(correct)

    out = tmp_path / "out"
    env = {**os.environ, **OFFLINE, "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"), "OMP_NUM_THREADS": "1"}
    argv = ["eval", "--model", str(model_dir), "--tasks", TASK, "--include-path", str(tasks),
            "--batch-size", "5", "--out", str(out), "--json"]
    result = subprocess.run([sys.executable, "-m", "composer", *argv], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = json.loads(result.stdout)
    written = json.loads((out / "eval.json").read_text())
    assert printed["tasks"] == written["tasks"]
    metrics = written["tasks"][TASK]["metrics"]
    assert metrics["acc"] == expected
    assert metrics["acc_stderr"] == pytest.approx(
        (expected * (1 - expected) / (len(correct) - 1)) ** 0.5, rel=1e-9)  # lm-eval's sample stderr of a mean
    assert 0.0 <= metrics["acc_norm"] <= 1.0 and metrics["acc_norm_stderr"] is not None
    assert written["tasks"][TASK]["n"] == len(QUESTIONS)
    assert written["pattern"] == model.arch.compact and written["tokenizer"]["name"] == "bytes"
    assert written["config"]["tasks"] == [TASK] and written["versions"]["lm_eval"]


def test_loglikelihood_matches_the_model_and_batching(trained):
    model_dir, model = trained
    pairs = [("The sky is", " blue"), ("The sky is ", "blue"), ("", "Hello"), ("Two plus two", " is four"),
             ("x" * 100, " beyond the window")]
    one = ComposerLM(pretrained=model_dir, batch_size=1).loglikelihood(
        [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)])
    many = ComposerLM(pretrained=model_dir, batch_size=4).loglikelihood(
        [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)])
    for (context, continuation), (ll, greedy), (ll_batched, greedy_batched) in zip(pairs, one, many, strict=True):
        # HFLM's encoding: trailing spaces of the context belong to the continuation; no context -> EOS
        moved = len(context) - len(context.rstrip())
        ctx, cont = byte_ids(context[: len(context) - moved]), byte_ids(context[len(context) - moved:] + continuation)
        ctx = ctx or [EOS]
        whole = (ctx + cont)[-(MAX_LEN + 1):]  # lm-eval's truncation: the left of the context is dropped
        expected = direct_loglikelihood(model, whole[: len(whole) - len(cont)], cont)
        assert ll == pytest.approx(expected, abs=1e-4)
        assert ll_batched == pytest.approx(ll, abs=1e-4) and greedy_batched == greedy
    # is_greedy: a continuation made of the model's own argmax tokens is greedy
    ids = byte_ids("The sky")
    with torch.no_grad():
        argmax = model.generate(torch.tensor(ids), 3, temperature=0)
    lm = ComposerLM(pretrained=model_dir)
    assert lm.loglikelihood_tokens([(ids, argmax.tolist())])[0][1] is True
    assert lm.loglikelihood_tokens([(ids, [(argmax[0].item() + 1) % 256])])[0][1] is False


@pytest.mark.parametrize("length", [40, 150], ids=["one-window", "three-windows"])
def test_loglikelihood_rolling_equals_the_windowed_direct_computation(trained, length):
    model_dir, model = trained
    text = ("The quick brown fox jumps over the lazy dog. " * 4)[:length]
    (rolling,) = ComposerLM(pretrained=model_dir, batch_size=2).loglikelihood_rolling(
        [Instance("loglikelihood_rolling", {}, (text,), 0)])
    seq = [EOS, *byte_ids(text)]  # every token scored once; the first from EOS, the documents' separator
    expected, predicted = 0.0, 0
    with torch.no_grad():
        for end in range(MAX_LEN, len(seq) - 1 + MAX_LEN, MAX_LEN):  # window w predicts seq[wL+1 .. end]
            end = min(end, len(seq) - 1)
            start = max(0, end - MAX_LEN)
            logprobs = model(torch.tensor([seq[start:end]])).logits[0].log_softmax(-1)
            for target in range(predicted + 1, end + 1):
                expected += float(logprobs[target - 1 - start, seq[target]])
            predicted = end
    assert predicted == len(text)
    assert rolling == pytest.approx(expected, abs=1e-3)
    assert len(rolling_windows(byte_ids(text), EOS, MAX_LEN)) == -(-len(text) // MAX_LEN)


@pytest.mark.parametrize("pattern", ["(AM)x2", "ASWM"])
def test_generate_until_is_the_cached_greedy_rollout_cut_at_the_stop_string(tmp_path, pattern):
    model_dir, model = write_run(tmp_path, pattern)
    lm = ComposerLM(pretrained=model_dir, batch_size=4)
    contexts = ["Once upon a time", "Tell me a story!", "Hi"]  # the first two have equal lengths: one batch
    references = []
    with torch.no_grad():
        for context in contexts:
            tokens = model.generate(torch.tensor(byte_ids(context)), 24, temperature=0, eos=EOS).tolist()
            references.append(bytes(t for t in tokens if t != EOS).decode("utf-8", errors="replace"))
    # a stop string the rollout meets after a few characters (an ASCII one, not a replacement char)
    stops = []
    for text in references:
        stops.append(next((ch for ch in text[3:] if ch.isascii() and ch.isprintable() and ch not in text[:3]),
                          "\x00never"))
    requests = [Instance("generate_until", {}, (c, {"until": [s], "max_gen_toks": 24}), i)
                for i, (c, s) in enumerate(zip(contexts, stops, strict=True))]
    outputs = lm.generate_until(requests)
    for text, stop, output in zip(references, stops, outputs, strict=True):
        assert output == text.split(stop)[0]
    assert any(len(o) < len(t) for o, t in zip(outputs, references, strict=True)), "a stop string cut one"
    # without a stop string, max_gen_toks tokens (or up to EOS) exactly
    (plain,) = lm.generate_until([Instance("generate_until", {}, (contexts[2], {"until": [], "max_gen_toks": 24}), 0)])
    assert plain == references[2]


def test_bad_input_is_one_line_exit_2(trained, tmp_path, capsys, monkeypatch):
    model_dir, _ = trained
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)
    assert main(["eval", "--model", str(tmp_path / "missing"), "--tasks", "arc_easy"]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and err.count("\n") == 1
    assert main(["eval", "--model", str(model_dir), "--tasks", "no_such_task_xyz"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Tasks not found: no_such_task_xyz" in err[0]
    assert main(["eval", "--model", str(model_dir.parent), "--tasks", TASK]) == 2
    assert "pass the model/ folder" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # as if the [eval] extra were not installed
    assert main(["eval", "--model", str(model_dir), "--tasks", "arc_easy"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'composer-hnas[eval]'" in err and err.count("\n") == 1


def test_composer_is_registered_with_lm_eval():
    from lm_eval.api.registry import get_model

    assert get_model("composer") is ComposerLM


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """No hub access for this process's datasets/transformers, and a private datasets cache."""
    import datasets.config

    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if hasattr(datasets.config, name):
            monkeypatch.setattr(datasets.config, name, True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")


def test_pipeline_eval_stage_scores_every_run_and_joins_the_comparison(tmp_path, offline):
    from composer.experiments.pipeline import Pipeline, PipelineConfig, run_dir

    tasks = write_task(tmp_path / "tasks")
    out = tmp_path / "pipeline"
    config = PipelineConfig(out=str(out), extrapolate={"to": "tiny"}, baselines=[], seeds=[0, 1],
                            eval={"tasks": TASK, "include_path": str(tasks), "batch_size": 4})
    assert config.eval["tasks"] == [TASK]
    models = {"composite": "AMSM", "llama": "AMAM"}
    pipeline = Pipeline(config, echo=lambda line: None)
    summaries = {}
    for name, pattern in models.items():
        for seed in config.seeds:
            torch.manual_seed(seed)
            model = build_model(arch(pattern)).eval()
            run = run_dir(out / "train", name, seed)
            export_weights(model.state_dict(), model.arch, run / "model")
            summaries[(name, seed)] = {
                "tokenizer": None, "pattern": pattern, "val_loss": 5.0 + seed, "tokens_per_s": 1000.0,
                "tokens": 4096, "params": 1, "non_embedding_params": 1, "val_fingerprint": "f", "val_tokens": 8,
            }
            (run / "summary.json").write_text(json.dumps(summaries[(name, seed)]))
    evaluations = pipeline.run_eval(models)
    assert set(evaluations) == set(summaries)
    for (name, seed), report in evaluations.items():
        assert json.loads((run_dir(out / "train", name, seed) / "eval.json").read_text())["tasks"] == report["tasks"]

    comparison = pipeline.compare(models, summaries, evaluations)
    for row in comparison["models"]:
        accs = [evaluations[(row["model"], s)]["tasks"][TASK]["metrics"]["acc"] for s in config.seeds]
        stats = row["eval"][f"{TASK}/acc"]
        assert stats["mean"] == pytest.approx(sum(accs) / 2) and stats["per_seed"] == {"0": accs[0], "1": accs[1]}
        assert stats["ci"] is not None and stats["ci"][0] <= stats["mean"] <= stats["ci"][1]
    assert comparison["eval"]["tasks"] == [TASK]
    markdown = (out / "comparison.md").read_text()
    assert f"{TASK}/acc" in markdown and "lm-evaluation-harness" in markdown
    assert f"{TASK}/acc" in (out / "comparison.csv").read_text().splitlines()[0]

    # a re-run keeps the evaluations made with the same options; compare alone reads them back
    stamps = {key: (run_dir(out / "train", *key) / "eval.json").stat().st_mtime_ns for key in evaluations}
    assert pipeline.run_eval(models) == evaluations
    assert stamps == {key: (run_dir(out / "train", *key) / "eval.json").stat().st_mtime_ns for key in evaluations}
    assert pipeline.evaluations(models) == evaluations
    other = Pipeline(PipelineConfig(out=str(out), extrapolate={"to": "tiny"}, baselines=[], seeds=[0, 1],
                                    eval={"tasks": [TASK], "limit": 3, "include_path": str(tasks)}))
    with pytest.raises(ConfigError, match="other eval options; run the eval stage first"):
        other.evaluations(models)


@pytest.mark.parametrize(
    "section, message",
    [({"limit": 5}, "needs 'tasks'"), ({"tasks": []}, "needs 'tasks'"), ({"tasks": ["a"], "limit": 0}, "positive"),
     ({"tasks": ["a"], "shots": 1}, "eval has unknown option(s) ['shots']")],
)
def test_bad_eval_sections_name_the_problem(section, message):
    from composer.experiments.pipeline import PipelineConfig

    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        PipelineConfig(extrapolate={"to": "tiny"}, eval=section)


GEN_DOCS = [("Once upon a time", " a quick"), ("The sky is", " blue"), ("and the dog said:", " well done"),
            ("two plus two is", " four")]
PPL_DOCS = ["Once upon a time a quick brown fox jumped over the lazy dog.", "Fish live in water; the sky is blue." * 3]


def write_generation_and_perplexity_tasks(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "gen.jsonl").write_text("".join(json.dumps({"prompt": p, "target": t}) + "\n" for p, t in GEN_DOCS))
    (directory / "ppl.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in PPL_DOCS))
    common = "dataset_path: json\ntest_split: test\n"
    (directory / "composer_test_gen.yaml").write_text(
        f"task: composer_test_gen\n{common}"
        f"dataset_kwargs:\n  data_files:\n    test: {json.dumps(str(directory / 'gen.jsonl'))}\n"
        "output_type: generate_until\n"
        'doc_to_text: "{{prompt}}"\n'
        'doc_to_target: "{{target}}"\n'
        "generation_kwargs:\n  until: [',', '.', '!']\n  max_gen_toks: 12\n  do_sample: false\n"
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n"
        "metadata:\n  version: 1.0\n"
    )
    (directory / "composer_test_ppl.yaml").write_text(
        f"task: composer_test_ppl\n{common}"
        f"dataset_kwargs:\n  data_files:\n    test: {json.dumps(str(directory / 'ppl.jsonl'))}\n"
        "output_type: loglikelihood_rolling\n"
        'doc_to_text: ""\n'
        'doc_to_target: "{{text}}"\n'
        "metric_list:\n  - metric: bits_per_byte\n    aggregation: bits_per_byte\n    higher_is_better: false\n"
        "metadata:\n  version: 1.0\n"
    )
    return directory


def test_generation_and_perplexity_tasks_run_through_lm_eval(trained, tmp_path, offline):
    """lm-eval's own request plumbing for the other two request types: exact_match of generate_until and
    bits_per_byte of loglikelihood_rolling, each against the LM's direct answers."""
    import math

    from composer.evaluation.downstream import evaluate

    model_dir, _ = trained
    tasks = write_generation_and_perplexity_tasks(tmp_path / "tasks")
    report = evaluate(model_dir, ["composer_test_gen", "composer_test_ppl"], include_path=tasks, batch_size=3)

    lm = ComposerLM(pretrained=model_dir, batch_size=1)
    gen_kwargs = {"until": [",", ".", "!"], "max_gen_toks": 12, "do_sample": False}
    outputs = lm.generate_until([Instance("generate_until", {}, (p, dict(gen_kwargs)), i)
                                 for i, (p, _) in enumerate(GEN_DOCS)])
    expected = sum(out == target for out, (_, target) in zip(outputs, GEN_DOCS, strict=True)) / len(GEN_DOCS)
    assert report["tasks"]["composer_test_gen"]["metrics"]["exact_match"] == expected
    lls = lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (t,), i) for i, t in enumerate(PPL_DOCS)])
    n_bytes = sum(len(t.encode("utf-8")) for t in PPL_DOCS)
    bits = report["tasks"]["composer_test_ppl"]["metrics"]["bits_per_byte"]
    assert bits == pytest.approx(-sum(lls) / n_bytes / math.log(2), rel=1e-5)


def test_context_continuation_boundary_with_a_bpe_tokenizer_is_lm_evals(tmp_path):
    """With merges, the continuation's tokens are those of the whole text after the context's (lm-eval's
    TemplateLM._encode_pair, called here on our tokenizer), and they are scored as such."""
    from lm_eval.api.model import TemplateLM
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator([TRAIN_TEXT], trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>", "<unk>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>").save_pretrained(str(tmp_path / "tok"))
    torch.manual_seed(0)
    model = build_model(arch().replace(vocab_size=320)).eval()
    lm = ComposerLM(model=model, tokenizer=str(tmp_path / "tok"), batch_size=3)

    class Reference:  # the attributes TemplateLM._encode_pair reads
        backend = "causal"
        tok_encode = staticmethod(lm.tok_encode)

    pairs = [("The sky is", " blue"), ("The sky is ", "blue"), ("the lazy do", "g, and"), ("Once upon a", " time")]
    for context, continuation in pairs:
        assert lm.encode_pair(context, continuation) == TemplateLM._encode_pair(Reference(), context, continuation)
    assert any(len(lm.tok_encode(c)) + len(lm.tok_encode(x)) != len(lm.tok_encode(c + x)) for c, x in pairs), \
        "some pair merges across the boundary"
    scores = lm.loglikelihood([Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)])
    for (context, continuation), (ll, _) in zip(pairs, scores, strict=True):
        ctx, cont = TemplateLM._encode_pair(Reference(), context, continuation)
        assert ll == pytest.approx(direct_loglikelihood(model, ctx, cont), abs=1e-4)
