"""The ``wanreduce`` command line: one click group, subcommands registered from their own modules.

Every error a user can cause (bad argument, malformed config file, missing tool) is reported as
one line on stderr with exit status 2 (usage) or 1 (runtime), never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from wanreduce import __version__
from wanreduce.errors import WanreduceError

__all__ = ["WanreduceError", "cli", "main"]


class OneLineErrorGroup(click.Group):
    """A click group whose usage errors (bad option, bad value) are one line, not a usage
    block; this covers every subcommand, whether run from the console script or CliRunner."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            cmd = exc.ctx.command_path if exc.ctx else "wanreduce"
            click.echo(f"{cmd}: error: {exc.format_message()}", err=True)
            code = exc.exit_code
        except click.ClickException as exc:
            exc.show()
            code = exc.exit_code
        except click.exceptions.Abort:
            click.echo("wanreduce: aborted", err=True)
            code = 1
        except click.exceptions.Exit as exc:
            code = exc.exit_code
        else:
            code = 0
        if standalone_mode:
            sys.exit(code)
        return code


@click.group(cls=OneLineErrorGroup, context_settings={"help_option_names": ["-h", "--help"]})
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
