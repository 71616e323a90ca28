"""The ``kernelopt`` command: parse arguments, run one command, turn every expected error into one line.

Exit codes: 0 success; 1 the kernel was evaluated and failed (wrong, crashed...); 2 bad usage or a
bad spec (one line per problem, never a traceback); 3 an internal error (set KERNELOPT_DEBUG=1
to see the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from ..core.errors import KerneloptError, SpecError
from . import commands


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} -h)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kernelopt",
        description="Make a CUDA kernel faster, one validated candidate at a time.",
        epilog="Run 'kernelopt COMMAND -h' for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for command in commands.COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except SpecError as exc:
        for line in str(exc).splitlines():
            print(f"kernelopt: error: {line}", file=sys.stderr)
        return 2
    except (KerneloptError, FileNotFoundError) as exc:
        print(f"kernelopt: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kernelopt: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`kernelopt show ... | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if os.environ.get("KERNELOPT_DEBUG"):
            traceback.print_exc()
        print(
            f"kernelopt: internal error: {type(exc).__name__}: {exc} (KERNELOPT_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return 3


def entry_point() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
