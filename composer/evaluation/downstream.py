"""Downstream (zero-/few-shot) evaluation of a trained model through lm-evaluation-harness.

Why: the paper compares architectures on ARC-Easy/Challenge, HellaSwag, PIQA, Winogrande and more, not only on
validation loss. lm-evaluation-harness (``pip install 'composer-hnas[eval]'``) owns the tasks, their prompts,
their metrics and their standard errors; this module only teaches it to score text with a
:class:`~composer.model.ComposerModel`:

* :class:`ComposerLM` is an ``lm_eval.api.model.LM`` (registered as ``"composer"``) with the three request
  types. ``loglikelihood`` encodes a (context, continuation) pair exactly as lm-eval's ``HFLM`` does (trailing
  spaces of the context move to the continuation; the continuation's tokens are those of ``context +
  continuation`` after the context's; an empty context becomes the prefix token), scores the continuation
  tokens with the logits of the positions before them, and says whether each was the greedy choice. Requests
  are batched longest first with right padding, which is exact for a causal model (a position never sees the
  padding after it; no primitive drops tokens). ``loglikelihood_rolling`` scores a whole text in disjoint
  windows of ``max_seq_len`` tokens with lm-eval's own windowing. ``generate_until`` decodes with the model's
  incremental cache (:meth:`ComposerModel.init_cache`; prefill once, one token per step), stopping at any
  stop string, EOS or ``max_gen_toks``; requests whose prompts have the same length are decoded together.
* :func:`evaluate` loads a model directory written by ``composer train`` (``<out>/model``), finds the
  tokenizer it was trained with (:func:`composer.interop.export.find_tokenizer`), runs ``lm_eval.simple_evaluate`` and
  returns the report ``composer eval`` writes as ``eval.json``: per task, every metric with its standard
  error, plus the configuration and the versions that produced them.

The prefix token (what precedes a text with no context) is the tokenizer's EOS: Composer trains on documents
separated by EOS and never adds a BOS, so EOS is what the model has seen before the start of a document.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from composer.errors import ComposerUsageError, ConfigError
from composer.evaluation.loading import check_model_dir, find_model_tokenizer, load_model
from composer.precision import resolve_device

INSTALL_HINT = "pip install 'composer-hnas[eval]'"
MODEL_NAME = "composer"  # the name ComposerLM is registered under in lm_eval's model registry
DEFAULT_MAX_GEN_TOKS = 256


def require_lm_eval() -> Any:
    """The ``lm_eval`` module, or a one-line usage error saying how to install it."""
    try:
        import lm_eval
    except ImportError as err:
        raise ComposerUsageError(
            f"downstream evaluation needs lm-evaluation-harness, which is not installed ({err}): "
            f"{INSTALL_HINT}"
        ) from None
    return lm_eval


require_lm_eval()  # importing this module without lm-eval fails with the install hint, not a traceback

from lm_eval.api.model import LM  # noqa: E402

try:  # lm-eval keeps its windowing helpers here (0.4.x)
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window  # noqa: E402
except ImportError:  # pragma: no cover - a later lm-eval that moved them
    from lm_eval.models.utils import (  # type: ignore # noqa: E402
        get_rolling_token_windows,
        make_disjoint_window,
    )


class ComposerLM(LM):
    """A :class:`~composer.model.ComposerModel` as an lm-evaluation-harness language model.

    Give either ``pretrained`` (a model directory, as ``composer train`` writes to ``<out>/model``; the form
    ``lm_eval --model composer --model_args pretrained=DIR`` uses once this module is imported) or a built
    ``model``. ``tokenizer`` is a Composer tokenizer spec (``"bytes"``, a Hugging Face name or directory) or
    an object with ``encode_batch``/``decode``/``eos_id``; by default the one recorded with ``pretrained``.
    """

    def __init__(
        self,
        pretrained: str | Path | None = None,
        model: Any = None,
        tokenizer: Any = None,
        batch_size: int | str = 8,
        device: str | torch.device = "cpu",
        max_length: int | None = None,
        max_gen_toks: int = DEFAULT_MAX_GEN_TOKS,
        **_: Any,
    ) -> None:
        super().__init__()
        if (pretrained is None) == (model is None):
            raise ConfigError("ComposerLM needs exactly one of pretrained (a model directory) or model")
        self._device = torch.device(device)
        tokenizer_source = "given"
        if model is None:
            model = load_model(pretrained, self.device)
            if tokenizer is None:
                tokenizer, tokenizer_source = find_model_tokenizer(Path(pretrained))
        else:
            model = model.to(self.device)
        if tokenizer is None:
            raise ConfigError("no tokenizer given for the model: pass a tokenizer (e.g. 'bytes')")
        if isinstance(tokenizer, str):
            from composer.data.tokenizer import load_tokenizer

            tokenizer = load_tokenizer(tokenizer)
        vocab = getattr(tokenizer, "vocab_size", None)
        if vocab is not None and vocab > model.arch.vocab_size:
            raise ConfigError(
                f"tokenizer {getattr(tokenizer, 'name', tokenizer)!r} has {vocab:,} ids but the model only "
                f"{model.arch.vocab_size:,}: not the tokenizer it was trained with (pass it with --tokenizer)"
            )
        self.model = model.eval()
        self.tok = tokenizer  # not `self.tokenizer`: lm-eval reads HF tokenizer attributes from that name
        self.tokenizer_source = tokenizer_source
        self.batch_size = _positive_int(batch_size, "batch size")
        self.max_length = int(max_length or model.arch.max_seq_len)
        self.max_gen_toks = int(max_gen_toks)
        self.prefix_token_id = int(tokenizer.eos_id)

    @property
    def device(self) -> torch.device:
        return self._device

    # -- tokens ----------------------------------------------------------------------------------------------
    @property
    def tokenizer_name(self) -> str:
        return str(getattr(self.tok, "name", type(self.tok).__name__)).replace("/", "__")

    @property
    def eot_token_id(self) -> int:
        return int(self.tok.eos_id)

    def tok_encode(self, text: str) -> list[int]:
        return list(self.tok.encode_batch([text])[0])

    def tok_decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; ids the tokenizer lacks (a model vocabulary rounded up past it) are dropped."""
        vocab = getattr(self.tok, "vocab_size", None)
        return self.tok.decode([int(i) for i in ids if vocab is None or 0 <= int(i) < vocab])

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Context and continuation tokens as lm-eval's HFLM makes them: trailing spaces of the context go to
        the continuation, and the continuation's tokens are those of the whole text after the context's (so a
        BPE merge across the boundary is scored as the continuation)."""
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces > 0:
            continuation = context[-n_spaces:] + continuation
            context = context[:-n_spaces]
        whole = self.tok_encode(context + continuation)
        context_ids = self.tok_encode(context)
        return context_ids, whole[len(context_ids):]

    # -- loglikelihood ---------------------------------------------------------------------------------------
    def loglikelihood(self, requests: Iterable[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        pairs = []
        for context, continuation in (_args(r) for r in requests):
            if context == "":
                tokens = self.tok_encode(continuation)
                if len(tokens) > 1 and tokens[0] == self.prefix_token_id:  # it starts with it already
                    pairs.append((tokens[:1], tokens[1:]))
                else:
                    pairs.append(([self.prefix_token_id], tokens))
            else:
                pairs.append(self.encode_pair(context, continuation))
        return self.loglikelihood_tokens(pairs)

    def loglikelihood_rolling(self, requests: Iterable[Any], disable_tqdm: bool = False) -> list[float]:
        windows, owner = [], []
        for index, request in enumerate(requests):
            (text,) = _args(request)[:1]
            for window in rolling_windows(self.tok_encode(text), self.prefix_token_id, self.max_length):
                windows.append(window)
                owner.append(index)
        scores = self.loglikelihood_tokens(windows)
        totals = [0.0] * (max(owner) + 1 if owner else 0)
        for index, (logprob, _) in zip(owner, scores, strict=True):
            totals[index] += logprob
        return totals

    @torch.no_grad()
    def loglikelihood_tokens(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        """``(sum of log p(continuation | context), every continuation token greedy)`` for each pair.

        The model reads ``(context + continuation)[-(max_length + 1):][:-1]`` (lm-eval's truncation: the left
        of a long context is dropped) and continuation token ``i`` is scored by the logits of the position
        before it. Longest first, in batches of ``batch_size`` right-padded rows; the LM head runs only on the
        scored positions. Identical pairs are computed once.
        """
        results: list[tuple[float, bool] | None] = [None] * len(pairs)
        unique: dict[tuple[tuple[int, ...], tuple[int, ...]], list[int]] = {}
        for index, (context, continuation) in enumerate(pairs):
            if not continuation:
                raise ValueError("loglikelihood of an empty continuation")
            unique.setdefault((tuple(context), tuple(continuation)), []).append(index)
        keys = sorted(unique, key=lambda k: -(len(k[0]) + len(k[1])))
        for start in range(0, len(keys), self.batch_size):
            batch = keys[start:start + self.batch_size]
            inputs, spans = [], []
            for context, continuation in batch:
                whole = (context + continuation)[-(self.max_length + 1):][:-1]
                n_cont = min(len(continuation), len(whole))  # a continuation longer than the window: cut left
                inputs.append(whole)
                spans.append((len(whole) - n_cont, len(whole), list(continuation[-n_cont:])))
            width = max(len(ids) for ids in inputs)
            ids = torch.zeros(len(inputs), width, dtype=torch.long)
            for row, seq in enumerate(inputs):
                ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            hidden = self.model.hidden_states(ids.to(self.device))
            picked = torch.cat([hidden[row, lo:hi] for row, (lo, hi, _) in enumerate(spans)])
            logprobs = F.log_softmax(self.model.logits_and_loss(picked[None], None)[0][0].float(), dim=-1)
            targets = torch.tensor([t for _, _, cont in spans for t in cont], device=logprobs.device)
            token_lp = logprobs.gather(-1, targets[:, None]).squeeze(-1)
            greedy = logprobs.argmax(dim=-1) == targets
            offset = 0
            for key, (lo, hi, _) in zip(batch, spans, strict=True):
                n = hi - lo
                result = (float(token_lp[offset:offset + n].sum()), bool(greedy[offset:offset + n].all()))
                offset += n
                for index in unique[key]:
                    results[index] = result
        return results  # type: ignore[return-value]

    # -- generation ------------------------------------------------------------------------------------------
    @torch.no_grad()
    def generate_until(self, requests: Iterable[Any], disable_tqdm: bool = False) -> list[str]:
        """Decode each context until a stop string (``until``), EOS or ``max_gen_toks`` tokens; greedy unless
        ``do_sample`` (then ``temperature``/``top_k``/``top_p``). The returned text stops before the first
        stop string. Requests with equal prompt length and options are decoded as one batch through one
        cache."""
        prepared = []
        for context, gen_kwargs in (_args(r) for r in requests):
            options = dict(gen_kwargs or {})
            until = options.pop("until", None)
            until = [until] if isinstance(until, str) else list(until or [])
            eos_text = self.tok_decode([self.eot_token_id])
            if eos_text and eos_text not in until:
                until.append(eos_text)
            max_gen = int(options.pop("max_gen_toks", self.max_gen_toks))
            max_gen = max(1, min(max_gen, self.max_length - 1))
            sample = bool(options.pop("do_sample", False))
            temperature = float(options.pop("temperature", 0.0)) if sample else 0.0
            if sample and temperature == 0.0:
                temperature = 1.0
            top_k = options.pop("top_k", None) if sample else None
            top_p = options.pop("top_p", None) if sample else None
            ids = self.tok_encode(context) or [self.prefix_token_id]
            ids = ids[-(self.max_length - max_gen):]
            prepared.append((ids, tuple(until), max_gen, temperature, top_k, top_p))
        results: list[str | None] = [None] * len(prepared)
        groups: dict[tuple, list[int]] = {}
        for index, (ids, *options) in enumerate(prepared):
            groups.setdefault((len(ids), *options), []).append(index)
        for (_, until, max_gen, temperature, top_k, top_p), members in groups.items():
            for start in range(0, len(members), self.batch_size):
                chunk = members[start:start + self.batch_size]
                prompts = torch.tensor([prepared[i][0] for i in chunk], dtype=torch.long, device=self.device)
                texts = self.generate_batch(prompts, list(until), max_gen, temperature, top_k, top_p)
                for index, text in zip(chunk, texts, strict=True):
                    results[index] = text
        return results  # type: ignore[return-value]

    def generate_batch(
        self,
        prompts: torch.Tensor,
        until: list[str],
        max_gen: int,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
    ) -> list[str]:
        """Continue ``prompts [batch, len]`` (equal lengths) through one inference cache: prefill, then one
        token per step; each row stops at its first stop string or EOS, the loop when every row has."""
        from composer.inference import stream

        batch = prompts.shape[0]
        generated: list[list[int]] = [[] for _ in range(batch)]
        texts = [""] * batch
        done = [False] * batch
        for tokens in stream(self.model, prompts, max_gen, temperature, top_k, top_p, eos=self.eot_token_id):
            for row, token in enumerate(tokens.tolist()):
                if done[row]:
                    continue
                if token == self.eot_token_id:
                    done[row] = True
                    continue
                generated[row].append(int(token))
                texts[row] = self.tok_decode(generated[row])
                if any(stop in texts[row] for stop in until if stop):
                    done[row] = True
            if all(done):
                break
        return [cut_at_stop(text, until) for text in texts]


def cut_at_stop(text: str, until: Sequence[str]) -> str:
    """``text`` up to (not including) the first occurrence of any stop string (lm-eval's rule)."""
    for stop in until:
        if stop:
            text = text.split(stop)[0]
    return text


def rolling_windows(
    tokens: list[int], prefix_token: int, max_length: int
) -> list[tuple[list[int], list[int]]]:
    """Disjoint (context, continuation) windows that score every token of ``tokens`` once, each with up to
    ``max_length`` tokens of input; the first token is predicted from ``prefix_token`` (lm-eval's
    windowing)."""
    return [make_disjoint_window(window) for window in get_rolling_token_windows(
        token_list=tokens, prefix_token=prefix_token, max_seq_len=max_length, context_len=1)]


def _args(request: Any) -> tuple:
    return tuple(request.args) if hasattr(request, "args") else tuple(request)


def _positive_int(value: Any, what: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must be a positive integer, got {value!r}") from None
    if number < 1:
        raise ConfigError(f"{what} must be a positive integer, got {value!r}")
    return number


def _register() -> None:
    """Register :class:`ComposerLM` as ``"composer"`` in lm-eval's model registry (once)."""
    from lm_eval.api import registry

    try:
        if registry.get_model(MODEL_NAME) is ComposerLM:
            return
    except (KeyError, ValueError, AttributeError):  # not registered yet (the error differs across versions)
        pass
    try:
        registry.register_model(MODEL_NAME)(ComposerLM)
    except (AssertionError, ValueError, KeyError):  # pragma: no cover - the name is taken by another class
        pass


_register()


# -- the evaluation ------------------------------------------------------------------------------------------
def task_manager(
    include_path: str | Path | Sequence[str | Path] | None = None, tasks: Sequence[str] | None = None
) -> Any:
    """lm-eval's ``TaskManager`` over its own tasks plus ``include_path``.

    Indexing lm-eval's few thousand task YAMLs takes seconds; when every name in ``tasks`` is a plain task of
    ``include_path``, the manager indexes ``include_path`` alone.
    """
    from lm_eval.tasks import TaskManager

    paths = [include_path] if isinstance(include_path, (str, Path)) else list(include_path or [])
    for path in paths:
        if not Path(path).is_dir():
            raise ConfigError(f"--include-path {str(path)!r} is not a directory of task YAML files")
    include = [str(p) for p in paths] or None
    include = include[0] if include and len(include) == 1 else include
    if include and tasks:
        try:
            local = TaskManager(include_path=include, include_defaults=False)
        except TypeError:  # an lm-eval without include_defaults
            local = None
        if local is not None and set(t.strip() for t in tasks) <= set(local.all_subtasks):
            return local
    return TaskManager(include_path=include)


def check_tasks(manager: Any, tasks: Sequence[str]) -> list[str]:
    """``tasks`` as lm-eval resolves them; unknown names fail in one line with lm-eval's hint."""
    tasks = [t.strip() for t in tasks if t and t.strip()]
    if not tasks:
        raise ConfigError("no task given: pass --tasks with comma-separated lm-eval task names "
                          "(e.g. arc_easy)")
    known = set(manager.all_tasks)
    missing = [t for t in tasks if t not in known and not manager.match_tasks([t])]
    if missing:
        raise ConfigError(
            f"Tasks not found: {', '.join(missing)}. Try `lm-eval --tasks list` for the list of available "
            "tasks, or --include-path DIR for a folder of your own task YAMLs"
        )
    return tasks


def evaluate(
    model_dir: str | Path,
    tasks: Sequence[str],
    *,
    include_path: str | Path | Sequence[str | Path] | None = None,
    limit: int | float | None = None,
    batch_size: int = 8,
    device: str = "cpu",
    tokenizer: str | None = None,
    num_fewshot: int | None = None,
    seed: int = 1234,
    bootstrap_iters: int = 100_000,
    manager: Any = None,
) -> dict[str, Any]:
    """Run lm-eval ``tasks`` on the model in ``model_dir``; the report ``composer eval`` writes (module doc).

    ``manager``: a ``TaskManager`` to reuse (from :func:`task_manager`; it must know ``tasks``)."""
    import lm_eval

    if limit is not None and not limit > 0:
        raise ConfigError(f"--limit must be positive, got {limit}")
    model_dir = Path(model_dir)
    check_model_dir(model_dir)
    manager = task_manager(include_path, tasks) if manager is None else manager
    tasks = check_tasks(manager, tasks)
    device = str(resolve_device(device))  # the report records it as torch names it
    lm = ComposerLM(pretrained=model_dir, tokenizer=tokenizer, batch_size=batch_size, device=device)
    started = time.perf_counter()
    try:
        results = lm_eval.simple_evaluate(
            model=lm, tasks=list(tasks), num_fewshot=num_fewshot, limit=limit, task_manager=manager,
            log_samples=False, bootstrap_iters=bootstrap_iters, random_seed=seed, numpy_random_seed=seed,
            torch_random_seed=seed, fewshot_random_seed=seed,
        )
    except OSError as err:  # a task's data: hub unreachable (ConnectionError), a missing local file, ...
        from composer.data.errors import describe

        raise ConfigError(
            f"could not load the data of {', '.join(tasks)} ({describe(err)}); lm-eval downloads task "
            "datasets from the Hugging Face hub: check network access, or evaluate local tasks with "
            "--include-path"
        ) from None
    elapsed = time.perf_counter() - started
    return build_report(results, lm, model_dir, tasks=list(tasks), include_path=include_path, limit=limit,
                        batch_size=batch_size, device=device, num_fewshot=num_fewshot, seed=seed,
                        elapsed_s=elapsed)


def metrics_of(task_results: dict[str, Any]) -> dict[str, float | None]:
    """lm-eval's ``{"acc,none": x, "acc_stderr,none": s, "alias": ...}`` as ``{"acc": x, "acc_stderr": s}``
    (a filter other than ``none`` stays in the name: ``exact_match,strict-match``)."""
    metrics: dict[str, float | None] = {}
    for key, value in task_results.items():
        if "," not in key:
            continue
        metric, _, filter_name = key.partition(",")
        name = metric if filter_name == "none" else f"{metric},{filter_name}"
        metrics[name] = _finite(value)
    return metrics


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):  # lm-eval writes "N/A" for a stderr it did not compute
        return None
    return number if math.isfinite(number) else None


def build_report(results: dict[str, Any], lm: ComposerLM, model_dir: Path, **config: Any) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    n_samples = results.get("n-samples", {})
    tasks = {}
    for name, values in results.get("results", {}).items():
        samples = n_samples.get(name, {})
        tasks[name] = {
            "alias": str(values.get("alias", name)).strip(" -"),
            "metrics": metrics_of(values),
            "n": samples.get("effective"),
            "n_total": samples.get("original"),
            "num_fewshot": results.get("n-shot", {}).get(name),
            "higher_is_better": results.get("higher_is_better", {}).get(name, {}),
        }
    groups = {name: metrics_of(values) for name, values in results.get("groups", {}).items()}
    include_path = config.pop("include_path")
    if include_path is not None:
        include_path = [str(Path(p).resolve()) for p in
                        ([include_path] if isinstance(include_path, (str, Path)) else include_path)]
    arch = lm.model.arch
    return {
        "model": str(model_dir.resolve()),
        "pattern": arch.compact,
        "params": sum(p.numel() for p in lm.model.parameters()),
        "tokenizer": {"name": lm.tokenizer_name, "source": lm.tokenizer_source},
        "tasks": tasks,
        "groups": groups,
        "config": {**config, "include_path": include_path, "max_length": lm.max_length,
                   "elapsed_s": config.pop("elapsed_s")},
        "task_versions": results.get("versions", {}),
        "versions": {"composer-hnas": installed("composer-hnas"), "lm_eval": installed("lm_eval"),
                     "torch": torch.__version__, "datasets": installed("datasets"),
                     "transformers": installed("transformers")},
    }


def report_rows(report: dict[str, Any]) -> list[list[str]]:
    """Table rows (task, metric, value, ± stderr, n) of a report."""
    rows = []
    for name, task in report["tasks"].items():
        metrics = task["metrics"]
        for metric, value in metrics.items():
            if "_stderr" in metric:
                continue
            stderr_name = metric.replace(",", "_stderr,", 1) if "," in metric else f"{metric}_stderr"
            stderr = metrics.get(stderr_name)
            rows.append([name, metric, "n/a" if value is None else f"{value:.4f}",
                         "" if stderr is None else f"± {stderr:.4f}",
                         "" if task["n"] is None else str(task["n"])])
    return rows


__all__ = ["INSTALL_HINT", "MODEL_NAME", "ComposerLM", "check_tasks", "cut_at_stop", "evaluate", "load_model",
           "metrics_of", "report_rows", "require_lm_eval", "rolling_windows", "task_manager"]
