"""Forwarding of new inbox rows through delta-rs, without Spark (issue 16): the step of
:func:`.forward.forward_new` for local tables and windows of at most ``LITERAL_ROWS`` inbox
rows, which is what a send to a topic whose subscriptions forward leaves (FWD-2).

The protocol is :mod:`.forward`'s, step for step, on the same rows: the source's frontier
rows are marked and its dead letters registered in ONE apply MERGE, then the destination's
inbox gets ONE append recorded under the source's forwarding id and the last source version
it covers (:func:`.rs.append_once`: the idempotent write Spark's ``txnAppId``/``txnVersion``
make, so a Spark mover and a delta-rs mover racing on one source append a range once). A
subscription's rules run in Python (:func:`.inbox.inbox_rows`), the partition of a forwarded
message is Spark's choice (``crc32`` of its key, ``xxhash64`` of its sequence number without
one: :func:`.layout.keyless_partition`), and a range marked by a mover that stopped before its
append is appended by whichever engine finds it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Dict, List, Optional, Set, Tuple

from .._durations import expiry
from . import rs, rs_feed
from .apply import apply_rows
from .delta import LITERAL_ROWS
from .inbox import inbox_rows
from .layout import (CANCELLED, DEADLETTERING, FRONTIER, HOP_LIMIT_DESCRIPTION,
                     HOP_LIMIT_REASON, INBOX_NAMES, MAX_HOPS, MAX_ROWS_PER_PARTITION_PER_COMMIT,
                     MSG, TTL_EXPIRED_DESCRIPTION, TTL_EXPIRED_REASON, frontier_at,
                     frontier_change, key_partition, keyless_partition, mark, marked_from,
                     msg_key, sequence_number, start_version, version_of)
from .locks import Policy, expired

#: What :func:`new_step` returns: (messages forwarded, whether versions are left), or None
#: when the step is Spark's (nothing was written then).
Step = Optional[Tuple[int, bool]]


def usable(source, dest) -> bool:
    """Whether delta-rs may take the step: it reads the source's inbox, commits on its
    messages table and appends to the destination's inbox."""
    return (source.engine.reads(source.inbox_path)
            and source.engine.settles(source.messages_path)
            and dest.store.engine.appends(dest.store.inbox_path))


def new_step(source, dest, policy: Policy, now: datetime, ids: Tuple[str, ...],
             window: int) -> Step:
    """One range of the source's new inbox versions forwarded (see :func:`.forward._new_step`,
    whose protocol this is; at most ``window`` versions; ``ids``: the source's
    :func:`.forward.writer_ids`), or None when even one version
    holds more than ``LITERAL_ROWS`` rows, or the source's frontier and cancellation rows
    are more than that."""
    found = rs.select(source.messages_path,
                      f"kind = '{FRONTIER}' OR (kind = '{MSG}' AND state = '{CANCELLED}')",
                      LITERAL_ROWS + 1)
    if found is None or len(found) > LITERAL_ROWS:
        return None
    current = {r["pid"]: r for r in found if r["kind"] == FRONTIER}
    tombstones = {r["k"] for r in found if r["kind"] == MSG}
    app_id = ids[0]  # written with; the others read (.forward.writer_ids)
    done = max(rs.txn_version(dest.store.inbox_path, i) for i in ids)

    # 1. A range marked by a mover that stopped before its append landed.
    marked = {p: r for p, r in current.items()
              if marked_from(r["lock_token"]) is not None and version_of(r["seq"]) > done}
    if marked:
        hi = max(version_of(r["seq"]) for r in marked.values())
        olds = {p: marked_from(r["lock_token"]) for p, r in marked.items()
                if version_of(r["seq"]) == hi}
        then = max(r["locked_until"] for r in marked.values())
        lo = min(start_version(f) for f in olds.values())
        if _inbox_count(source, olds, lo, hi) > LITERAL_ROWS:
            return None
        rows = _classified(source, olds, lo, hi, tombstones, policy, then)
        forwarded = [r for r in rows if not r["_dead"]]
        if not forwarded:  # cannot be: a range is marked only when it has rows to append
            raise RuntimeError(f"forwarding mark of {source.messages_path} at version {hi} "
                               "covers no message to forward")
        rs.append_once(dest.store.inbox_path, INBOX_NAMES,
                       destination_rows(forwarded, dest, then), app_id, hi)
        return len(forwarded), True

    # 2. The next range: marked (frontiers moved, the old ones kept in the mark, dead
    #    letters registered) in ONE guarded MERGE, then appended.
    frontiers = {p: current[p]["seq"] if p in current else -1
                 for p in range(source.partitions)}
    latest = rs.version(source.inbox_path)
    lagging = {p: start_version(f) for p, f in frontiers.items() if start_version(f) <= latest}
    if not lagging:
        return 0, False
    lo = min(lagging.values())
    hi = _window_end(source, {p: frontiers[p] for p in lagging}, lo,
                     min(latest, lo + window - 1))
    if hi is None:
        return None
    pids = sorted(p for p, s in lagging.items() if s <= hi)
    rows = _classified(source, {p: frontiers[p] for p in pids}, lo, hi, tombstones, policy,
                       now)
    forwarded = [r for r in rows if not r["_dead"]]
    dead = [r for r in rows if r["_dead"]]
    if len(forwarded) > MAX_ROWS_PER_PARTITION_PER_COMMIT:
        return None  # more than one destination commit can number: Spark's halving
    plan = [frontier_row(p, hi, current[p]["rev"] if p in current else None, frontiers[p],
                         now if forwarded else None) for p in pids]
    plan += [_dead_letter_row(r) for r in dead]
    apply_rows(source, plan, pids, now)
    if dead:
        source.move_dead_letters(pids, now)
    if forwarded:
        rs.append_once(dest.store.inbox_path, INBOX_NAMES,
                       destination_rows(forwarded, dest, now), app_id, hi)
    return len(forwarded), hi < latest


def _inbox_count(source, frontiers: Dict[int, int], lo: int, hi: int) -> int:
    counts = rs_feed.inbox_version_counts(source.inbox_path, frontiers, lo, hi, sequence_number)
    return LITERAL_ROWS + 1 if counts is None else sum(counts.values())


def _window_end(source, frontiers: Dict[int, int], lo: int, hi: int) -> Optional[int]:
    """The last version of the range to forward: as far toward ``hi`` as the range holds at
    most ``LITERAL_ROWS`` inbox rows (None: version ``lo`` alone holds more)."""
    counts = rs_feed.inbox_version_counts(source.inbox_path, frontiers, lo, hi, sequence_number)
    if counts is None:
        return None
    per_version: Dict[int, int] = {}
    for (_, version), n in counts.items():
        per_version[version] = per_version.get(version, 0) + n
    total, end = 0, lo - 1
    for version in range(lo, hi + 1):
        total += per_version.get(version, 0)
        if total > LITERAL_ROWS:
            break
        end = version
    return end if end >= lo else None


def _classified(source, frontiers: Dict[int, int], lo: int, hi: int, tombstones: Set[str],
                policy: Policy, now: datetime) -> List[dict]:
    """:func:`.forward._classified` in Python: the source's inbox rows past ``frontiers`` up
    to version ``hi`` that are forwarded (``_dead`` False) or dead-lettered here (``_dead``
    True: a filter failed, a fifth hop, expired under dead-lettering on expiration), with
    their key ``k``; cancelled ones, pings and dropped expired ones left out."""
    out = []
    for row in inbox_rows(source, frontiers, lo, hi):
        if row["kind"] != MSG or msg_key(row["pos"]) in tombstones:
            continue
        row.setdefault("dead_letter_reason", None)
        row.setdefault("dead_letter_error_description", None)
        failed = row["dead_letter_reason"] is not None
        gone = expired(policy, now, row)
        at_limit = (row.get("hops") or 0) >= MAX_HOPS
        if policy.dead_letter_on_expiration:
            if not failed and gone:
                row["dead_letter_reason"] = TTL_EXPIRED_REASON
                row["dead_letter_error_description"] = TTL_EXPIRED_DESCRIPTION
            dead, keep = row["dead_letter_reason"] is not None or at_limit, True
        else:
            dead, keep = failed or (at_limit and not gone), failed or not gone
        if keep:
            out.append(dict(row, k=msg_key(row["seq"]), _dead=dead))
    return out


def frontier_row(pid: int, hi: int, rev: Optional[int], frontier: int,
                 marked_at: Optional[datetime]) -> dict:
    """The apply row moving ``pid``'s frontier (at revision ``rev``; None: not registered
    yet) past version ``hi``, marked with the old one (and when) while a range is on its way
    to the destination."""
    return dict(frontier_change(pid, frontier_at(pid, hi), rev),
                lock_token=mark(frontier) if marked_at is not None else None,
                locked_until=marked_at)


def _dead_letter_row(row: dict) -> dict:
    """The apply row registering an inbox row as a dead letter of the source (moved to its
    dead-letter queue next)."""
    hop = row["dead_letter_reason"] is None
    return dict(row, rev=0, state=DEADLETTERING, delivery_count=0, _op="insert",
                visible_at=row["scheduled_enqueue_time"] or row["enqueued_time"],
                dead_letter_reason=HOP_LIMIT_REASON if hop else row["dead_letter_reason"],
                dead_letter_error_description=(HOP_LIMIT_DESCRIPTION if hop else
                                               row["dead_letter_error_description"]))


def destination_rows(rows: List[dict], dest, now: datetime) -> List[tuple]:
    """:func:`.forward.destination_rows` in Python (a hop crossed, not dead letters): the
    destination's inbox rows (``INBOX_NAMES`` order) of ``rows``."""
    partitions = dest.store.partitions
    cap_ms = (None if dest.ttl_cap is None
              else int(dest.ttl_cap / timedelta(milliseconds=1)))
    counters: Dict[int, int] = {}
    out = []
    for row in sorted(rows, key=lambda r: r["seq"]):
        key = row.get("session_id")
        if key is None:
            key = row.get("partition_key")
        if key is None and dest.key_by_message_id:
            key = row.get("message_id")
        pid = (0 if partitions == 1 else keyless_partition(row["seq"], partitions)
               if key is None else key_partition(key, partitions))
        scheduled = row.get("scheduled_enqueue_time")
        if scheduled is not None and scheduled <= now:
            scheduled = None
        enqueued = scheduled or now
        ttl_ms, expires = row.get("time_to_live_ms"), row.get("expires_at")
        if cap_ms is not None:
            if ttl_ms is not None:  # as a send does (TTL-3)
                capped = expiry(enqueued, dest.ttl_cap)
                expires = min(e for e in (expires, capped) if e is not None) if (
                    expires is not None or capped is not None) else None
                ttl_ms = min(ttl_ms, cap_ms)
            else:
                expires = None
        idx = counters.get(pid, 0)
        counters[pid] = idx + 1
        values = dict(row, pid=pid, idx=idx, kind=MSG, scheduled_enqueue_time=scheduled,
                      enqueued_time=enqueued, time_to_live_ms=ttl_ms, expires_at=expires,
                      hops=(row.get("hops") or 0) + 1)
        out.append(tuple(values.get(name) for name in INBOX_NAMES))
    return out
