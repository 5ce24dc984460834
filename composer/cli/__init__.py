"""``composer`` command line: one module per subcommand, each adding its parser and handler."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from composer.cli import (
    aggregate,
    bench_inference,
    export,
    extrapolate,
    families,
    generate,
    info,
    pipeline,
    presets,
    report,
    search,
    train,
    transfer,
)
from composer.cli import evaluate as eval_command
from composer.cli import hybridize as hybridize_command
from composer.cli import import_hf as import_command
from composer.cli.parsing import CommandParser, announce_old_spellings, refuse_conflicts
from composer.errors import ComposerRunError, ComposerUsageError

SUBCOMMANDS = (search, report, aggregate, extrapolate, train, pipeline, transfer, info, presets, families,
               import_command, hybridize_command, export, eval_command,
               generate, bench_inference)


def _version() -> str:
    try:
        return version("composer-hnas")
    except PackageNotFoundError:  # running from a source tree that was not installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="composer",
        description="Composer: hybrid LLM architecture search over layer interleavings of primitives.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                       parser_class=CommandParser)
    for module in SUBCOMMANDS:
        module.add_parser(subparsers)
    return parser


def subcommand_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of ``composer COMMAND``."""
    subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return subparsers.choices[command]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # reported by the command's own parser, not the top level's (which names no command)
        subcommand_parser(parser, args.command).refuse_unknown(unknown)
    try:
        refuse_conflicts(args)  # what the parser recorded: one option given two values is refused
        announce_old_spellings(args)
        return args.handler(args) or 0
    except ComposerUsageError as err:
        print(f"composer {args.command}: error: {err}", file=sys.stderr)
        return 2
    except ComposerRunError as err:  # the run failed for a stated reason (e.g. it diverged): one line, status 1
        print(f"composer {args.command}: error: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `composer presets | head`
        return 0
    except KeyboardInterrupt:  # Ctrl-C: one line, not the traceback of whatever library it landed in (issue 47:
        # 50 lines from wandb.init); a run stopped mid-training has said how to resume before this
        print(f"composer {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
