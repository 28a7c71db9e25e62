"""The ``sbdelta`` command line: apply a namespace config, list entities, show one.

The namespace comes from ``--namespace``, else ``$SBDELTA_NAMESPACE``, else ``./namespace``
(the embedded local default). Errors print one line and exit with status 1 (2 for usage).
"""

from __future__ import annotations

import json
import sys
from typing import Optional

import click

from .exceptions import ServiceBusError

DEFAULT_NAMESPACE = "namespace"


class _Failure(click.ClickException):
    exit_code = 1


def _admin(namespace: str):
    from .management import ServiceBusAdministrationClient

    return ServiceBusAdministrationClient(namespace)


def _props_json(props) -> str:
    return json.dumps(props.to_dict(), indent=2, default=str)


namespace_option = click.option(
    "--namespace", "-n", envvar="SBDELTA_NAMESPACE", default=DEFAULT_NAMESPACE,
    show_default=True, help="Namespace root: a folder or a Hadoop URI (abfss://, s3a://, dbfs:/).")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sbdelta")
def main() -> None:
    """sbdelta: Azure Service Bus semantics on Delta tables."""


def _guard(func):
    """Turn sbdelta errors into one-line CLI failures."""
    import functools

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except ServiceBusError as exc:
            raise _Failure(f"{type(exc).__name__}: {exc}") from None

    return wrapper


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--config-namespace", default=None,
              help="Which namespace of the config file to apply (when it declares several).")
@namespace_option
@_guard
def apply(config: str, config_namespace: Optional[str], namespace: str) -> None:
    """Create or update the entities declared in CONFIG (emulator Config.json format)."""
    report = _admin(namespace).apply_config(config, namespace_name=config_namespace)
    click.echo(str(report))


@main.command(name="list")
@namespace_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@_guard
def list_entities(namespace: str, as_json: bool) -> None:
    """List the queues, topics, subscriptions and rules of the namespace."""
    admin = _admin(namespace)
    rows = []
    for q in admin.list_queues():
        rows.append(("queue", q.name, q.status.value, _flags(q)))
    for t in admin.list_topics():
        rows.append(("topic", t.name, t.status.value, _flags(t)))
        for s in admin.list_subscriptions(t.name):
            rows.append(("subscription", f"{t.name}/{s.name}", s.status.value, _flags(s)))
            for r in admin.list_rules(t.name, s.name):
                rows.append(("rule", f"{t.name}/{s.name}/{r.name}", "", type(r.filter).__name__))
    if as_json:
        click.echo(json.dumps([dict(zip(("kind", "name", "status", "details"), r)) for r in rows],
                              indent=2))
        return
    click.echo(f"namespace {admin.namespace}")
    if not rows:
        click.echo("  (no entities)")
    width = max([len(r[1]) for r in rows] + [4])
    for kind, name, status, details in rows:
        click.echo(f"  {kind:<12} {name:<{width}}  {status:<15} {details}".rstrip())


def _flags(props) -> str:
    parts = []
    for attr, label in (("enable_partitioning", "partitioned"), ("requires_session", "sessions"),
                        ("requires_duplicate_detection", "dedup"),
                        ("dead_lettering_on_message_expiration", "dlq-on-expiry")):
        if getattr(props, attr, False):
            parts.append(label)
    if getattr(props, "forward_to", None):
        parts.append(f"forward->{props.forward_to}")
    return ", ".join(parts)


@main.command()
@click.argument("kind", type=click.Choice(["queue", "topic", "subscription", "rule"]))
@click.argument("name")
@namespace_option
@_guard
def show(kind: str, name: str, namespace: str) -> None:
    """Print an entity's properties as JSON.

    NAME is the queue or topic path, TOPIC/SUBSCRIPTION, or TOPIC/SUBSCRIPTION/RULE.
    """
    admin = _admin(namespace)
    if kind == "queue":
        props = admin.get_queue(name)
    elif kind == "topic":
        props = admin.get_topic(name)
    elif kind == "subscription":
        topic, sep, sub = name.rpartition("/")  # topic paths may hold "/", subscriptions not
        if not sep:
            raise click.UsageError("a subscription is named TOPIC/SUBSCRIPTION")
        props = admin.get_subscription(topic, sub)
    else:
        parts = name.rsplit("/", 2)
        if len(parts) != 3:
            raise click.UsageError("a rule is named TOPIC/SUBSCRIPTION/RULE")
        props = admin.get_rule(*parts)
    click.echo(_props_json(props))


@main.command()
@namespace_option
@click.option("--secondary", "-s", envvar="SBDELTA_SECONDARY", required=True,
              help="The secondary namespace holding the backlog queues.")
@click.option("--dry-run", is_flag=True, help="List the backlog queues; move nothing.")
@_guard
def syphon(namespace: str, secondary: str, dry_run: bool) -> None:
    """Move the paired primary NAMESPACE's backlog messages home from SECONDARY (PAIR-7).

    One drain; jobs/syphon.py --follow keeps polling.
    """
    from .paired.syphon import Syphon

    click.echo(str(Syphon(namespace, secondary).drain(dry_run=dry_run)))


@main.command(name="setup")
def setup() -> None:
    """Fetch the Delta jars, build the local log store and record the JVM class archive once
    (later runs work offline and start faster)."""
    from ._spark import ensure_class_archive, ensure_jars

    try:
        for jar in ensure_jars():
            click.echo(jar)
    except ServiceBusError as exc:
        raise _Failure(str(exc)) from None
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
    from ._spark import spark_submit_args as args

    try:
        # Unquoted: $(...) splits words but does not remove quotes, so quoting would break
        # the documented use. No value sbdelta produces contains whitespace.
        click.echo(" ".join(args(profile)))
    except ServiceBusError as exc:
        raise _Failure(str(exc)) from None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
