"""``sbdelta setup | spark-submit-args``: the local Spark runtime sbdelta starts from."""

from __future__ import annotations

import click

from ..exceptions import ServiceBusError
from .base import Failure, main


@main.command(name="setup")
@click.option("--connect", is_flag=True,
              help="Also fetch the Spark Connect server's jars (sbdelta connect-server).")
def setup(connect: bool) -> None:
    """Fetch the Delta jars, build the local log store and record the JVM class archive once
    (later runs work offline and start faster)."""
    from .._spark import ensure_artifact, ensure_class_archive, ensure_jars
    from ..connect_server import connect_coordinate

    try:
        for jar in ensure_jars() + (ensure_artifact(connect_coordinate()) if connect else []):
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


@main.command(name="connect-server")
@click.option("--port", type=int, default=15002, show_default=True,
              help="The port the server listens on (sc://localhost:<port>).")
@click.option("--profile", default="local", show_default=True,
              help="conf/spark-<profile>.conf to start from.")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting of the server (repeatable).")
def connect_server(port: int, profile: str, confs) -> None:
    """Run a local Spark Connect server with Delta and sbdelta's log store until stopped
    (Ctrl-C); clients use SparkSession.builder.remote("sc://localhost:<port>")."""
    import os

    from .._spark import java_home
    from ..connect_server import server_command

    settings = {}
    for item in confs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise Failure(f"--conf {item!r}: write it as KEY=VALUE")
        settings[key.strip()] = value
    try:
        command = server_command(port, profile=profile, conf=settings)
        os.environ["JAVA_HOME"] = java_home()
    except ServiceBusError as exc:
        raise Failure(str(exc)) from None
    click.echo(f"Spark Connect server on sc://localhost:{port} (Ctrl-C stops it)", err=True)
    os.execv(command[0], command)
