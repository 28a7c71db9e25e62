"""``sbdelta stats | peek | send | receive | purge | dlq resubmit``: a namespace's messages from a
terminal.

Every command is the public client API (:class:`sbdelta.ServiceBusClient`, the administration
client) run once: the same locks, settlement and errors as a program. On a local namespace the
commands that read (stats of queues, peek) and the single-message paths run through delta-rs
and start no JVM (docs/engines.md); a subscription's counts and receives start Spark.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import List, Optional, Tuple

import click

from .base import (MESSAGE_COLUMNS, Target, admin, client, guard, json_option, main,
                   message_dict, message_rows, namespace_option, progress, receivers, resolve,
                   table, to_json, with_entity)

#: Messages per receive or send commit of the commands that move many.
BATCH = 500


def age_text(enqueued: Optional[datetime], now: datetime) -> Optional[str]:
    """How long ago ``enqueued`` was, in its two largest units (``3m07s``, ``2h05m``,
    ``4d03h``); None for None."""
    if enqueued is None:
        return None
    seconds = max(0, int((now - enqueued).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return (f"{days}d{hours:02d}h" if days else f"{hours}h{minutes:02d}m" if hours
            else f"{minutes}m{seconds:02d}s")


@main.command()
@namespace_option
@json_option
@guard
def stats(namespace: str, as_json: bool) -> None:
    """Per queue and subscription: active, scheduled, deferred and dead-lettered messages and
    the age of the oldest active one; per topic: its scheduled messages and size."""
    adm = admin(namespace)
    now = datetime.now(timezone.utc)
    out = []

    def counted(kind: str, name: str, rp) -> None:
        oldest = rp.oldest_message_enqueued_time_utc
        out.append({"kind": kind, "name": name, "active": rp.active_message_count,
                    "scheduled": rp.scheduled_message_count,
                    "deferred": rp.deferred_message_count,
                    "dead_letter": rp.dead_letter_message_count,
                    "size_in_bytes": rp.size_in_bytes, "oldest_enqueued_time_utc": oldest,
                    "oldest_age_seconds": None if oldest is None
                    else max(0.0, (now - oldest).total_seconds())})

    for q in adm.list_queues():
        counted("queue", q.name, adm.get_queue_runtime_properties(q.name))
    for t in adm.list_topics():
        rp = adm.get_topic_runtime_properties(t.name)
        out.append({"kind": "topic", "name": t.name, "active": None,
                    "scheduled": rp.scheduled_message_count, "deferred": None,
                    "dead_letter": None, "size_in_bytes": rp.size_in_bytes,
                    "oldest_enqueued_time_utc": None, "oldest_age_seconds": None})
        for s in adm.list_subscriptions(t.name):
            counted("subscription", f"{t.name}/{s.name}",
                    adm.get_subscription_runtime_properties(t.name, s.name))
    if as_json:
        click.echo(to_json(out))
        return
    table(f"namespace {adm.namespace}",
          ("kind", "name", "active", "scheduled", "deferred", "dead-letter", "bytes",
           "oldest active"),
          [(e["kind"], e["name"], e["active"], e["scheduled"], e["deferred"], e["dead_letter"],
            e["size_in_bytes"], age_text(e["oldest_enqueued_time_utc"], now)) for e in out])


@main.command()
@with_entity
@click.option("--count", "-c", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many messages at most.")
@namespace_option
@json_option
@guard
def peek(entity: str, subscription: Optional[str], dead_letter: bool, count: int,
         namespace: str, as_json: bool) -> None:
    """Show messages of a queue, a subscription (-s) or their dead-letter queue (-d) without
    locking or changing them (scheduled and deferred ones with their state)."""
    from ..exceptions import SessionCannotBeLockedError

    adm = admin(namespace)
    target = resolve(adm, entity, subscription, dead_letter)
    got: List[dict] = []
    with client(namespace) as sb:
        for receiver in receivers(sb, target, adm):
            try:
                with receiver:
                    while len(got) < count:
                        page = receiver.peek_messages(count - len(got))
                        if not page:
                            break
                        got += [message_dict(m) for m in page]
            except SessionCannotBeLockedError as exc:
                click.echo(f"skipped: {exc}", err=True)
            if len(got) >= count:
                break
    _print_messages(target, got, as_json)


def _print_messages(target: Target, got: List[dict], as_json: bool) -> None:
    if as_json:
        click.echo(to_json(got))
    else:
        table(f"{target.label}: {len(got)} message(s)", MESSAGE_COLUMNS, message_rows(got))


def parse_property(text: str) -> Tuple[str, object]:
    """``KEY=VALUE`` as an application property: numbers and true/false typed as JSON reads
    them, a JSON string (``"5"``) as its text, anything else as it is written."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{text!r} is not KEY=VALUE", param_hint="--property")
    try:  # numbers and true/false as JSON reads them; anything else is text
        parsed = json.loads(value)
        if isinstance(parsed, (int, float, bool, str)):
            return key, parsed
    except ValueError:
        pass
    return key, value


@main.command()
@click.argument("entity")
@click.argument("bodies", nargs=-1)
@click.option("--file", "-f", "source", type=click.File("r", encoding="utf-8"), default=None,
              help="Send each line of this file as a message ('-': standard input).")
@click.option("--property", "-p", "properties", multiple=True,
              help="An application property KEY=VALUE (numbers and true/false are typed; "
                   "'KEY=\"5\"' is the text 5); repeatable.")
@click.option("--session-id", default=None, help="The messages' session (a session entity).")
@click.option("--partition-key", default=None, help="The messages' partition key.")
@click.option("--subject", default=None)
@click.option("--content-type", default=None)
@click.option("--message-id", default=None, help="The message id (one message only).")
@namespace_option
@json_option
@guard
def send(entity: str, bodies: Tuple[str, ...], source, properties: Tuple[str, ...],
         session_id: Optional[str], partition_key: Optional[str], subject: Optional[str],
         content_type: Optional[str], message_id: Optional[str], namespace: str,
         as_json: bool) -> None:
    """Send messages to a queue or topic ENTITY: each BODY argument, or each line of --file
    (standard input when neither is given and it is not a terminal), in commits of 500."""
    from .. import ServiceBusMessage

    if bodies and source is not None:
        raise click.UsageError("give message bodies as arguments or --file, not both")
    if not bodies:
        if source is None:
            stdin = sys.stdin
            if stdin.isatty():
                raise click.UsageError("no message: give bodies as arguments, --file, or "
                                       "standard input")
            source = stdin
        bodies = tuple(line.rstrip("\r\n") for line in source)
    if message_id is not None and len(bodies) != 1:
        raise click.UsageError(f"--message-id names one message; {len(bodies)} given")
    props = dict(parse_property(p) for p in properties) or None
    messages = [ServiceBusMessage(body, application_properties=props, session_id=session_id,
                                  partition_key=partition_key, subject=subject,
                                  content_type=content_type, message_id=message_id)
                for body in bodies]  # every message checked before anything is sent
    adm = admin(namespace)
    target = resolve(adm, entity, receiving=False)
    with client(namespace) as sb:
        sender = (sb.get_queue_sender(entity) if target.kind == "queue"
                  else sb.get_topic_sender(entity))
        with sender:
            bar, task = progress(f"sending to {target.label}", len(messages))
            with bar:
                for at in range(0, len(messages), BATCH):
                    chunk = messages[at:at + BATCH]
                    sender.send_messages(chunk)
                    bar.advance(task, len(chunk))
    if as_json:
        click.echo(to_json({"entity": target.label, "sent": len(messages)}))
    else:
        click.echo(f"sent {len(messages)} message(s) to {target.label}")


SETTLEMENTS = ("complete", "abandon", "dead-letter")


@main.command()
@with_entity
@click.option("--count", "-c", type=click.IntRange(min=1), default=1, show_default=True,
              help="How many messages at most.")
@click.option("--settle", type=click.Choice(SETTLEMENTS), default="complete", show_default=True,
              help="What to do with them once shown.")
@click.option("--reason", default=None, help="The dead-letter reason (with --settle dead-letter).")
@click.option("--max-wait", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds to wait for a first message.")
@namespace_option
@json_option
@guard
def receive(entity: str, subscription: Optional[str], dead_letter: bool, count: int,
            settle: str, reason: Optional[str], max_wait: float, namespace: str,
            as_json: bool) -> None:
    """Receive up to --count messages (PeekLock), show them, and complete (or abandon, or
    dead-letter) them in one commit per batch. A session entity is read session by session."""
    from ..exceptions import SessionCannotBeLockedError

    if reason is not None and settle != "dead-letter":
        raise click.UsageError("--reason goes with --settle dead-letter")
    adm = admin(namespace)
    target = resolve(adm, entity, subscription, dead_letter)
    got: List[dict] = []
    with client(namespace) as sb:
        for receiver in receivers(sb, target, adm, max_wait_time=max_wait):
            try:
                with receiver:
                    while len(got) < count:
                        batch = receiver.receive_messages(min(BATCH, count - len(got)))
                        if not batch:
                            break
                        got += [message_dict(m) for m in batch]
                        if settle == "complete":
                            receiver.complete_messages(batch)
                        elif settle == "abandon":
                            receiver.abandon_messages(batch)
                        else:
                            receiver.dead_letter_messages(batch, reason=reason or "sbdelta cli")
            except SessionCannotBeLockedError as exc:
                click.echo(f"skipped: {exc}", err=True)
            if len(got) >= count:
                break
    _print_messages(target, got, as_json)


@main.command()
@with_entity
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@namespace_option
@json_option
@guard
def purge(entity: str, subscription: Optional[str], dead_letter: bool, yes: bool,
          namespace: str, as_json: bool) -> None:
    """Remove every message of a queue, a subscription or their dead-letter queue that is not
    locked (ReceiveAndDelete, 500 per commit). Locked messages stay until their lock ends."""
    from .. import ServiceBusReceiveMode
    from ..exceptions import SessionCannotBeLockedError

    adm = admin(namespace)
    target = resolve(adm, entity, subscription, dead_letter)
    if not yes:
        click.confirm(f"remove every message of {target.label}?", abort=True)
    removed = 0
    with client(namespace) as sb:
        bar, task = progress(f"purging {target.label}")
        with bar:
            for receiver in receivers(sb, target, adm, max_wait_time=0,
                                      receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE):
                try:
                    with receiver:
                        while True:
                            batch = receiver.receive_messages(BATCH)
                            if not batch:
                                break
                            removed += len(batch)
                            bar.advance(task, len(batch))
                except SessionCannotBeLockedError as exc:
                    click.echo(f"skipped: {exc}", err=True)
    if as_json:
        click.echo(to_json({"entity": target.label, "removed": removed}))
    else:
        click.echo(f"removed {removed} message(s) from {target.label}")


@main.group()
def dlq() -> None:
    """Dead-letter queues."""


@dlq.command()
@click.argument("entity")
@click.option("--subscription", "-s", default=None, help="A subscription of the topic ENTITY.")
@click.option("--reason", default=None,
              help="Only dead letters with this dead-letter reason (exact match).")
@click.option("--count", "-c", type=click.IntRange(min=1), default=None,
              help="At most this many (default: all).")
@click.option("--to-topic", is_flag=True,
              help="For a subscription: send them to its topic (every subscription whose "
                   "rules take them gets a copy). Needed: a subscription has no inbox of its own.")
@namespace_option
@json_option
@guard
def resubmit(entity: str, subscription: Optional[str], reason: Optional[str],
             count: Optional[int], to_topic: bool, namespace: str, as_json: bool) -> None:
    """Send dead letters back to their entity and remove them from the dead-letter queue.

    Each batch is sent (one commit), then completed in the dead-letter queue (one commit): a
    crash between the two sends that batch again (at least once; a queue with duplicate
    detection drops the repeats). The copies keep body, properties, ids, session and subject;
    their time to live starts again from the entity's default."""
    from ..dead_letters import resubmit_dead_letters

    if subscription is not None and not to_topic:
        raise click.UsageError(
            "a subscription's dead letters can only go back through its topic, which copies "
            "them to every subscription whose rules take them: add --to-topic to do that")
    adm = admin(namespace)
    target = resolve(adm, entity, subscription, dead_letter=True)
    with client(namespace) as sb:
        bar, task = progress(f"resubmitting from {target.label}", count)
        with bar:
            moved = resubmit_dead_letters(sb, entity, subscription_name=subscription,
                                          reason=reason, max_count=count, to_topic=to_topic,
                                          on_batch=lambda n: bar.advance(task, n))
    where = f"{'topic' if to_topic else target.kind} {entity}"
    if as_json:
        click.echo(to_json({"from": target.label, "to": where, "resubmitted": moved}))
    else:
        click.echo(f"resubmitted {moved} message(s) from {target.label} to {where}")

