"""The syphon's mover (PAIR-7): a backlog queue's messages moved into their destinations'
inboxes, each exactly once, however often the mover is killed and run again.

A backlog queue holds messages for many entities of the primary namespace; each row names its
destination (the caller's ``restore`` gives it as ``_path``). One step covers a range of the
backlog inbox (the versions past the frontiers, at most :data:`VERSION_WINDOW`):

1. The range is restored by the caller (properties, session id, time to live) and surveyed
   in ONE narrow Spark job (:func:`_survey`: rows per destination path, nothing kept; the
   range's versions never change, so step 3 reads them again rather than checkpoint a
   range it reads once more; a range with dead letters is checkpointed, as picking them out
   by a filter would make Spark compute the restore again inside it). The destination paths
   found are decided by the caller's ``decide``, once per path: a :class:`Target` (the
   destination's tables and what its sends check) or a :class:`Refusal` (gone, disabled).
   Each row is then delivered to its target or refused with a reason (refused destination,
   invalid row, a session destination's message without session id, too large).
2. ONE guarded commit on the backlog's ``messages`` table moves the frontiers past the range,
   marks them with the old frontier (``fwd:<seq>``, so maintenance keeps the range), the time
   and the targets that get rows (JSON, in the frontier rows' ``application_properties``), and
   registers the refused rows as dead letters (then moved to the dead-letter table).
3. ONE append per target, idempotent: it records (``app id`` = the backlog queue's syphon id,
   :func:`syphon_ids`; ``version`` = the range's last version) in the target's own commit, as
   Delta's ``txnAppId``/``txnVersion`` writes do (frontiers only move forward, so versions
   grow for every target), and a target that records the version already takes nothing. On
   local destinations ONE Spark job writes every target's rows and each target commits its
   files through delta-rs (:mod:`.staged`); elsewhere each target gets a Spark append with
   Delta's options, side by side.

The mark stays until the next step's commit replaces it. A step that finds a mark it did not
finish itself checks each marked target's transaction version; only when one lacks the range
(its mover was killed between 2 and the end of 3, or is still at it) does it read the range
again, restore it with the mark's time and targets (so it computes the same rows), and append
it where it is missing. A target that is gone or refuses messages by then gets nothing: its
rows are dead-lettered by the commit that replaces the mark, so no row is both delivered and
dead-lettered, and none is registered twice. No target takes a range twice (Delta records the
transaction version in the target's own commit). Two syphons on one backlog queue are safe:
one marks, the other finishes its mark or moves the next range.

Nothing else may move a backlog queue's frontiers while a mark is on them: receivers are
refused on backlog queues (the broker checks), and the sweep and compaction leave marked
frontiers alone.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Dict, List, Optional, Tuple, Union

from .._threads import run_side_by_side
from .apply import apply_df, apply_rows, source_relation, to_source
from .delta import materialize, retry
from .literals import sql_literal
from .forward import (Destination, append_once, destination_rows, done_version, read_marks,
                      writer_ids)
from .inbox import inbox_range
from .staged import append_staged, staging_folder
from .layout import (DEADLETTERING, MAX_ROWS_PER_PARTITION_PER_COMMIT, MAX_VERSION,
                     MESSAGE_FIELDS, MSG, VERSION_SHIFT, frontier_at, frontier_change, key_sql,
                     mark, marked_from, start_version, version_of)

__all__ = ["Target", "Refusal", "Hold", "Decision", "Moved", "Progress", "SESSION_ID_REQUIRED_REASON",
           "MESSAGE_SIZE_EXCEEDED_REASON", "INVALID_ROW_REASON", "VERSION_WINDOW", "syphon_ids", "move_backlog"]

#: Backlog inbox versions one step covers at most (fewer when a destination would take more
#: than one commit can number).
VERSION_WINDOW = 4096
#: Destination appends one step runs side by side (:func:`~sbdelta._threads.run_side_by_side`).
APPEND_WORKERS = 4
#: Dead-letter reasons for rows the destination's send would have refused (Service Bus's own
#: wording for the session case).
SESSION_ID_REQUIRED_REASON = "Session ID is null"
SESSION_ID_REQUIRED_DESCRIPTION = ("Session enabled entity doesn't allow a message whose session "
                                   "identifier is null.")
MESSAGE_SIZE_EXCEEDED_REASON = "MessageSizeExceeded"
#: A row the restore could not read (``_invalid`` says why).
INVALID_ROW_REASON = "InvalidBacklogMessage"


@dataclass(frozen=True)
class Target:
    """A destination as the syphon decided it when it marked a range: its tables (``folder``,
    ``partitions``) and what a send to it checks and applies (FWD-2: the end of its forwarding
    chain, ``hops`` away)."""

    folder: str
    partitions: int
    max_size: int
    requires_session: bool
    key_by_message_id: bool
    ttl_cap_ms: Optional[int] = None
    hops: int = 0


@dataclass(frozen=True)
class Refusal:
    """A destination the syphon cannot send to: its rows are dead-lettered with this reason."""

    reason: str
    description: str


@dataclass(frozen=True)
class Hold:
    """A destination that does not take messages now but may again (disabled for sending):
    its rows wait in the backlog queue, and so does everything after the first of them."""

    reason: str
    description: str


Decision = Union[Target, Refusal, Hold]


@dataclass
class Moved:
    """What :func:`move_backlog` moved: messages per destination path, dead letters per reason."""

    moved: Dict[str, int] = field(default_factory=dict)
    dead_lettered: Dict[str, int] = field(default_factory=dict)
    #: Destinations whose messages wait (:class:`Hold`), with why.
    waiting: Dict[str, str] = field(default_factory=dict)
    steps: int = 0

    def add(self, other: "Moved") -> None:
        for mine, theirs in ((self.moved, other.moved),
                             (self.dead_lettered, other.dead_lettered)):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0) + n
        self.waiting.update(other.waiting)
        self.steps += other.steps


def syphon_ids(store) -> Tuple[str, ...]:
    """The idempotent-write app ids of a backlog queue (:func:`.forward.writer_ids`): the
    first written with, both read."""
    return writer_ids(store, "syphon")


def _encode(decisions: Dict[str, Target]) -> str:
    return json.dumps({path: {"target" if isinstance(d, Target) else "refusal": asdict(d)}
                       for path, d in sorted(decisions.items())}, sort_keys=True)


def _decode(text: Optional[str]) -> Dict[str, Decision]:
    out: Dict[str, Decision] = {}
    for path, d in json.loads(text or "{}").items():
        out[path] = Target(**d["target"]) if "target" in d else Refusal(**d["refusal"])
    return out


# Hooks the broker gives: how backlog rows are restored (a DataFrame function), how paths are
# decided, and how a decided target is found again: (its store, None) when it takes messages,
# (its store, Hold) when it is there but refuses sends now, (None, Refusal) when it is gone.
Restore = Callable[[object], object]
Decide = Callable[[List[str]], Dict[str, Decision]]
Reopen = Callable[[str, Target], Tuple[Optional[object], Optional[Union[Refusal, Hold]]]]

#: Message columns a restore may change, kept in ``_orig`` so that a dead letter keeps the
#: backlog form (with its destination in ``x-ms-path``) for whoever reads the dead-letter queue.
_KEPT_AS_SENT = [name for name, _ in MESSAGE_FIELDS if name != "body"]


def move_backlog(source, restore: Restore, decide: Decide, reopen: Reopen, now: datetime, *,
                 max_steps: Optional[int] = None, stop: Callable[[], bool] = lambda: False,
                 progress: Optional[Progress] = None, staging: Optional[str] = None) -> Moved:
    """Move everything past the backlog queue's frontiers (and finish a range a stopped mover
    left marked). ``max_steps`` bounds the ranges moved (None: until nothing is left);
    ``stop`` is asked before each range; ``progress``, kept by the caller per backlog queue
    between runs, spares a run checking the mark the last one finished; ``staging``, a
    folder on the destinations' storage for :func:`.staged.append_staged`."""
    total, memo = Moved(), progress if progress is not None else Progress()
    while (max_steps is None or total.steps < max_steps) and not stop():
        moved, more = retry(lambda: _step(source, restore, decide, reopen, now, memo, staging),
                            what=f"syphon {source.folder}")
        total.add(moved)
        if not more:
            break
    return total


def _live_rows(source, frontiers: Dict[int, int], hi: int, tombstones, restore):
    """The restored message rows of the backlog inbox past ``frontiers`` up to version
    ``hi`` (pings and cancelled ones left out), with ``k``."""
    from pyspark.sql import functions as F

    lo = min(start_version(f) for f in frontiers.values())
    rows = (inbox_range(source, list(frontiers), frontiers, lo, hi)
            .drop("_change_type", "_commit_timestamp", "_commit_version", "idx")
            .withColumn("k", F.expr(key_sql("seq")))
            .where(F.col("kind") == MSG))
    if tombstones:
        keys = ", ".join(sql_literal(k) for k in sorted(tombstones))
        rows = rows.where(f"{key_sql('pos')} NOT IN ({keys})")
    return restore(rows.withColumn("_orig", F.struct(*_KEPT_AS_SENT)))


#: A survey's size for a row without one: larger than any limit, so its rows are counted.
_UNKNOWN_SIZE = 1 << 62


def _survey(rows) -> list:
    """What a range holds, in ONE narrow Spark job (no body kept, nothing checkpointed: the
    range's versions do not change, so the step reads them again to write them): per path,
    whether the row is invalid and whether it lacks a session id, the rows (``n``), the
    first backlog version (``v``) and the largest size (``size``)."""
    from pyspark.sql import functions as F

    return (rows.groupBy("_path", F.col("_invalid").isNotNull().alias("_bad"),
                         F.col("session_id").isNull().alias("_sessionless"))
            .agg(F.count(F.lit(1)).alias("n"),
                 F.min(F.expr(f"shiftright(seq, {VERSION_SHIFT}) & {MAX_VERSION}")).alias("v"),
                 # The size as sent to the backlog queue: the restore only shortens it
                 # (reserved properties cut out), and the body need not be read for it.
                 F.max(F.coalesce(F.col("_orig.size"), F.lit(_UNKNOWN_SIZE))).alias("size"))
            .collect())


def _counts(found: list, decisions: Dict[str, Decision]
            ) -> Optional[Dict[Tuple[Optional[str], Optional[str]], int]]:
    """Rows per (path, dead-letter reason) as :func:`_classified` gives them, from the
    :func:`_survey`; None when a group's largest message is above its target's limit (some
    of that group are too large: only the rows can say how many)."""
    counts: Dict[Tuple[Optional[str], Optional[str]], int] = {}
    for r in found:
        d = decisions.get(r._path)
        reason = None
        if r._bad:
            reason = INVALID_ROW_REASON
        elif isinstance(d, Refusal):
            reason = d.reason
        elif isinstance(d, Target):
            if d.requires_session and r._sessionless:
                reason = SESSION_ID_REQUIRED_REASON
            elif r.size is not None and r.size > d.max_size:
                return None
        counts[(r._path, reason)] = counts.get((r._path, reason), 0) + r.n
    return counts


def _classified(rows, decisions: Dict[str, Decision]):
    """``rows`` with ``_reason``/``_description`` (NULL: deliver to ``_path``'s target)."""
    from pyspark.sql import functions as F

    reason = F.when(F.col("_invalid").isNotNull(), F.lit(INVALID_ROW_REASON))
    description = F.when(F.col("_invalid").isNotNull(), F.col("_invalid"))
    for path, d in sorted(decisions.items()):
        here = F.col("_path") == F.lit(path)
        if isinstance(d, Refusal):
            reason = reason.when(here, F.lit(d.reason))
            description = description.when(here, F.lit(d.description))
            continue
        if d.requires_session:
            no_session = here & F.col("session_id").isNull()
            reason = reason.when(no_session, F.lit(SESSION_ID_REQUIRED_REASON))
            description = description.when(no_session, F.lit(SESSION_ID_REQUIRED_DESCRIPTION))
        too_large = here & (F.col("size") > F.lit(d.max_size))
        reason = reason.when(too_large, F.lit(MESSAGE_SIZE_EXCEEDED_REASON))
        description = description.when(too_large, F.concat(
            F.lit("The message is "), F.col("size").cast("string"),
            F.lit(f" bytes; its destination '{path}' accepts at most {d.max_size} bytes.")))
    return rows.withColumn("_reason", reason).withColumn("_description", description)


def _target_rows(rows, path: str, target: Target, now: datetime):
    """The destination inbox rows of ``path``'s deliverable ``rows``."""
    from pyspark.sql import functions as F

    picked = rows.where((F.col("_path") == F.lit(path)) & F.col("_reason").isNull())
    picked = picked.withColumn("hops", F.lit(target.hops or None).cast("int"))
    return destination_rows(picked, _destination(target), now, hop=False)


def _destination(target: Target) -> Destination:
    return Destination(_Partitions(target.partitions, target.folder),
                       None if target.ttl_cap_ms is None
                       else timedelta(milliseconds=target.ttl_cap_ms),
                       target.key_by_message_id)


def _all_target_rows(rows, targets: List[Tuple[object, str, Target]], now: datetime):
    """Every target's inbox rows of ``rows`` in one pass (no union of one filter per
    target): each row's target chosen by its path, its index as ``_t``, NULL for a row not
    delivered (with a ``_reason``, or no target); without ``idx``
    (:func:`.staged.append_staged` numbers them). No filter: Spark would evaluate the
    restore's expressions again inside it (it inlines computed columns into a filter it
    pushes down), once per path the filter names."""
    from pyspark.sql import functions as F

    paths = [path for _, path, _ in targets]
    index = F.when(F.col("_path") == F.lit(paths[0]), F.lit(0))
    hops = F.when(F.col("_path") == F.lit(paths[0]), F.lit(targets[0][2].hops or None))
    for i, (_, path, d) in enumerate(targets[1:], 1):
        index = index.when(F.col("_path") == F.lit(path), F.lit(i))
        hops = hops.when(F.col("_path") == F.lit(path), F.lit(d.hops or None))
    picked = (rows.withColumn("_t", F.when(F.col("_reason").isNull(), index))
              .withColumn("hops", hops.cast("int")))
    return destination_rows(picked, [_destination(d) for _, _, d in targets], now, hop=False,
                            numbered=False, choice=F.col("_t"))


def _deliver(spark, staging: Optional[str], targets: List[Tuple[object, str, Target]], rows,
             now: datetime, app_id: str, hi: int, checkpointed: bool = False) -> None:
    """Append each target's share of ``rows`` (``(store, path, target)``) to its inbox once
    per (``app_id``, ``hi``): ONE Spark job and a delta-rs commit per target where they can
    (:func:`.staged.append_staged`: local destinations, a ``staging`` folder), else a Spark
    append per target, side by side. Either way each append is idempotent, so an error or a
    kill part way leaves what the next step's :func:`_finish` completes. ``checkpointed``:
    ``rows`` are materialized already."""
    folder = staging_folder(spark, staging, [store for store, _, _ in targets])
    if folder is not None:
        append_staged(spark, folder, [store for store, _, _ in targets],
                      _all_target_rows(rows, targets, now), app_id, hi, workers=APPEND_WORKERS)
        return
    # Each target's filter would make Spark evaluate the restore again (it inlines computed
    # columns into a filter): the range is checkpointed once for them.
    if not checkpointed:
        rows = materialize(rows)
    run_side_by_side(spark, [
        (lambda store=store, path=path, d=d: append_once(store, _target_rows(rows, path, d, now),
                                                          app_id, hi))
        for store, path, d in targets], workers=APPEND_WORKERS)


@dataclass(frozen=True)
class _Partitions:
    """What :func:`destination_rows` reads of a destination store."""

    partitions: int
    folder: str


@dataclass
class Progress:
    """What a mover knows between its steps and runs: the mark it finished itself (per
    partition, the revision the mark has), so it does not check that mark's targets again."""

    finished: Dict[int, int] = field(default_factory=dict)


def _step(source, restore: Restore, decide: Decide, reopen: Reopen, now: datetime,
          memo: Progress, staging: Optional[str] = None) -> Tuple[Moved, bool]:
    """Finish a mark left unfinished, then move the next range; (what moved, whether
    versions are left)."""
    from pyspark.sql import functions as F

    current, tombstones = read_marks(source)
    marked = {p: r for p, r in current.items() if marked_from(r.lock_token) is not None}
    moved, late = Moved(steps=1), None
    if marked and {p: r.rev for p, r in marked.items()} != memo.finished:
        late = _finish(source, marked, tombstones, restore, reopen, moved, staging)
        if moved.waiting:  # a target of the mark holds: nothing moves past it meanwhile
            return moved, False
        if late is None:  # every target has the range now
            memo.finished = {p: r.rev for p, r in marked.items()}
    frontiers = {p: current[p].seq if p in current else -1 for p in range(source.partitions)}
    latest = source.latest_version(source.inbox_path)
    lagging = {p: start_version(f) for p, f in frontiers.items() if start_version(f) <= latest}
    if not lagging:
        if late is not None:  # the unfinished mark's refused rows: registered, mark cleared
            _commit(source, current, sorted(marked), None, now, None, late)
            memo.finished = {}
        return moved, False
    lo = min(lagging.values())
    hi = min(latest, lo + VERSION_WINDOW - 1)
    while True:
        pids = sorted(p for p, s in lagging.items() if s <= hi)
        rows = _live_rows(source, {p: frontiers[p] for p in pids}, hi, tombstones, restore)
        found = _survey(rows)
        per_path: Dict[Optional[str], int] = {}
        for r in found:
            per_path[r._path] = per_path.get(r._path, 0) + r.n
        # One destination commit numbers at most 2^20 rows per partition: read fewer versions.
        if max(per_path.values(), default=0) > MAX_ROWS_PER_PARTITION_PER_COMMIT and hi > lo:
            hi = lo + (hi - lo) // 2
            continue
        decisions = decide(sorted(p for p in per_path if p is not None))
        held: Dict[str, int] = {}
        for r in found:
            if isinstance(decisions.get(r._path), Hold):
                held[r._path] = min(held.get(r._path, r.v), r.v)
        if not held:
            break
        first = min(held.values())  # nothing moves past the first message that must wait
        moved.waiting.update({p: decisions[p].description for p in held
                              if held[p] == first})
        if first <= lo:
            if late is not None:
                _commit(source, current, sorted(marked), None, now, None, late)
                memo.finished = {}
            return moved, False
        hi = first - 1
    rows = _classified(rows, decisions)
    counts = _counts(found, decisions)
    if counts is None:  # a message near a destination's size limit: counted row by row
        counts = {(r._path, r._reason): r.n for r in rows.groupBy("_path", "_reason")
                  .agg(F.count(F.lit(1)).alias("n")).collect()}
    # The mark keeps only the targets that get rows: a recovery appends to those alone.
    targets = {path: d for path, d in decisions.items()
               if isinstance(d, Target) and counts.get((path, None))}
    dead = None
    if any(reason is not None for _, reason in counts):
        # A filter on the reason would make Spark compute the restore again inside it, once
        # per path the reason names: a range with dead letters is checkpointed (read once).
        rows = rows.transform(materialize)
        dead = rows.where(F.col("_reason").isNotNull())
    for (path, reason), n in counts.items():
        if reason is not None:
            moved.dead_lettered[reason] = moved.dead_lettered.get(reason, 0) + n
    # ONE commit: frontiers past the range, marked with the old ones and the targets (other
    # marks cleared), the range's dead letters and those of a mark finished above.
    step_pids = sorted(set(pids) | set(marked))
    marks = {p: mark(frontiers[p]) for p in pids} if targets else {}
    _commit(source, current, step_pids, {p: frontier_at(p, hi) for p in pids}, now,
            (marks, _encode(targets)) if targets else None, _union(late, dead))
    memo.finished = {}
    app_id = syphon_ids(source)[0]
    stores = {}
    for path, d in sorted(targets.items()):
        store, refusal = reopen(path, d)
        if store is None or isinstance(refusal, Hold):  # changed since it was decided: the
            return moved, True                          # next step finishes the mark
        stores[path] = store
    _deliver(source.spark, staging, [(stores[path], path, d)
                                     for path, d in sorted(targets.items())], rows, now,
             app_id, hi, checkpointed=dead is not None)
    for path in targets:
        moved.moved[path] = moved.moved.get(path, 0) + counts[(path, None)]
    if targets:
        memo.finished = {p: (current[p].rev + 1 if p in current else 0) for p in pids}
    return moved, hi < latest


def _union(a, b):
    if a is None:
        return b
    return a if b is None else a.unionByName(b)


def _commit(source, current, pids: List[int], seqs: Optional[Dict[int, int]], now: datetime,
            marking: Optional[Tuple[Dict[int, str], str]], dead) -> None:
    """ONE guarded commit on the backlog's messages table: the frontier rows of ``pids`` set
    to ``seqs`` (unchanged where not given), marked per ``marking`` (the old frontiers and
    the targets) or unmarked; ``dead`` rows (restored rows with ``_reason``) registered as
    dead letters, then moved to the dead-letter table. Without dead letters the rows are
    built in Python and committed by :func:`.apply.apply_rows` (delta-rs where the store's
    engine settles there: no Spark job); with them, one Spark MERGE of both."""
    from pyspark.sql import functions as F

    marks, decisions = marking if marking is not None else ({}, None)
    seqs = seqs or {}
    rows = []
    for p in pids:
        rev = current[p].rev if p in current else None
        rows.append(dict(
            frontier_change(p, seqs.get(p, current[p].seq if p in current else -1), rev),
            lock_token=marks.get(p), locked_until=now if p in marks else None,
            application_properties=decisions if p in marks else None))
    if dead is None:  # frontier rows only: through delta-rs where it settles (no Spark job)
        apply_rows(source, rows, pids, now)
        return
    dead = dead.select(
        *[c for c in dead.columns if c not in _KEPT_AS_SENT and c != "_orig"],
        *[F.col(f"_orig.{c}").alias(c) for c in _KEPT_AS_SENT])  # the backlog form
    plan = source_relation(source.spark, rows).unionByName(to_source(
        dead.withColumn("dead_letter_reason", F.col("_reason"))
        .withColumn("dead_letter_error_description", F.col("_description"))
        .withColumn("rev", F.lit(0)).withColumn("state", F.lit(DEADLETTERING))
        .withColumn("delivery_count", F.lit(0))
        .withColumn("visible_at", F.col("enqueued_time"))
        .withColumn("_op", F.lit("insert"))).drop("_out"))
    dead_pids = sorted({r.pid for r in dead.select("pid").distinct().collect()})
    apply_df(source, plan, sorted(set(pids) | set(dead_pids)), now)
    if dead_pids:
        source.move_dead_letters(dead_pids, now)


def _finish(source, marked, tombstones, restore: Restore, reopen: Reopen, moved: Moved,
            staging: Optional[str] = None):
    """A mark another mover (or a killed one) left: append the range to each target whose
    transaction version shows it missing, as that mover would have (its time, its targets,
    the same rows). Returns the rows of targets that refuse messages now (with ``_reason``;
    None when there are none), for the next commit to dead-letter."""
    from pyspark.sql import functions as F

    hi = max(version_of(r.seq) for r in marked.values())
    last = {p: r for p, r in marked.items() if version_of(r.seq) == hi}
    targets = {path: d for path, d in _decode(
        next(iter(last.values())).application_properties).items() if isinstance(d, Target)}
    ids = syphon_ids(source)
    missing: Dict[str, Tuple[object, Optional[Refusal]]] = {}
    for path, d in sorted(targets.items()):
        store, refusal = reopen(path, d)
        if store is None or done_version(store, ids) < hi:
            missing[path] = (store, refusal)
    if not missing:
        return None
    held = {path: r for path, (_, r) in missing.items() if isinstance(r, Hold)}
    if held:  # the mark waits for them (appending the others now would change nothing)
        moved.waiting.update({path: r.description for path, r in held.items()})
        return None
    then = datetime.fromtimestamp(max(r.marked_at for r in last.values()) / 1e6, timezone.utc)
    olds = {p: marked_from(r.lock_token) for p, r in last.items()}
    rows = _classified(_live_rows(source, olds, hi, tombstones, restore),
                       targets).transform(materialize)
    refused = {path: refusal for path, (_, refusal) in missing.items() if refusal is not None}
    taking = [(store, path, targets[path]) for path, (store, refusal) in sorted(missing.items())
              if refusal is None]
    if taking:
        _deliver(source.spark, staging, taking, rows, then, ids[0], hi, checkpointed=True)
        for r in (rows.where(F.col("_path").isin([p for _, p, _ in taking])
                             & F.col("_reason").isNull())
                  .groupBy("_path").agg(F.count(F.lit(1)).alias("n")).collect()):
            moved.moved[r._path] = moved.moved.get(r._path, 0) + r.n
    if not refused:
        return None
    late = _classified(rows.where(F.col("_path").isin(list(refused))
                                  & F.col("_reason").isNull())
                       .drop("_reason", "_description"), refused)
    for r in late.groupBy("_reason").agg(F.count(F.lit(1)).alias("n")).collect():
        moved.dead_lettered[r._reason] = moved.dead_lettered.get(r._reason, 0) + r.n
    return late
