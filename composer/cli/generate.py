"""``composer generate --model DIR --prompt TEXT``: continue a prompt with a trained model, streaming the text.

The model directory is what ``composer train`` writes to ``<out>/model``: the weights, the architecture and the
tokenizer the model was trained with (``--tokenizer`` overrides it, and is needed for model directories written
before tokenizers were saved with them and moved away from their run). The prompt is prefilled in one pass
through the model's inference cache, then one token per step (:mod:`composer.inference`); decoded text goes to
stdout as tokens come (a UTF-8 character split over several byte tokens is printed once complete), timing to
stderr. Generation stops at the tokenizer's EOS, after ``--max-new-tokens``, or when the model's context is full.
"""

from __future__ import annotations

import argparse
import codecs
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from composer.cli.format import print_json
from composer.cli.parsing import seed_number
from composer.errors import ConfigError

DEFAULT_MAX_NEW_TOKENS = 128


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="generate text with a trained model (streamed, with its inference cache)",
        description="Continue --prompt with the model composer train saved in <out>/model and the tokenizer "
                    "saved beside it. The completion streams to stdout, its time to stderr. --temperature 0 "
                    "is greedy.",
    )
    parser.add_argument("--model", required=True, metavar="DIR", help="the model directory (<train out>/model)")
    parser.add_argument("--prompt", required=True, help="text to continue")
    # numbers are parsed by run() so that a bad value is one line and exit 2, like every usage error
    parser.add_argument("--max-new-tokens", default=str(DEFAULT_MAX_NEW_TOKENS), metavar="N",
                        help=f"most tokens to generate (default {DEFAULT_MAX_NEW_TOKENS}; fewer when the model's "
                             "context fills up)")
    parser.add_argument("--temperature", default="1.0", metavar="T",
                        help="softmax temperature (default 1.0; 0 = greedy)")
    parser.add_argument("--top-k", metavar="K", help="sample among the K most likely tokens only")
    parser.add_argument("--top-p", metavar="P", help="nucleus sampling: the smallest set of probability >= P")
    parser.add_argument("--seed", type=seed_number, default=0, metavar="S", help="sampling seed (default 0)")
    parser.add_argument("--tokenizer", help="tokenizer name or path, 'bytes' for the byte tokenizer (default: the "
                                            "one saved with the model)")
    parser.add_argument("--device", default="auto", help="what it runs on: auto (CUDA when available), cpu, cuda "
                                                         "(or gpu), cuda:1, ...")
    parser.add_argument("--compile", action="store_true",
                        help="decode through the compiled step: Inductor on the CPU, CUDA graphs on CUDA "
                             "(compiled before the prompt, not timed; eager where compiling fails, with a warning)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (prompt, completion, token ids, timing) instead of streaming")
    parser.set_defaults(handler=run)


# -- argument checks ------------------------------------------------------------------------------------------
def parse_number(value: str | None, flag: str, kind: type, low: float | None = None,
                 high: float | None = None, low_open: bool = False, what: str = ""):
    """``value`` as ``kind`` within ``[low, high]`` (``(low, high]`` with ``low_open``), else a one-line error."""
    if value is None:
        return None
    try:
        number = kind(value)
    except ValueError:
        number = None
    ok = number is not None and (kind is int or math.isfinite(number))
    if ok and low is not None:
        ok = number > low if low_open else number >= low
    if ok and high is not None:
        ok = number <= high
    if not ok:
        raise ConfigError(f"{flag} must be {what}, got {value!r}")
    return number


def model_directory(path: str) -> Path:
    """``path``, or its ``model/`` folder when given a ``composer train`` run directory."""
    directory = Path(path)
    if not (directory / "model.safetensors").is_file() and (directory / "model" / "model.safetensors").is_file():
        return directory / "model"
    return directory


def load_model(directory: Path, device):
    """The model of a ``composer train`` model directory, in eval mode on ``device`` (one-line errors)."""
    from composer.interop.export import read_model_dir
    from composer.model import build_model

    arch, state = read_model_dir(directory)  # checks names and shapes against the architecture
    model = build_model(arch, device=device)
    model.load_state_dict(state)
    return model.eval()


# -- generation ---------------------------------------------------------------------------------------------
def stream_tokens(
    model,
    prompt_ids: list[int],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos: int | None = None,
    generator=None,
    vocab_limit: int | None = None,
    decode=None,
) -> Iterator[int]:
    """Yield up to ``max_new_tokens`` token ids continuing ``prompt_ids`` (one sequence), one at a time, with
    the model's inference cache: the same steps and draws as :meth:`ComposerModel.generate` with the same
    ``generator``, stopping after ``eos`` (yielded). ``vocab_limit``: ids from there on (the embedding rows
    ``composer train`` pads the vocabulary with, which no tokenizer decodes) are never drawn. ``decode``: the
    decoding step (a :class:`~composer.inference.DecodeStep`; default the model's eager one)."""
    import torch

    from composer.inference import stream

    if max_new_tokens <= 0:
        return
    device = next(model.parameters()).device
    prompt = torch.tensor([prompt_ids], dtype=torch.long, device=device)
    for token in stream(model, prompt, max_new_tokens, temperature, top_k, top_p, eos, generator=generator,
                        vocab_limit=vocab_limit, decode=decode):
        yield int(token[0])


class StreamDecoder:
    """Text of a growing list of token ids, handed out piece by piece without broken characters.

    The byte tokenizer goes through Python's incremental UTF-8 decoder: a character split over several byte
    tokens comes out once its last byte arrives (invalid bytes as U+FFFD, exactly as decoding all the bytes at
    once gives). Other tokenizers decode the ids so far and hold back a trailing U+FFFD (an incomplete byte
    sequence that later tokens complete). Special tokens such as EOS add no text.
    """

    def __init__(self, tokenizer) -> None:
        from composer.data.tokenizer import ByteTokenizer

        self.tokenizer = tokenizer
        self.bytes = isinstance(tokenizer, ByteTokenizer)
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace") if self.bytes else None
        self._ids: list[int] = []
        self._emitted = ""

    def add(self, token_id: int) -> str:
        """The new text this token completes (often ``""`` mid-character)."""
        if self.bytes:
            return self._utf8.decode(bytes([token_id])) if token_id < 256 else ""
        if token_id == self.tokenizer.eos_id:
            return ""
        self._ids.append(token_id)
        text = self.tokenizer.decode(self._ids)
        if text.endswith("\ufffd") or not text.startswith(self._emitted):
            return ""
        piece, self._emitted = text[len(self._emitted):], text
        return piece

    def finish(self) -> str:
        """What is still held back: an incomplete character at the end becomes U+FFFD."""
        if self.bytes:
            return self._utf8.decode(b"", final=True)
        text = self.tokenizer.decode(self._ids) if self._ids else ""
        piece = text[len(self._emitted):] if text.startswith(self._emitted) else ""
        self._emitted = text
        return piece


def compiled_step(model, cache_len: int):
    """The compiled decoding step (:func:`~composer.inference.compile_decode_step`), compiled for the cache
    ``stream`` allocates (``cache_len``: the prompt and every new token but the last) before the clock starts,
    and the seconds that took (``None`` where compiling failed and the step decodes eagerly)."""
    from composer.inference import compile_decode_step

    step = compile_decode_step(model)
    seconds = step.warm_up(1, cache_len)
    return step, seconds if step.compiled else None


def generate_text(args: argparse.Namespace, out=None, err=None) -> dict[str, Any]:
    """Run ``composer generate`` for parsed ``args``; streams to ``out`` unless ``args.json``. Returns the
    JSON object."""
    import torch

    from composer.data.tokenizer import load_tokenizer_for
    from composer.inference import EAGER
    from composer.precision import resolve_device

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    max_new = parse_number(args.max_new_tokens, "--max-new-tokens", int, 1, what="a positive integer")
    temperature = parse_number(args.temperature, "--temperature", float, 0, what="a number >= 0")
    top_k = parse_number(args.top_k, "--top-k", int, 1, what="a positive integer")
    top_p = parse_number(args.top_p, "--top-p", float, 0, 1, low_open=True, what="a number in (0, 1]")
    seed = args.seed
    if args.prompt == "":
        raise ConfigError("--prompt is empty; give some text to continue")
    device = resolve_device(args.device)
    directory = model_directory(args.model)
    if not directory.exists():
        raise ConfigError(f"model directory {args.model!r} does not exist")
    model = load_model(directory, device)
    arch = model.arch
    tokenizer = load_tokenizer_for(directory, args.tokenizer)
    if tokenizer.vocab_size > arch.vocab_size:
        raise ConfigError(
            f"tokenizer {tokenizer.name!r} has {tokenizer.vocab_size:,} ids but the model only "
            f"{arch.vocab_size:,}: not the tokenizer it was trained with (pass the right one with --tokenizer)"
        )
    prompt_ids = [int(i) for i in tokenizer.encode_batch([args.prompt])[0]]
    if not prompt_ids:
        raise ConfigError("--prompt encodes to no tokens; give some text to continue")
    room = arch.max_seq_len - len(prompt_ids)
    if room <= 0:
        raise ConfigError(
            f"the prompt is {len(prompt_ids):,} tokens but the model's context (max_seq_len) is "
            f"{arch.max_seq_len:,}: shorten it to at most {arch.max_seq_len - 1:,} tokens"
        )
    notes = []
    if max_new > room:
        notes.append(f"--max-new-tokens {max_new} cut to {room}: the model's context is {arch.max_seq_len:,} "
                     f"tokens and the prompt takes {len(prompt_ids):,}")
        max_new = room
    generator = torch.Generator(device=device).manual_seed(seed)
    step, compile_s = compiled_step(model, len(prompt_ids) + max_new - 1) if args.compile else (None, None)

    decoder = StreamDecoder(tokenizer)
    ids: list[int] = []
    pieces: list[str] = []
    first = None
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    started = time.perf_counter()
    for token in stream_tokens(model, prompt_ids, max_new, temperature, top_k, top_p, tokenizer.eos_id,
                               generator, vocab_limit=tokenizer.vocab_size, decode=step):
        if first is None:
            sync()
            first = time.perf_counter()
        ids.append(token)
        piece = decoder.add(token)
        pieces.append(piece)
        if piece and not args.json:
            out.write(piece)
            out.flush()
    sync()
    ended = time.perf_counter()
    tail = decoder.finish()
    pieces.append(tail)
    completion = "".join(pieces)
    stop = "eos" if ids and ids[-1] == tokenizer.eos_id else "max_new_tokens"
    total = ended - started
    ttft = first - started
    decode_s = ended - first
    decode_rate = (len(ids) - 1) / decode_s if len(ids) > 1 and decode_s > 0 else None
    result = {
        "model": str(directory),
        "tokenizer": tokenizer.name,
        "pattern": arch.compact,
        "device": str(device),
        "prompt": args.prompt,
        "completion": completion,
        "prompt_ids": prompt_ids,
        "token_ids": ids,
        "n_prompt_tokens": len(prompt_ids),
        "n_new_tokens": len(ids),
        "stop": stop,
        "sampling": {"temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed,
                     "max_new_tokens": max_new},
        "time_to_first_token_s": ttft,
        "decode_tokens_per_s": decode_rate,
        "tokens_per_s": len(ids) / total if total > 0 else None,
        "total_s": total,
        "decode_path": EAGER if step is None else step.path,
        "compile_s": compile_s,
        "notes": notes,
    }
    if not args.json:
        out.write(tail + "\n")
        out.flush()
        for note in notes:
            print(f"note: {note}", file=err)
        # no tokens/s: this is one timed run, without a spread (the same model's decode read 128 and 12 tokens/s on
        # two runs, issue 61); bench-inference measures it over repeats and prints the range
        compiled = f", compiled in {compile_s:.1f} s before" if compile_s is not None else ""
        print(f"[{len(ids)} tokens in {total:.2f} s ({result['decode_path']}{compiled}), first token after "
              f"{ttft * 1000:.0f} ms ({len(prompt_ids)}-token prompt); stopped at {stop}; timed once: composer "
              f"bench-inference measures decode speed over repeats]", file=err)
    return result


def run(args: argparse.Namespace) -> int:
    result = generate_text(args)
    if args.json:
        print_json(result)
    return 0
