"""``sbdelta setup | spark-submit-args``: the local Spark runtime sbdelta starts from."""

from __future__ import annotations

import click

from ..exceptions import ServiceBusError
from .base import Failure, main


@main.command(name="setup")
def setup() -> None:
    """Fetch the Delta jars, build the local log store and record the JVM class archive once
    (later runs work offline and start faster)."""
    from .._spark import ensure_class_archive, ensure_jars

    try:
        for jar in ensure_jars():
            click.echo(jar)
    except ServiceBusError as exc:
        raise Failure(str(exc)) from None
    try:
        archive = ensure_class_archive()
        if archive is not None:
            click.echo(archive)
    except ServiceBusError as exc:  # an optimisation: sessions start without it
        click.echo(f"warning: no JVM class-data sharing archive ({exc}); Spark starts "
                   "without one", err=True)


@main.command(name="spark-submit-args")
@click.option("--profile", default="local", show_default=True,
              help="conf/spark-<profile>.conf to start from.")
def spark_submit_args(profile: str) -> None:
    """Print spark-submit flags for sbdelta jobs: spark-submit $(sbdelta spark-submit-args) ..."""
    from .._spark import spark_submit_args as args

    try:
        # Unquoted: $(...) splits words but does not remove quotes, so quoting would break
        # the documented use. No value sbdelta produces contains whitespace.
        click.echo(" ".join(args(profile)))
    except ServiceBusError as exc:
        raise Failure(str(exc)) from None
