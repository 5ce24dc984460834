"""Nothing left, nothing started, on bad input (issue 61): every check that needs no training runs before a command
makes its --out, opens a study or starts a W&B run. Each case is one line on stderr (``composer CMD: error: ...``,
naming the problem), no traceback, exit status 2 for a usage error, and the directory it ran in exactly as it was:
no --out, no config.json, study.db or wandb/ (runs that have it get ``--wandb offline``, which writes a wandb/
folder as soon as a run starts).

The inputs are written, not trained: an empty .txt, JSON lines without the text field, a directory that is not a
model, a composer train run's --out (its config.json and summary.json), an empty directory, and a model directory
with an architecture and no weights (enough for the checks, which never load weights)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from composer.cli import main

CPU_DEMO = Path(__file__).resolve().parents[3] / "recipes" / "pipeline" / "cpu-demo.yaml"


WANDB = ["--wandb", "offline"]

CASES = [
    # composer train: the user's cases, then the rest of its preflight
    ("train --arch AMX --out {out}", 2, "unknown primitive 'X'"),
    ("train --preset nope --out {out}", 2, "unknown preset 'nope'"),
    ("train --tokens 10 --out {out}", 2, "less than one step of batch_size x seq_len"),
    ("train --tokenizer nobody/bogus --out {out}", 2, "could not load tokenizer 'nobody/bogus'"),
    ("train --tokenizer {T}/notmodel --out {out}", 2, "could not load a tokenizer from"),
    ("train --tokenizer {T}/no-such-tokenizer --out {out}", 2, "does not exist"),
    ("train --data {T}/nofield.jsonl --out {out}", 2, "text field 'text' not found"),
    ("train --data {T}/nofield.jsonl --text-field nope --out {out}", 2, "text field 'nope' not found"),
    ("train --data {T}/empty.txt --out {out}", 2, "has no non-empty documents"),
    ("train --data {T}/tiny.txt --out {out}", 2, "holds 7 tokens, fewer than one sequence of seq_len + 1 = 257"),
    ("train --data {T}/missing.txt --out {out}", 2, "does not exist"),
    ("train --data {T}/emptydir --out {out}", 2, "has no .txt"),
    ("train --data {T}/table.csv --out {out}", 2, "unsupported file type"),
    ("train --batch-size 6 --micro-batch-size 4 --out {out}", 2, "must be a multiple of micro_batch_size"),
    ("train --devices 0 --out {out}", 2, "devices must be at least 1"),
    ("train --parallelism single --devices 2 --out {out}", 2, "runs on one device"),
    ("train --init-from {T}/notmodel --arch AM --out {out}", 2, "not a Composer model directory"),
    ("train --init-from {T}/trainrun --arch AM --out {out}", 2, "is a composer train run's --out"),
    ("train --init-from {T}/model --arch AMX --out {out}", 2, "unknown primitive 'X'"),
    ("train --from-search {T}/trainrun --target tiny --out {out}", 2, "this is a composer train run's --out"),
    ("train --from-search {T}/emptydir --target tiny --out {out}", 2, "this is an empty directory"),
    ("train --recipe {T}/missing.yaml --out {out}", 2, "does not exist"),
    # composer search: the user's cases (it started: config.json, study.db, a W&B run), then the rest
    ("search --budget smoke --preset tiny --data {T}/empty.txt --out {out}", 2, "has no non-empty documents"),
    ("search --budget smoke --preset tiny --tokenizer nobody/bogus --out {out}", 2, "could not load tokenizer"),
    ("search --budget smoke --preset tiny --tokenizer {T}/notmodel --out {out}", 2, "could not load a tokenizer"),
    ("search --budget smoke --preset tiny --data {T}/nofield.jsonl --out {out}", 2, "text field 'text' not found"),
    ("search --budget smoke --data {T}/missing.txt --out {out}", 2, "does not exist"),
    ("search --budget smoke --preset nope --out {out}", 2, "unknown preset 'nope'"),
    ("search --budget smoke --target nope --out {out}", 2, "unknown preset 'nope'"),
    ("search --budget nope --out {out}", 2, "unknown budget 'nope'"),
    ("search --budget smoke --primitives AX --out {out}", 2, "unknown primitive 'X'"),
    ("search --budget smoke --trials 0 --out {out}", 2, "trials must be at least 1"),
    ("search --budget smoke --precision fp7 --out {out}", 2, "--precision must be"),
    ("search --budget smoke --wandb nope --out {out}", 2, "--wandb must be one of"),
    # composer pipeline: nothing of its search runs, and no pipeline.json, on input its later stages refuse
    ("pipeline --recipe {demo} --target nope --out {out}", 2, "unknown preset 'nope'"),
    ("pipeline --recipe {demo} --budget nope --out {out}", 2, "unknown MAD budget 'nope'"),
    ("pipeline --recipe {demo} --tokens 10 --out {out}", 2, "less than one optimizer step"),
    ("pipeline --recipe {T}/empty-data.yaml --out {out}", 2, "has no non-empty documents"),
    ("pipeline --recipe {T}/nofield.yaml --out {out}", 2, "text field 'text' not found"),
    ("pipeline --recipe {demo} --from-search {T}/trainrun --out {out}", 2, "this is a composer train run's --out"),
    ("pipeline --recipe {demo} --from-search {T}/emptydir --out {out}", 2, "this is an empty directory"),
    ("pipeline --recipe {T}/missing.yaml --out {out}", 2, "does not exist"),
    ("pipeline --recipe {demo} --stages nope --out {out}", 2, "unknown stage(s) ['nope']"),
    # composer hybridize: a --from that is not a model, a pattern that does not fit it, bad data or tokens
    ("hybridize --init-from {T}/notmodel --arch AMAM --out {out}", 2, "not a Composer model directory"),
    ("hybridize --init-from {T}/trainrun --arch AMAM --out {out}", 2, "is a composer train run's --out"),
    ("hybridize --init-from {T}/missing --arch AMAM --out {out}", 2, "not a Composer model directory"),
    ("hybridize --init-from {T}/model --arch AM --out {out}", 2, "layers"),
    ("hybridize --init-from {T}/model --arch AMXM --out {out}", 2, "unknown primitive 'X'"),
    ("hybridize --init-from {T}/model --arch SMSM --data {T}/empty.txt --out {out}", 2, "has no non-empty documents"),
    ("hybridize --init-from {T}/model --arch SMSM --tokens 10 --out {out}", 2, "less than one step"),
    ("hybridize --init-from {T}/notmodel --arch SMSM --search-placement --keep 1 --out {out}", 2, "not a Composer model directory"),
    # composer eval: a --model that is not one, or settings it refuses, before --out exists
    ("eval --model {T}/notmodel --tasks recall --out {out}", 2, "expected a Composer model config"),
    ("eval --model {T}/trainrun --tasks recall --out {out}", 2, "is a composer train run's --out"),
    ("eval --model {T}/missing --tasks recall --out {out}", 2, "does not exist"),
    ("eval --model {T}/model --tasks , --out {out}", 2, "no task given"),
    ("eval --model {T}/model --tasks recall --limit 1.5 --out {out}", 2, "must be a whole number"),
    ("eval --model {T}/model --tasks recall --batch-size 0 --out {out}", 2, "--batch-size must be a positive"),
    # the commands that read a search name what they were given instead
    ("report {T}/trainrun", 2, "is a composer train run's --out"),
    ("report {T}/emptydir", 2, "is an empty directory"),
    ("report {T}/model", 2, "is a Composer model directory"),
    ("aggregate {T}/trainrun", 2, "is a composer train run's --out"),
    ("aggregate {T}/emptydir", 2, "is an empty directory"),
    ("transfer --from-search {T}/trainrun --out {out}", 2, "is a composer train run's --out"),
    # issue 69: values that were taken without a word, died in a traceback, or were refused naming no flag or fix
    ("search --budget smoke --seed -1 --out {out}", 2, "argument --seed: must be an integer from 0 to 4294967295"),
    ("train --seed -1 --out {out}", 2, "argument --seed: must be an integer from 0 to 4294967295"),
    ("generate --model {T}/model --prompt hi --seed -1", 2, "argument --seed: must be an integer from 0"),
    ("bench-inference AM --preset tiny --seed -1 --out {out}", 2, "argument --seed: must be an integer from 0"),
    ("search --recipe {T}/seed.yaml --out {out}", 2, "seed must be an integer from 0 to 4294967295, got -1"),
    ("search --budget smoke --min-share A=0.2,A=0.5 --out {out}", 2,
     "--min-share A=0.2,A=0.5 gives A twice (0.2 and 0.5): give each primitive one share"),
    ("train --warmup 2.5 --out {out}", 2, "warmup must be a fraction of the steps below 1 (e.g. 0.05) or a whole "
                                          "number of steps (e.g. 100), got 2.5"),
    ("train --checkpoint-interval 0 --out {out}", 2, "checkpoint_interval must be a number of optimizer steps, 1 or "
                                                     "more"),
    ("train --resume --out {out}", 2, "--resume: --out {out} does not exist, so there is nothing to resume"),
    ("train --resume --out {T}/emptydir", 2, "--out {T}/emptydir holds no checkpoint (checkpoints/step-*.ckpt), so "
                                             "there is nothing to resume"),
    ("hybridize --init-from {T}/model --arch SMSM --resume --out {out}", 2, "nothing to resume"),
    ("search --budget smoke --depth-at-target 0 --out {out}", 2, "argument --depth-at-target: must be a number of "
                                                                  "layers, 1 or more (e.g. 16), or a family's name"),
    ("search --budget smoke --resume --out {out}", 2, "run the same command without --resume: a search resumes"),
    ("info AM --dep 8", 2, "unrecognized arguments: --dep 8; flags are spelt out in full: did you mean "
                           "--depth-at-target or --deployed-at?"),
    ("search --budget smoke --preset tiny --preset demo-4m --out {out}", 2, "--preset given twice with different"),
    ("search --budget smoke --preset tiny --wid demo-4m --out {out}", 2, "unrecognized arguments: --wid demo-4m"),
    ("train --recipe {T}/lots.yaml --out {out}", 2, "recipe '{T}/lots.yaml': tokens is 'lots', expected a whole "
                                                    "number"),
    ("train --recipe {T}/exponent.yaml --out {out}", 2, "lr is '3e-3', expected a number (YAML reads 3e-3 as text: "
                                                        "write 0.003)"),
    ("search --recipe {T}/many.yaml --out {out}", 2, "trials is 'many', expected a whole number"),
    ("hybridize --recipe {T}/hybrid.yaml", 2, "tokens is 'lots', expected a whole number"),
    ("pipeline --recipe {T}/beta.yaml --out {out}", 2, "pipeline section 'train': beta1 is 'high', expected a number"),
    # issue 69. A device this machine lacks (the fixture's machine has no GPU), in every command that takes one
    ("train --device cuda --out {out}", 2, "--device cuda, but CUDA has no GPU on this machine; use --device cpu"),
    ("train --device gpu --out {out}", 2, "--device gpu, but CUDA has no GPU on this machine"),
    ("train --device mps --out {out}", 2, "--device mps, but MPS (Apple's GPU) is not available on this machine"),
    ("hybridize --init-from {T}/model --arch SMSM --device cuda --out {out}", 2, "--device cuda, but CUDA has no GPU"),
    ("hybridize --init-from {T}/model --arch SMSM --search-placement --keep 1 --device cuda --out {out}", 2,
     "--device cuda, but CUDA has no GPU"),
    ("eval --model {T}/model --tasks recall --device cuda --out {out}", 2, "--device cuda, but CUDA has no GPU"),
    ("eval --model {T}/model --tasks recall --device tpu --out {out}", 2,
     "--device must be auto, cpu, cuda (or gpu), cuda:N or mps; got 'tpu'"),
    ("generate --model {T}/model --prompt hello --device cuda:1", 2, "--device cuda:1, but CUDA has no GPU"),
    ("bench-inference demo-4m --device gpu --out {out}", 2, "--device gpu, but CUDA has no GPU"),
    # sizes: what the run would need against the free memory (the fixture's machine has 4 GiB free), before
    # anything is allocated
    ("train --arch (AM)x999 --out {out}", 2, "but the CPU has 4.0 GiB free: lower --micro-batch-size or --seq-len, "
                                            "add --activation-checkpointing"),
    ("bench-inference demo-4m --context-lengths 10000000 --out {out}", 2,
     "batch 4 at context 10,000,000 of (AM)x8 needs at least"),
    ("bench-inference (AM)x2 --batch-sizes 100000 --no-baseline --out {out}", 2, "shorten --context-lengths or "
                                                                                 "lower --batch-sizes"),
    # settings refused before --out exists: they left an empty --out, or config.json after progress lines
    ("train --val-fraction 1.5 --out {out}", 2, "val_fraction (--val-fraction) must be the share of documents held "
                                                "out, in [0, 1)"),
    ('train --arch AW --options {{"W":{{"windw":16}}}} --out {out}', 2,
     "unknown option 'windw' for primitive W (sliding_window_attention) in --options; valid: backend, window"),
    ("search --budget smoke --preset tiny --storage postgresql://nobody:secret@127.0.0.1:1/db --out {out}", 2,
     "cannot reach --storage 'postgresql://nobody:***@127.0.0.1:1/db'"),
    ("search --budget smoke --preset tiny --storage {T}/empty.txt/study.log --out {out}", 2,
     "--storage's directory"),
    ("train --out {T}/empty.txt", 2, "--out '{T}/empty.txt' is a file, not a directory"),
    ("train --out {T}/empty.txt/run", 2, "cannot be created: '{T}/empty.txt' is a file"),
    ("hybridize --init-from {T}/model --arch SMSM --out {T}/empty.txt", 2, "is a file, not a directory"),
    ("search --budget smoke --preset tiny --out {T}/empty.txt", 2, "--out '{T}/empty.txt' is a file"),
    ("pipeline --recipe {demo} --out {T}/empty.txt", 2, "--out '{T}/empty.txt' is a file"),
    ("pipeline --recipe {T}/eval-on-cuda.yaml --out {out}", 2, "eval's device cuda, but CUDA has no GPU"),
    ("eval --model {T}/model --tasks recall --out {T}/empty.txt", 2, "--out '{T}/empty.txt' is a file"),
    ("bench-inference demo-4m --out {T}/empty.txt", 2, "--out '{T}/empty.txt' is a file"),
    ("train --data {T}/malformed.jsonl --out {out}", 2, "malformed.jsonl' line 3 is not valid JSON (Expecting "
                                                        "value at column 10); fix or remove that line"),
]
WITH_WANDB = ("train", "search", "hybridize")


@pytest.fixture
def inputs(tmp_path, monkeypatch) -> Path:
    """The bad (and one good) inputs, in ``tmp_path``, which is also the working directory; offline."""
    import datasets.config
    import huggingface_hub.constants

    from composer.presets import get_preset

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # nobody/bogus fails at once
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    # a machine without a GPU and with 4 GiB free, whatever machine runs the tests
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    for module in ("composer.training.memory", "composer.evaluation.bench_inference"):
        monkeypatch.setattr(f"{module}.available_memory_bytes", lambda device: 4 << 30)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "tiny.txt").write_text("a\n\nb\n\nc\n")  # text, but not one sequence of it
    (tmp_path / "nofield.jsonl").write_text('{"body": "hello world"}\n' * 3)
    (tmp_path / "malformed.jsonl").write_text('{"text": "hello"}\n\n{"text": broken}\n{"text": "world"}\n')
    (tmp_path / "table.csv").write_text("text\nhello\n")
    (tmp_path / "emptydir").mkdir()
    (tmp_path / "notmodel").mkdir()
    (tmp_path / "notmodel" / "notes.txt").write_text("not a model")
    run = tmp_path / "trainrun"  # what composer train writes to its --out before its model
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"train": {"arch": "AM", "preset": "tiny"}, "arch": {}, "plan": {}}))
    (run / "summary.json").write_text(json.dumps({"val_loss": 3.0}))
    model = tmp_path / "model"  # a 4-layer model's directory, weights left out: no check loads them
    model.mkdir()
    arch = get_preset("tiny").arch.replace(pattern="AMAM", vocab_size=512)
    (model / "config.json").write_text(json.dumps({"arch": arch.to_dict(), "tokenizer": "bytes"}))
    recipes = {"lots": "tokens: lots\n", "exponent": "lr: 3e-3\n", "many": "trials: many\n", "seed": "seed: -1\n",
               "hybrid": f"init_from: {model}\narch: SMSM\nout: out\ntokens: lots\n"}
    for name, text in recipes.items():  # a value of the wrong type, in each kind of recipe
        (tmp_path / f"{name}.yaml").write_text(text)
    demo = CPU_DEMO.read_text()
    (tmp_path / "beta.yaml").write_text(demo.replace("train:\n", "train:\n  beta1: high\n", 1))
    for name, data in (("empty-data", "empty.txt"), ("nofield", "nofield.jsonl")):
        (tmp_path / f"{name}.yaml").write_text(demo.replace("train:\n", f"train:\n  data: {tmp_path / data}\n", 1))
    (tmp_path / "eval-on-cuda.yaml").write_text(demo + "\neval:\n  tasks: [arc_easy]\n  device: cuda\n")
    return tmp_path


def tree(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


@pytest.mark.parametrize("line, code, message", CASES, ids=[case[0] for case in CASES])
def test_bad_input_is_one_line_and_leaves_nothing(inputs, capfd, line, code, message):
    fields = {"T": inputs, "out": inputs / "out", "demo": CPU_DEMO}
    argv = [word.format(**fields) for word in line.split()]
    command = argv[0]
    if command in WITH_WANDB and "--wandb" not in argv:
        argv += WANDB
    before = tree(inputs)
    try:
        status = main(argv)
    except SystemExit as stopped:
        status = stopped.code
    captured = capfd.readouterr()
    err = captured.err.strip()
    assert status == code, err
    assert "Traceback" not in captured.err, err
    assert err.count("\n") == 0 and err.startswith(f"composer {command}: error: "), err
    assert message.format(**fields) in err, err
    assert not (inputs / "out").exists(), f"--out was left: {sorted(tree(inputs) - before)}"
    assert not list(inputs.rglob("wandb")), "a W&B run started"
    assert tree(inputs) == before, f"written: {sorted(tree(inputs) - before)}"


def test_there_are_at_least_40_cases_over_the_commands():
    assert len(CASES) >= 40
    assert {case[0].split()[0] for case in CASES} >= {"train", "search", "pipeline", "hybridize", "eval"}


READ_ONLY_CASES = [
    "train --out {out}",
    "hybridize --init-from {T}/model --arch SMSM --out {out}",
    "search --budget smoke --preset tiny --out {out}",
    "pipeline --recipe {demo} --out {out}",
    "eval --model {T}/model --tasks recall --out {out}",
    "bench-inference demo-4m --out {out}",
]


@pytest.mark.parametrize("line", READ_ONLY_CASES)
def test_a_read_only_out_is_one_line_and_leaves_nothing(inputs, capfd, monkeypatch, line):
    """--out inside a directory this user may not write (issue 69: the commands failed after 1-5 progress lines).
    Root may write anywhere, so where the tests run as root the directory is made read-only in the check's own view
    (``os.access``), as a read-only mount would be."""
    import os

    locked = inputs / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, *args, **kwargs: False if Path(path) == locked
                        else real_access(path, mode, *args, **kwargs))
    fields = {"T": inputs, "out": locked / "out", "demo": CPU_DEMO}
    argv = [word.format(**fields) for word in line.split()] + (WANDB if line.split()[0] in WITH_WANDB else [])
    before = tree(inputs)
    try:
        status = main(argv)
    except SystemExit as stopped:
        status = stopped.code
    err = capfd.readouterr().err.strip()
    assert status == 2, err
    assert err.count("\n") == 0 and err.startswith(f"composer {argv[0]}: error: "), err
    assert f"--out '{locked / 'out'}' cannot be written: no write permission on '{locked}'" in err, err
    locked.chmod(0o755)
    assert tree(inputs) == before, f"written: {sorted(tree(inputs) - before)}"
