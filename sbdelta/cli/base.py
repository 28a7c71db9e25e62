"""What every ``sbdelta`` command shares: the group, the namespace and output options, errors as
one line, tables (rich) or JSON, and how a command names an entity.

The namespace comes from ``--namespace``, else ``$SBDELTA_NAMESPACE``, else ``./namespace``
(the embedded local default). Errors print one line and exit with status 1 (2 for usage).
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Sequence

import click

from ..amqp import AmqpMessageBodyType
from ..exceptions import ServiceBusError

DEFAULT_NAMESPACE = "namespace"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class Failure(click.ClickException):
    exit_code = 1


namespace_option = click.option(
    "--namespace", "-n", envvar="SBDELTA_NAMESPACE", default=DEFAULT_NAMESPACE,
    show_default=True, help="Namespace root: a folder or a Hadoop URI (abfss://, s3a://, dbfs:/).")
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print JSON (for scripts) instead of a table.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sbdelta")
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False),
              default="WARNING", show_default=True, envvar="SBDELTA_LOG_LEVEL",
              help="Level of sbdelta's log messages (on stderr).")
def main(log_level: str) -> None:
    """sbdelta: Azure Service Bus semantics on Delta tables."""
    logger = logging.getLogger("sbdelta")
    logger.setLevel(log_level.upper())
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)


def guard(func):
    """Turn sbdelta errors into one-line CLI failures."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except ServiceBusError as exc:
            raise Failure(f"{type(exc).__name__}: {exc}") from None

    return wrapper


def admin(namespace: str):
    from ..management import ServiceBusAdministrationClient

    return ServiceBusAdministrationClient(namespace)


def client(namespace: str):
    from .. import ServiceBusClient

    return ServiceBusClient(namespace)


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, default=str)


def table(title: Optional[str], columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print ``rows`` as a table (rich)."""
    from rich.console import Console
    from rich.table import Table

    out = Table(title=title, show_lines=False)
    for name in columns:
        out.add_column(name, overflow="fold")
    for row in rows:
        out.add_row(*("" if v is None else str(v) for v in row))
    # A pipe or a file gets whole lines (a terminal: its own width).
    Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200).print(out)


def progress(description: str, total: Optional[int] = None):
    """A progress bar on stderr (rich), for work of many steps."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=Console(stderr=True), transient=True)
    return bar, bar.add_task(description, total=total)


@dataclass(frozen=True)
class Target:
    """The entity a message command works on: a queue, a topic, or a topic's subscription;
    ``dead_letter``: its dead-letter queue."""

    name: str
    kind: str  # "queue", "topic" or "subscription"
    subscription: Optional[str] = None
    dead_letter: bool = False
    requires_session: bool = False

    @property
    def label(self) -> str:
        where = (f"subscription {self.name}/{self.subscription}" if self.subscription
                 else f"{self.kind} {self.name}")
        return f"the dead-letter queue of {where}" if self.dead_letter else where


def resolve(admin_client, name: str, subscription: Optional[str] = None,
            dead_letter: bool = False, *, receiving: bool = True) -> Target:
    """The entity ``name`` (a queue, or a topic with ``subscription``) names. A topic without a
    subscription can be sent to, never received from: that is a usage error naming the fix."""
    from ..exceptions import MessagingEntityNotFoundError

    if subscription is not None:
        props = admin_client.get_subscription(name, subscription)
        return Target(name, "subscription", subscription, dead_letter,
                      bool(props.requires_session))
    try:
        props = admin_client.get_queue(name)
        return Target(name, "queue", None, dead_letter, bool(props.requires_session))
    except MessagingEntityNotFoundError:
        try:
            admin_client.get_topic(name)
        except MessagingEntityNotFoundError:
            raise MessagingEntityNotFoundError(
                f"no queue or topic named {name!r} in namespace {admin_client.namespace}") \
                from None
    if receiving or dead_letter:
        raise click.UsageError(
            f"{name!r} is a topic: its messages are received through its subscriptions; name "
            "one with --subscription")
    return Target(name, "topic")


def receivers(sb_client, target: Target, admin_client, **kwargs) -> Iterable:
    """Receivers covering the target: one, or for a session entity one per session that has
    messages (SESS-6's listing; a dead-letter queue is read without sessions)."""
    from .. import ServiceBusSubQueue

    if target.dead_letter:
        kwargs["sub_queue"] = ServiceBusSubQueue.DEAD_LETTER
    sessions: List[Optional[str]] = [None]
    if target.requires_session and not target.dead_letter:
        sessions = (admin_client.list_sessions(target.name) if target.kind == "queue" else
                    admin_client.list_subscription_sessions(target.name, target.subscription))
    for session_id in sessions:
        if session_id is not None:
            kwargs["session_id"] = session_id
        if target.kind == "queue":
            yield sb_client.get_queue_receiver(target.name, **kwargs)
        else:
            yield sb_client.get_subscription_receiver(target.name, target.subscription,
                                                      **kwargs)


entity_options = [
    click.argument("entity"),
    click.option("--subscription", "-s", default=None,
                 help="A subscription of the topic ENTITY."),
    click.option("--dead-letter", "-d", is_flag=True, help="Its dead-letter queue."),
]


def with_entity(func):
    for option in reversed(entity_options):
        func = option(func)
    return func


def message_dict(m) -> dict:
    """A received or peeked message as JSON-ready data (body as text, bytes as hex when it is
    not UTF-8)."""
    body = m.body
    if m.body_type is not AmqpMessageBodyType.DATA:  # an AMQP value or sequence body
        text = str(m)
    else:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text = "hex:" + body.hex()
    props = m.application_properties
    return {
        "sequence_number": m.sequence_number, "message_id": m.message_id,
        "enqueued_time_utc": m.enqueued_time_utc, "delivery_count": m.delivery_count,
        "state": getattr(m.state, "name", m.state), "session_id": m.session_id,
        "subject": m.subject, "content_type": m.content_type,
        "application_properties": None if props is None else {str(k): v for k, v in props.items()},
        "dead_letter_reason": m.dead_letter_reason, "body": text,
    }


def message_rows(messages: Iterable[dict], width: int = 60):
    for m in messages:
        body = m["body"]
        yield (m["sequence_number"], m["message_id"], m["enqueued_time_utc"],
               m["delivery_count"], m["session_id"], m["dead_letter_reason"],
               body if len(body) <= width else body[:width - 1] + "…")


MESSAGE_COLUMNS = ("seq", "message id", "enqueued (UTC)", "deliveries", "session",
                   "dead-letter reason", "body")
