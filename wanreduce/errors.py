"""User-facing errors of the ``wanreduce`` command line."""

from __future__ import annotations

import click


class WanreduceError(click.ClickException):
    """A user-facing error: printed as one line ``wanreduce: error: ...``, exit status 1."""

    def show(self, file=None) -> None:  # click API
        click.echo(f"wanreduce: error: {self.format_message()}", err=True, file=file)
