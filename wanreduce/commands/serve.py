"""``wanreduce serve``: run an aggregator that speaks the wanreduce UDP protocol."""

from __future__ import annotations

import signal

import click

from wanreduce import wire


class _UsageLine(click.UsageError):
    """A usage error printed as one line (exit status 2), like every wanreduce error."""

    def show(self, file=None) -> None:  # noqa: D401 - click API
        click.echo(f"wanreduce: error: {self.format_message()}", err=True, file=file)


class _OneLineErrors(click.Command):
    """Report bad arguments (click's own and ours) on one line instead of usage + message."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _UsageLine(exc.format_message()) from None

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            if isinstance(exc, _UsageLine):
                raise
            raise _UsageLine(exc.format_message()) from None


def _parse_group(text: str) -> tuple[int, list[int]]:
    try:
        gid, _, members = text.partition(":")
        ids = [int(m) for m in members.split(",") if m.strip() != ""]
        g = int(gid)
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected GROUP:ID,ID,... e.g. 0:0,1,2") from None
    if not ids or not all(0 <= i < wire.MAX_SENDERS for i in ids):
        raise click.BadParameter(f"{text!r}: members must be sender ids 0..{wire.MAX_SENDERS - 1}")
    return g, ids


@click.command("serve", cls=_OneLineErrors)
@click.option("--backend", type=click.Choice(["model"]), default="model", show_default=True,
              help="model: the golden model in software (bit-exact with the RTL).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=wire.DEFAULT_UDP_PORT,
              show_default=True, help="UDP port (0: ephemeral, printed at start).")
@click.option("--slots", type=int, default=4096, show_default=True,
              help="Slots S (power of two); S x E x 4 bytes of memory. A job's window W is at most "
                   "S, and a driver keeps W/2 chunks in flight.")
@click.option("--elements", type=click.IntRange(1, wire.MAX_ELEMENTS_JUMBO),
              default=wire.DEFAULT_ELEMENTS, show_default=True,
              help="Maximum elements per packet E.")
@click.option("--groups", type=click.IntRange(1, 256), default=8, show_default=True,
              help="Group table entries G.")
@click.option("--jobs", type=click.IntRange(1, 65536), default=4, show_default=True,
              help="Job table entries J.")
@click.option("--release", type=click.Choice(["in-order", "on-completion"]), default="in-order",
              show_default=True)
@click.option("--group", "group_opts", multiple=True, metavar="G:ID,ID,...",
              help="Pre-configure a group's members (repeatable); else configure via CONTROL.")
@click.option("--job", "job_opts", multiple=True, type=int, metavar="J",
              help="Pre-enable job J with the whole slot memory as its window (repeatable).")
@click.option("--quiet", is_flag=True, help="Print only the HOST:PORT line (no banner, no counters at exit).")
def serve(backend, host, port, slots, elements, groups, jobs, release, group_opts, job_opts, quiet) -> None:
    """Serve aggregation over UDP (datagram = aggregation header + payload) until Ctrl-C."""
    from wanreduce.errors import WanreduceError
    from wanreduce.host.softagg import SoftAggregator
    from wanreduce.model import ReleaseMode

    if slots < 1 or slots & (slots - 1):
        raise click.BadParameter(f"{slots} is not a power of two", param_hint="--slots")
    parsed = [_parse_group(g) for g in group_opts]
    for g, _ in parsed:
        if not 0 <= g < groups:
            raise click.BadParameter(f"group {g} outside the table of {groups}", param_hint="--group")
    for j in job_opts:
        if not 0 <= j < jobs:
            raise click.BadParameter(f"job {j} outside the table of {jobs}", param_hint="--job")
    try:
        agg = SoftAggregator(
            host=host, port=port, slots=slots, elements=elements, groups=groups, jobs=jobs,
            release=ReleaseMode.ON_COMPLETION if release == "on-completion" else ReleaseMode.IN_ORDER,
        )
    except OSError as exc:
        raise WanreduceError(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise WanreduceError(str(exc)) from None
    agg.configure(groups=dict(parsed), jobs=job_opts)
    h, p = agg.address
    if not quiet:
        click.echo(f"wanreduce serve: {backend} backend on {h}:{p} (S={slots}, E={elements}, "
                   f"G={groups}, J={jobs}, {release})", err=True)
        missing = [what for what, given in (("no group", parsed), ("no job", job_opts)) if not given]
        if missing:
            click.echo(f"wanreduce serve: {' and '.join(missing)} configured yet: clients are "
                       f"refused until you restart with e.g. --group 0:0,1,2 --job 0 (group 0 = "
                       f"sender ids 0, 1, 2; job 0 enabled) or configure them over CONTROL "
                       f"(ControlClient.set_group / set_job)", err=True)

    def _stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # SIGINT and SIGTERM stop the server and print the counters. Installed explicitly (and
    # before the address is printed, which is when a caller may signal): a process started in
    # the background by a non-interactive shell (or by some test runners) inherits SIGINT as
    # ignored, and Python then never raises KeyboardInterrupt.
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    try:
        click.echo(f"{h}:{p}")  # machine-readable line on stdout (flushed), also with --quiet
        agg.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        c = agg.counters()
        agg.close()
        if not quiet:
            nz = {k: v for k, v in c.items() if v}
            click.echo(f"wanreduce serve: stopped; counters {nz}", err=True)
