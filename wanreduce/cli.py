"""The ``wanreduce`` command line: one click group, subcommands registered from their own modules.

Every error a user can cause (bad argument, malformed config file, missing tool) is reported as
one line on stderr with exit status 2 (usage) or 1 (runtime), never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from wanreduce import __version__


class WanreduceError(click.ClickException):
    """A user-facing error: printed as one line, exit status 1."""

    def show(self, file=None) -> None:  # noqa: D401 - click API
        click.echo(f"wanreduce: error: {self.format_message()}", err=True, file=file)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="wanreduce")
def cli() -> None:
    """wanreduce: in-network gradient aggregation for wide-area training.

    Sites multicast their updates once; an in-line FPGA at each site's edge merges the
    incoming streams into one aggregated stream; a planner picks who synchronises with whom.
    """


# Subcommands live next to what they drive; each module defines a click command named in
# the tuple and is imported lazily so that `wanreduce --help` stays fast.
_SUBCOMMANDS: tuple[tuple[str, str], ...] = (
    ("wanreduce.commands.verilog", "verilog"),
    ("wanreduce.commands.demo", "demo"),
    ("wanreduce.commands.plan", "plan"),
    ("wanreduce.commands.serve", "serve"),
    ("wanreduce.commands.loopback", "loopback"),
    ("wanreduce.commands.build", "build"),
    ("wanreduce.commands.report", "report"),
)


def _register() -> None:
    for module_name, attr in _SUBCOMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # subcommand not written yet
                continue
            raise
        cli.add_command(getattr(module, attr))


_register()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    try:
        cli.main(args=argv, prog_name="wanreduce", standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("wanreduce: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
