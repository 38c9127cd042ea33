"""Options the timing scripts share: torch's thread count and the device to run on."""

from __future__ import annotations

import argparse

from minitx.core.training.threads import set_threads
from minitx.core.training.trainer import resolve_device


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads (0: minitx's default, every core but one)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to run")


def apply_run_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Set torch's threads; a device this machine lacks is one line from the parser (exit 2)."""
    try:
        resolve_device(args.device)
    except ValueError as e:
        parser.error(str(e))
    set_threads(args.threads or None)
