"""``sbdelta apply | list | show``: the namespace's entities from a config file, listed, shown."""

from __future__ import annotations

import json
from typing import Optional

import click

from .base import admin as admin_client, guard, main, namespace_option


def _props_json(props) -> str:
    return json.dumps(props.to_dict(), indent=2, default=str)


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--config-namespace", default=None,
              help="Which namespace of the config file to apply (when it declares several).")
@namespace_option
@guard
def apply(config: str, config_namespace: Optional[str], namespace: str) -> None:
    """Create or update the entities declared in CONFIG (emulator Config.json format)."""
    report = admin_client(namespace).apply_config(config, namespace_name=config_namespace)
    click.echo(str(report))


@main.command(name="list")
@namespace_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@guard
def list_entities(namespace: str, as_json: bool) -> None:
    """List the queues, topics, subscriptions and rules of the namespace."""
    admin = admin_client(namespace)
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
@guard
def show(kind: str, name: str, namespace: str) -> None:
    """Print an entity's properties as JSON.

    NAME is the queue or topic path, TOPIC/SUBSCRIPTION, or TOPIC/SUBSCRIPTION/RULE.
    """
    admin = admin_client(namespace)
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
