"""Consoles for the command line."""

import sys

from rich.console import Console


def make_console(stderr: bool = False) -> Console:
    """A console that keeps lines and tables whole when the output is a pipe or a file."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 160)
