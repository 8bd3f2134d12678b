"""The ``wanreduce`` command line: one click group, subcommands registered from their own modules.

Subcommands are imported on demand (:class:`LazyGroup`), so ``wanreduce --help`` imports click
and nothing heavy. Every error a user can cause (bad argument, malformed config file, missing
tool) is reported as one line on stderr with exit status 2 (usage) or 1 (runtime), never a
traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from wanreduce import __version__
from wanreduce.errors import WanreduceError

__all__ = ["SUBCOMMANDS", "WanreduceError", "cli", "main"]


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


class LazyGroup(OneLineErrorGroup):
    """A group whose subcommands are imported only when one is run or its help is shown.

    ``wanreduce --help`` lists names and one-line descriptions from :data:`SUBCOMMANDS` without
    importing any command module: those pull in the HDL stack, NumPy, the planner, ... and made
    ``--help`` take seconds (docs/benchmarks.md, "CLI start-up"). The listing's line is also
    the loaded command's ``short_help``, so both always agree.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in SUBCOMMANDS:
            return None
        module_name, short_help = SUBCOMMANDS[cmd_name]
        command = getattr(importlib.import_module(module_name), cmd_name)
        command.short_help = short_help
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, short_help) for name, (_, short_help) in SUBCOMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


# Each subcommand is a click command named like its key, in the module given; the text is its
# line in `wanreduce --help`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "verilog": ("wanreduce.commands.verilog", "Generate the core as one Verilog module."),
    "demo": ("wanreduce.commands.demo", "Verilog, then an all-reduce through it in simulation."),
    "plan": ("wanreduce.commands.plan", "Schedule planner and WAN model for a topology."),
    "serve": ("wanreduce.commands.serve", "Software aggregator speaking the UDP protocol."),
    "loopback": ("wanreduce.commands.loopback", "Host drivers all-reduce through the simulated core."),
    "build": ("wanreduce.commands.build", "Board sources and constraints; optionally the bitstream."),
    "report": ("wanreduce.commands.report", "LUTs, flip-flops, block RAMs and Fmax of the core."),
    "emulate": ("wanreduce.commands.emulate", "Run a plan over the emulated WAN; vs the planner."),
    "train": ("wanreduce.commands.train", "Train a model across sites, averaging as a plan says."),
}


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="wanreduce")
def cli() -> None:
    """wanreduce: in-network gradient aggregation for wide-area training.

    Sites multicast their updates once; an in-line FPGA at each site's edge merges the
    incoming streams into one aggregated stream; a planner picks who synchronises with whom.
    """


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    try:
        cli.main(args=argv, prog_name="wanreduce", standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("wanreduce: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
