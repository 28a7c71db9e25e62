"""Cancelling scheduled messages (``cancel_scheduled_messages``), in ONE commit, all or none.

A scheduled message is either registered (a ``SCHEDULED`` row in ``messages``, removed by the
cancel) or still only in the inbox, past its partition's frontier (then a ``CANCELLED``
tombstone under its key makes registration drop it, and counts leave it out). A sequence number
that is neither (unknown, of another partition layout, already visible or delivered, an
ordinary message) fails the whole cancel with MessageNotFoundError and changes nothing: the
inbox is checked before the commit, and the commit itself trips the ``NOT_SCHEDULED`` guard on
any registered row that is not a future scheduled message. A registration racing the cancel
touches the same partition, so one of the two MERGEs conflicts and is redone.

On a topic (TOPIC-6) the message is cancelled in every subscription, then recorded as cancelled
in the topic's own ``messages`` table (which holds nothing but those tombstones, for the topic's
counts and to refuse a second cancel). The check runs against the topic's inbox first; each
subscription's step is idempotent (a tombstone already there is left alone), so a cancel that
stopped half way (a crash) is finished by calling it again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable, Sequence, Set

from . import rs, rs_feed
from .apply import apply_rows
from .delta import guard_error, retry
from .guards import GuardTripped
from .literals import sql_literal
from .inbox import inbox_range
from .layout import (CANCELLED, MAX_VERSION, MSG, POS_MASK, SCHEDULED, VERSION_SHIFT, msg_key,
                     partition_of, sequence_number)
from .._clock import as_utc
from .reads import by_seq, query


def cancel_scheduled(store, seqs: Sequence[int], now: datetime, *, what: str) -> None:
    seqs = list(dict.fromkeys(seqs))
    bad = [s for s in seqs if partition_of(s) >= store.partitions]
    if bad:
        raise _not_scheduled(what, bad)

    def step():
        frontiers = store.frontiers()
        condition, _ = by_seq(store, seqs, f"kind = '{MSG}'")
        registered = {r.seq for r in query(store, f"SELECT seq FROM {{M}} WHERE {condition}")}
        pending = [s for s in seqs if s not in registered]
        behind = [s for s in pending if s <= frontiers[partition_of(s)]]
        if behind:  # registered once and gone since: delivered, settled or expired
            raise _not_scheduled(what, behind)
        if pending:
            waiting = _waiting_in_inbox(store, pending, now)
            missing = [s for s in pending if s not in waiting]
            if missing:
                raise _not_scheduled(what, missing)
        rows = [{"pid": partition_of(s), "k": msg_key(s), "kind": MSG, "seq": s, "rev": 0,
                 "state": CANCELLED, "_op": "cancel", "_guard": "NOT_SCHEDULED"} for s in seqs]
        try:
            apply_rows(store, rows, {r["pid"] for r in rows}, now)
        except GuardTripped as tripped:
            if tripped.code != "NOT_SCHEDULED":
                raise
            raise _not_scheduled(what, seqs) from None

    retry(step, what=what)


def _waiting_in_inbox(store, seqs: Sequence[int], now: datetime) -> Set[int]:
    """Those of ``seqs`` that the inbox holds as messages scheduled after ``now``: read by
    delta-rs on a queue's local table, else by Spark."""
    versions = [(s >> VERSION_SHIFT) & MAX_VERSION for s in seqs]
    pids = {partition_of(s) for s in seqs}
    if store.admit is None and store.engine.settles(store.inbox_path):
        latest = rs.version(store.inbox_path)
        if min(versions) > latest:  # numbers no commit of the inbox has given yet
            return set()
        wanted = set(seqs)
        return {row["seq"] for row in rs_feed.inbox_rows(
                    store.inbox_path, {p: -1 for p in pids}, min(versions),
                    min(max(versions), latest), sequence_number,
                    columns=["kind", "scheduled_enqueue_time"])
                if row["seq"] in wanted and row["kind"] == MSG
                and row["scheduled_enqueue_time"] is not None
                and as_utc(row["scheduled_enqueue_time"]) > now}
    return {r.seq for r in inbox_range(store, pids, {}, min(versions), max(versions))
            .where(f"kind = '{MSG}' AND scheduled_enqueue_time > {sql_literal(now)} "
                   f"AND seq IN ({', '.join(map(str, seqs))})")
            .select("seq").collect()}


def _not_scheduled(what: str, seqs) -> Exception:
    return guard_error(GuardTripped("NOT_SCHEDULED"),
                       f"{what}: {sorted(seqs)[:10]} is not a scheduled message of this entity "
                       "that is still waiting for its time (unknown, already enqueued or "
                       "delivered, or an ordinary message). Nothing was cancelled")


def _registered_copies(store, seqs: Sequence[int]):
    """Cancel rows for the action copies (TOPIC-5) of ``seqs`` a subscription registered
    already; copies not registered yet are cancelled by the tombstone of their position."""
    if not getattr(store.admit, "copy_numbers", None):
        return []
    found = (store.messages().where(
        f"kind = '{MSG}' AND state = '{SCHEDULED}' AND (seq & {POS_MASK}) IN "
        f"({', '.join(map(str, seqs))}) AND seq <> (seq & {POS_MASK})").select("seq").collect())
    return [{"pid": partition_of(r.seq), "k": msg_key(r.seq), "kind": MSG, "seq": r.seq,
             "rev": 0, "state": CANCELLED, "_op": "cancel_all"} for r in found]


def cancel_topic_scheduled(topic, subscriptions: Iterable, seqs: Sequence[int], now: datetime,
                           *, what: str) -> None:
    """TOPIC-6: cancel scheduled messages of the ``topic`` store in every subscription store."""
    seqs = list(dict.fromkeys(seqs))
    bad = [s for s in seqs if partition_of(s) >= topic.partitions]
    if bad:
        raise _not_scheduled(what, bad)
    cancelled = {r.seq for r in topic.rows_by_seq(seqs, f"kind = '{MSG}'")[0]
                 .select("seq").collect()}
    versions = [(s >> VERSION_SHIFT) & MAX_VERSION for s in seqs]
    found = {r.seq for r in inbox_range(
        topic, {partition_of(s) for s in seqs}, {}, min(versions), max(versions))
        .where(f"kind = '{MSG}' AND scheduled_enqueue_time > {sql_literal(now)} "
               f"AND seq IN ({', '.join(map(str, seqs))})")
        .select("seq").collect()}
    missing = [s for s in seqs if s not in found or s in cancelled]
    if missing:
        raise _not_scheduled(what, missing)
    rows = [{"pid": partition_of(s), "k": msg_key(s), "kind": MSG, "seq": s, "rev": 0,
             "state": CANCELLED, "_op": "cancel_all"} for s in seqs]
    pids = {r["pid"] for r in rows}
    for store in subscriptions:
        retry(lambda: apply_rows(store, rows + _registered_copies(store, seqs), pids, now),
              what=what)
    topic_rows = [{**r, "_op": "cancel", "_guard": "NOT_SCHEDULED"} for r in rows]

    def record():
        try:
            apply_rows(topic, topic_rows, pids, now)
        except GuardTripped as tripped:
            if tripped.code != "NOT_SCHEDULED":
                raise
            raise _not_scheduled(what, seqs) from None

    retry(record, what=what)
