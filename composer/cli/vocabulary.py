"""One name per meaning across the subcommands: every flag ``composer CMD --help`` shows, what it means, and the
commands that take it.

Why: a newcomer met the size a search's answer grows to as ``--target`` on ``extrapolate`` and ``--preset`` on
``train``, the growth rule as ``--attention-at-target`` and ``--attention``, a device as ``--device`` and
``--accelerator``, a number format as ``--precision`` and ``--dtype`` (issue 61). The names are decided here once;
``tests/composer/cli/test_vocabulary.py`` walks every subcommand's parser and fails when a flag is missing from this
table, when one name means two things or one meaning has two names, and when docs/usage/vocabulary.md is not this
table. The old spellings (``was``) still work: each prints one line naming its new flag (``RenamedFlag``).

Run ``python -m composer.cli.vocabulary`` to print the table docs/usage/vocabulary.md holds.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    """A flag, the one thing it means, the commands that take it, and its old spellings (still accepted)."""

    flag: str
    meaning: str
    commands: tuple[str, ...]
    was: tuple[str, ...] = ()


ALL = ("search", "report", "aggregate", "extrapolate", "train", "pipeline", "transfer", "info", "presets",
       "families", "import", "hybridize", "export", "eval", "generate", "bench-inference")

# The meanings the issue found split over several names come first; then the rest, shared ones before each command's
# own. Meanings are written so that no two terms share one.
TERMS: tuple[Term, ...] = (
    # where a model goes and how it gets there
    Term("--target", "the preset a searched pattern or a search's answer grows to: its size and widths",
         ("search", "extrapolate", "train", "pipeline", "transfer"), was=("--to", "train --preset with --from-search")),
    Term("--preset", "the preset whose widths the model(s) this command builds are built at",
         ("search", "train", "info", "families", "bench-inference"), was=("search --widths",)),
    Term("--attention-at-target", "the growth rule: how a pattern's attention layers grow to the target (repeat, keep)",
         ("search", "extrapolate", "train", "pipeline", "transfer", "info"), was=("--attention",)),
    Term("--depth-at-target", "the model at the target has exactly N layers (or a family's depth), grown by width",
         ("search", "extrapolate", "train", "info"), was=("--depth",)),
    Term("--from-search", "the composer search (its --out) whose answer or ranking this command reads",
         ("extrapolate", "train", "pipeline", "transfer"), was=("transfer --search",)),
    # where it runs and in what number format
    Term("--device", "the hardware a command runs on: auto, cpu, cuda (gpu), cuda:N",
         ("train", "hybridize", "eval", "generate", "bench-inference"), was=("--accelerator",)),
    Term("--devices", "how many devices a training run spreads over", ("train", "hybridize")),
    Term("--cost-device", "the device a cost is predicted for by the cost model (cpu, h100, h200)",
         ("search", "extrapolate", "train", "info"), was=("info --device",)),
    Term("--equal-cost", "the growth to equal cost: every model as wide as a family's cost allows, not its size",
         ("search", "extrapolate", "train", "info")),
    Term("--deployed-at", "the preset the answer will be deployed at, where its cost is taken",
         ("search", "extrapolate", "train", "info")),
    Term("--equal-cost-figure", "the cost held equal: decode at batch 1, training, or both",
         ("search", "extrapolate", "train", "info")),
    Term("--precision", "the number format a command trains, runs or writes weights in (fp32, bf16, ...)",
         ("search", "train", "transfer", "import", "hybridize", "bench-inference"), was=("--dtype",)),
    Term("--cache-precision", "the number format of the inference cache's elements", ("info",),
         was=("--cache-dtype",)),
    # temperatures
    Term("--distill-temperature", "temperature of the distillation KL", ("train", "hybridize"),
         was=("hybridize --temperature",)),
    Term("--temperature", "sampling temperature of generated text", ("generate",)),
    # the model a command starts from or reads
    Term("--init-from", "the model whose weights a training run starts from", ("train", "hybridize"),
         was=("hybridize --from",)),
    Term("--model", "the trained model directory a command reads", ("export", "eval", "generate", "bench-inference")),
    Term("--teacher", "the model whose next-token distribution a run distils", ("train",)),
    Term("--arch", "the architecture a run trains: a preset or a layer pattern", ("train", "hybridize"),
         was=("hybridize --pattern",)),
    # counts
    Term("--clusters", "K-means clusters over the scores", ("aggregate",), was=("aggregate --k",)),
    Term("--patterns", "which patterns: how many to spread over a ranking, or a list", ("transfer",),
         was=("transfer --k",)),
    Term("--seeds", "which seeds: a count or a list, every model trained once per seed", ("pipeline", "transfer")),
    Term("--trials", "how many candidates a search evaluates", ("search", "pipeline")),
    Term("--workers", "runs evaluated at once, each in its own process", ("search", "transfer")),
    Term("--repeats", "timed repetitions of a measurement", ("bench-inference",)),
    Term("--candidates", "placements scored exhaustively before beam search", ("hybridize",)),
    Term("--keep", "attention layers that stay in a hybrid", ("hybridize",)),
    Term("--final-layers", "the layers incremental search strategies grow a pattern to", ("search",),
         was=("search --depth",)),
    Term("--layers", "the layers of a searched pattern (with --space mixers, its most mixers)", ("search",)),
    Term("--space", "the search space: a primitive per layer, or mixers with 0-2 MLPs after each", ("search",)),
    # shared by several commands
    Term("--out", "the directory a command writes its results to",
         ("search", "aggregate", "train", "pipeline", "transfer", "import", "hybridize", "export", "eval",
          "bench-inference")),
    Term("--json", "print the result as JSON", ALL),
    Term("--recipe", "a YAML file whose keys are the command's options (flags win)",
         ("search", "train", "pipeline", "transfer", "hybridize")),
    Term("--seed", "the seed of the command's own randomness", ("search", "extrapolate", "train", "hybridize", "eval",
                                                                  "generate", "bench-inference")),
    Term("--data", "the text source", ("search", "train", "transfer", "hybridize", "eval")),
    Term("--tokenizer", "the tokenizer", ("search", "train", "transfer", "hybridize", "export", "eval", "generate")),
    Term("--text-field", "the field of JSON or Parquet records that holds the text", ("search", "train")),
    Term("--data-seed", "chooses the held-out validation documents", ("train", "transfer", "eval")),
    Term("--max-documents", "use only the first N documents", ("train", "transfer", "hybridize")),
    Term("--tokens", "training tokens of a run", ("train", "pipeline", "transfer", "hybridize")),
    Term("--seq-len", "tokens per sequence", ("train", "transfer", "info", "hybridize", "eval")),
    Term("--batch-size", "sequences per batch", ("train", "transfer", "hybridize", "eval")),
    Term("--lr", "peak learning rate", ("train", "transfer", "hybridize")),
    Term("--lr-sweep", "rates every model is first tried at on a short budget", ("pipeline", "transfer")),
    Term("--lr-sweep-fraction", "share of the tokens per rate-sweep run", ("pipeline", "transfer")),
    Term("--val-tokens", "tokens the final validation scores", ("train", "transfer", "hybridize")),
    Term("--kl-weight", "loss = w * KL + (1 - w) * cross-entropy", ("train", "hybridize")),
    Term("--hidden-weight", "weight of the per-layer residual-stream MSE to the teacher", ("train", "hybridize")),
    Term("--freeze", "parameter groups not trained", ("train", "hybridize")),
    Term("--options", "per-primitive options as JSON", ("train", "hybridize")),
    Term("--parallelism", "how several devices share the model: auto, single, ddp, fsdp", ("train", "hybridize"),
         was=("--strategy on train and hybridize",)),
    Term("--resume", "continue from the newest checkpoint in --out", ("train", "hybridize")),
    Term("--wandb", "W&B mode: auto, online, offline, off", ("search", "train", "transfer", "hybridize")),
    Term("--wandb-project", "W&B project", ("search", "train")),
    Term("--compile", "torch.compile the model", ("search", "train", "generate", "bench-inference")),
    Term("--budget", "a named evaluation budget of a search", ("search", "pipeline")),
    Term("--storage", "an Optuna storage URL or journal file", ("search", "aggregate")),
    Term("--study", "an Optuna study name", ("search", "aggregate", "transfer")),
    Term("--method", "how a pattern is extrapolated: stack, stretch, auto", ("extrapolate", "transfer")),
    Term("--force", "overwrite an existing output directory", ("import", "export")),
    Term("--format", "the notation the output is written in", ("info", "export")),
    # search's own
    Term("--help-all", "show every flag, the advanced ones grouped", ("search",)),
    Term("--strategy", "the search algorithm: successive-halving, one-shot, incremental", ("search",)),
    Term("--primitives", "the layer tokens a searched layer may be", ("search",)),
    Term("--sampler", "the Optuna sampler that proposes candidates", ("search",)),
    Term("--objectives", "what a search minimises: score, recall, kv, tokens/s", ("search",)),
    Term("--evaluator", "how a candidate is scored: lm, mad, recall", ("search",)),
    Term("--timeout", "stop starting trials after this many seconds", ("search",)),
    Term("--min-recall", "the least probe recall the answer must reach", ("search",)),
    Term("--recall-budget", "the budget of the finalists' recall probe", ("search",)),
    Term("--confirm-seeds", "seeds the best new and best known finalist train to", ("search",)),
    Term("--min-share", "least share of layers per primitive", ("search",)),
    Term("--max-share", "most share of layers per primitive", ("search",)),
    Term("--max-params", "most non-embedding parameters of a candidate", ("search",)),
    Term("--max-kv", "most inference cache one sequence may hold at the target", ("search",)),
    Term("--max-latency", "most decode milliseconds per token at the target", ("search",)),
    Term("--min-throughput", "least training tokens/s at the target", ("search",)),
    Term("--no-prune", "do not stop unpromising trials early", ("search",)),
    Term("--no-known", "do not start from the published layouts", ("search",)),
    Term("--plan", "print the plan and exit without training", ("search",)),
    # aggregate's own
    Term("--c", "previous layers that must match when aggregating", ("aggregate",)),
    Term("--direction", "whether lower or higher scores are better", ("aggregate",)),
    # extrapolate's own
    Term("--params", "the target's size in non-embedding parameters", ("extrapolate",)),
    Term("--rounding", "how a stacked pattern's remainder is rounded", ("extrapolate",)),
    Term("--baselines", "also list the matched baselines at the target", ("extrapolate",)),
    # train's own
    Term("--val-fraction", "share of a local source held out for validation", ("train",)),
    Term("--repeat-share", "share of training windows that repeat a span of their text", ("train",)),
    Term("--repeat-span", "tokens per repeated span", ("train",)),
    Term("--num-workers", "data loader worker processes", ("train",)),
    Term("--data-cache", "the token cache directory", ("train",)),
    Term("--micro-batch-size", "sequences per device and forward pass", ("train",)),
    Term("--min-lr-ratio", "the schedule's final rate as a share of --lr", ("train",)),
    Term("--schedule", "the learning-rate schedule after warmup", ("train",)),
    Term("--warmup", "warmup steps or fraction", ("train",)),
    Term("--decay-fraction", "share of the steps a wsd schedule decays", ("train",)),
    Term("--weight-decay", "AdamW weight decay", ("train",)),
    Term("--beta1", "AdamW beta1", ("train",)),
    Term("--beta2", "AdamW beta2", ("train",)),
    Term("--eps", "AdamW epsilon", ("train",)),
    Term("--grad-clip", "max global gradient norm", ("train",)),
    Term("--num-nodes", "hosts of a multi-node run", ("train",)),
    Term("--activation-checkpointing", "recompute activations in the backward pass", ("train",)),
    Term("--val-interval", "optimizer steps between validations", ("train",)),
    Term("--val-batches", "micro-batches per validation during training", ("train",)),
    Term("--curve-points", "validations of a learning curve", ("train",)),
    Term("--curve-tokens", "held-out tokens per curve point", ("train",)),
    Term("--log-interval", "optimizer steps between logged metrics", ("train",)),
    Term("--progress", "print the run's step lines", ("train",)),
    Term("--checkpoint-interval", "optimizer steps between checkpoints", ("train",)),
    Term("--keep-checkpoints", "newest checkpoints kept", ("train",)),
    Term("--throughput-only", "measure speed only: no validation, no checkpoints", ("train",)),
    Term("--run-name", "the W&B run name", ("train",)),
    Term("--supernet-keep", "teacher attention layers a supernet keeps per step", ("train",)),
    # pipeline's own
    Term("--stages", "which pipeline stages run", ("pipeline",)),
    Term("--recall-sequences", "held-out sequences each trained model's recall is measured on", ("pipeline",)),
    # transfer's own
    Term("--rung", "the successive-halving rung whose ranking is read", ("transfer",)),
    Term("--baseline", "the parameter-matched model each pattern is compared with", ("transfer",)),
    Term("--n-boot", "bootstrap replicates", ("transfer",)),
    # import's own
    Term("--verify", "compare the imported model's logits with the original's", ("import",)),
    # hybridize's own
    Term("--search-placement", "search which attention layers stay", ("hybridize",), was=("hybridize --search",)),
    Term("--supernet-tokens", "tokens of the placement supernet's training", ("hybridize",)),
    Term("--beam-width", "placements a beam search keeps", ("hybridize",)),
    Term("--score-tokens", "held-out tokens each placement is scored on", ("hybridize",)),
    Term("--no-distill", "stop after ranking the placements", ("hybridize",)),
    # eval's own
    Term("--tasks", "the evaluation tasks", ("eval",)),
    Term("--limit", "examples per task", ("eval",)),
    Term("--num-fewshot", "few-shot examples per prompt", ("eval",)),
    Term("--include-path", "a directory of extra lm-eval task definitions", ("eval",)),
    Term("--ngram", "the copy task's n-gram length", ("eval",)),
    Term("--span", "tokens per recall span", ("eval",)),
    # generate's own
    Term("--prompt", "the text generation continues", ("generate",)),
    Term("--max-new-tokens", "most tokens a generation adds", ("generate",)),
    Term("--top-k", "sample among the k likeliest tokens", ("generate",)),
    Term("--top-p", "sample among the likeliest tokens holding p of the probability", ("generate",)),
    # bench-inference's own
    Term("--batch-sizes", "the batch sizes decode is timed at", ("bench-inference",)),
    Term("--context-lengths", "the context lengths decode is timed at", ("bench-inference",)),
    Term("--new-tokens", "tokens decoded per timed repetition", ("bench-inference",)),
    Term("--no-baseline", "do not also time the Llama peer", ("bench-inference",)),
)

def table() -> str:
    """The Markdown table docs/usage/vocabulary.md holds between its markers."""
    def row(term: Term) -> str:
        commands = "all" if term.commands == ALL else ", ".join(term.commands)
        was = ", ".join(f"`{old}`" if old.startswith("--") and " " not in old else old for old in term.was)
        return f"| `{term.flag}` | {term.meaning} | {commands} | {was} |"

    header = "| flag | meaning | commands | old spellings (still accepted, with a notice) |\n|---|---|---|---|"
    return "\n".join([header, *(row(term) for term in TERMS)])


if __name__ == "__main__":  # pragma: no cover
    print(table())
