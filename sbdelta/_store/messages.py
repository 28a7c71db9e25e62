"""``MessageStore``: the message tables of one entity and the verbs the broker calls on them.

The tables are described in :mod:`.layout`; each verb lives in the module named after it:
sending in :mod:`.inbox`, receiving in :mod:`.receive`, locks in :mod:`.locks`, settlement in
:mod:`.settle`, dead-letter moves in :mod:`.deadletter`, peeks and counts in :mod:`.reads`, and
every guarded change in :mod:`.apply`. This class holds the paths and hands each call on; code
above ``_store`` talks only to it (and to the names re-exported by ``sbdelta._store``).
"""

from __future__ import annotations

import copy
import os
import time
from datetime import datetime, timedelta
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from . import (deadletter, expiry, forward, inbox, reads, receive, rs, rs_tables, schedule,
               sessions, settle)
from .apply import apply_df, apply_rows, as_ops
from ..exceptions import MessagingEntityNotFoundError
from .codec import send_error
from .delta import (LITERAL_ROWS, create_table, latest_version, materialize, retry,
                    run_guarded)
from .guards import GuardTripped
from .literals import local_path, sql_literal
from .deltalog import add_missing_columns, require_portable, trim_log
from .engines import Engine, resolve_engine
from .layout import (CANCELLED, COMPLETED, DEADLETTERING, DEDUP, INBOX_COLUMNS, INBOX_NAMES,
                     INBOX_PROPERTIES, LOG_FILE, MESSAGES_COLUMNS, MESSAGES_PROPERTIES, MSG,
                     OPERATION_BOUND, SESSION, case_by_pid, key_partition)
from .locks import Policy, conditions
from .reads import Counts
from .schema import FOREIGN_FEATURES, ddl, tblproperties

__all__ = ["MessageStore", "Counts"]


class MessageStore:
    """The tables of one entity, and every read and write on them.

    ``partitions`` is 16 for partitioned entities, 1 otherwise; ``dead_letter`` makes this the
    store of a dead-letter queue (no inbox, no expiry, no delivery limit); ``engine`` says what
    delta-rs does on its tables (:mod:`.engines`; default: ``$SBDELTA_ENGINE``, else auto).

    A subscription reads its topic's inbox (``inbox``, a path outside its folder) through
    ``admit``: a function from inbox rows to the rows this subscription takes, with their
    columns as it sees them (its rules, TTL-3's cap). Every read of the inbox goes through it
    (:func:`.inbox.inbox_range`), so registration, peeks, counts and sweeps agree on it.
    """

    def __init__(self, spark, folder: str, partitions: int, *, dead_letter: bool = False,
                 inbox: Optional[str] = None, admit: Optional[Callable] = None,
                 engine: Optional[Engine] = None, location: Optional[str] = None) -> None:
        self.spark = spark
        self.engine = engine if engine is not None else resolve_engine()
        self.folder = folder
        # The folder below the namespace root (the entity's path and incarnation): what names
        # the store in other tables, the same whichever URI a process gives the root by.
        self.location = folder if location is None else location
        self.partitions = partitions
        self.dead_letter = dead_letter
        self.owns_inbox = inbox is None and not dead_letter
        self.inbox_path = None if dead_letter else (inbox or f"{folder}/inbox")
        self.admit = admit
        self.messages_path = f"{folder}/deadletter" if dead_letter else f"{folder}/messages"

    def dead_letter_store(self) -> "MessageStore":
        return MessageStore(self.spark, self.folder, self.partitions, dead_letter=True,
                            engine=self.engine, location=self.location)

    def reading(self, admit: Optional[Callable]) -> "MessageStore":
        """This store seeing its inbox through ``admit`` (a subscription's current rules)."""
        view = copy.copy(self)
        view.admit = admit
        return view

    # -- tables --------------------------------------------------------------------------------
    def ensure_tables(self, what: str = "") -> None:
        """Create the entity's tables if missing; raise StorageLayoutError for tables of an
        older layout (``what`` names the entity in that error)."""
        if self.owns_inbox:
            self.ensure_inbox(what)
        if self.inbox_path:
            self.dead_letter_store().ensure_tables(what)
        self._ensure_messages_table(what)
        if not self.dead_letter:  # the entity's last table: all are made
            _mark_made(self.folder)

    def _ensure_messages_table(self, what: str) -> None:
        _ensure_table(self.spark, self.engine, self.messages_path, MESSAGES_COLUMNS,
                      MESSAGES_PROPERTIES, what or self.folder, self.folder)

    def ensure_inbox(self, what: str = "") -> None:
        """Create the inbox if missing."""
        _ensure_table(self.spark, self.engine, self.inbox_path, INBOX_COLUMNS,
                      INBOX_PROPERTIES, what or self.folder, self.folder)

    def ensure_topic_tables(self, what: str = "") -> None:
        """A topic's tables: its inbox, and a ``messages`` table that holds only the
        tombstones of its cancelled scheduled messages (TOPIC-6)."""
        self.ensure_inbox(what)
        self._ensure_messages_table(what)
        _mark_made(self.folder)

    def start_at_latest(self, now: datetime) -> int:
        """Set every partition's frontier to the inbox's latest version (a new subscription
        reads only what its topic gets from now on); returns that version (read by delta-rs
        on a local inbox: a subscription is made without a JVM)."""
        version = (rs.version(self.inbox_path) if self.engine.reads(self.inbox_path)
                   else self.latest_version(self.inbox_path))
        receive.advance_frontiers(self, list(range(self.partitions)), version, now)
        return version

    def latest_version(self, path: str) -> int:
        """The table's latest committed version (a listing of its log, no Spark job)."""
        return latest_version(self.spark, path)

    def messages(self):
        return self.spark.read.format("delta").load(self.messages_path)

    def conditions(self, policy: Policy, now: datetime):
        """SQL over messages rows: (claimable, needs-action, expired); see :mod:`.locks`."""
        return conditions(policy, now, dead_letter=self.dead_letter)

    # -- send, receive, settle -----------------------------------------------------------------
    def append(self, df, *, limit: int, entity: str) -> Optional[Tuple[int, int]]:
        """One inbox commit: (version, rows written), None when ``df`` had no rows. A row check
        inside the write that fails (``send_dataframe``) raises its sbdelta error, naming
        ``entity`` and the size ``limit``; nothing is written then."""
        try:
            return run_guarded(lambda: inbox.append(self, df))
        except GuardTripped as tripped:
            raise send_error(tripped.code, limit=limit, entity=entity) from None

    def append_rows(self, rows: List[tuple], *, limit: int,
                    entity: str) -> Optional[Tuple[int, int]]:
        """One inbox commit of rows built and checked in Python (``INBOX_COLUMNS`` order, from
        ``send_messages``): (version, rows written), None when ``rows`` is empty. Local
        tables are appended to by delta-rs (milliseconds, no Spark job), others by Spark."""
        if not rows:
            return None
        if self.engine.appends(self.inbox_path):
            version = retry(lambda: rs.append(self.inbox_path, INBOX_NAMES, rows),
                            what=f"send to {self.inbox_path}")
            return version, len(rows)
        return self.append(self.spark.createDataFrame(rows, ddl(INBOX_COLUMNS)), limit=limit,
                           entity=entity)

    def acquire(self, n: int, *, policy: Policy, now, delete: bool,
                as_rows: bool = False, session: Optional[sessions.SessionHold] = None):
        return receive.acquire(self, n, policy=policy, now=now, delete=delete, as_rows=as_rows,
                               session=session)

    # -- sessions (SESS-2..5) ------------------------------------------------------------------
    def lock_session(self, session_id: str, now: datetime, duration: timedelta,
                     grace: timedelta = timedelta(0)) -> sessions.SessionHold:
        """Take the session's lock; SessionCannotBeLockedError when someone holds it."""
        return sessions.lock_session(self, session_id, key_partition(session_id, self.partitions),
                                     now, duration, grace)

    def lock_next_session(self, policy: Policy, now: datetime,
                          duration: timedelta) -> Optional[sessions.SessionHold]:
        """SESS-3: lock the free session with the oldest deliverable message; None when no
        session is free with something to deliver (a session taken by another receiver
        between the read and the lock is passed over)."""
        return self.lock_next_sessions(1, policy, now, duration)

    def lock_sessions(self, session_ids: Sequence[str], now: datetime, duration: timedelta,
                      grace: timedelta = timedelta(0)) -> sessions.SessionHold:
        """Take the locks of the named sessions in one commit, under one token; all or none
        (SessionCannotBeLockedError names the sessions someone holds)."""
        return sessions.lock_sessions(
            self, {s: key_partition(s, self.partitions) for s in session_ids}, now, duration,
            grace)

    def lock_next_sessions(self, count: int, policy: Policy, now: datetime,
                           duration: timedelta) -> Optional[sessions.SessionHold]:
        """SESS-3 for up to ``count`` sessions at once: lock, in one commit, the free sessions
        with the oldest deliverable messages (the oldest first); None when no session is free
        with something to deliver. Sessions another receiver takes between the read and the
        commit are passed over (the commit retries without them)."""
        found = sessions.available(self, policy, now)
        while found:
            hold = sessions.lock_sessions(self, dict(found[:count]), now, duration,
                                          policy.lock_grace, skip_held=True)
            if hold is not None:
                return hold
            found = found[count:]  # all taken meanwhile: the next ones
        return None

    def list_sessions(self) -> List[str]:
        """SESS-6: ids of the sessions with messages or state, sorted."""
        return sessions.listing(self)

    def move_session_lock(self, hold: sessions.SessionHold, until: datetime, now: datetime, *,
                          what: str) -> None:
        """Renew (``until`` later) or release (``until`` = now) a session lock and the locks of
        the messages held under it, in one commit."""
        sessions.move_lock(self, hold, until, now, what)

    def session_state(self, hold: sessions.SessionHold, now: datetime, *,
                      what: str, session_id: Optional[str] = None) -> Optional[bytes]:
        """The state of a held session (the hold's only one, or ``session_id``)."""
        return sessions.get_state(self, hold, now, what, session_id)

    def set_session_state(self, hold: sessions.SessionHold, state: Optional[bytes],
                          now: datetime, *, what: str, session_id: Optional[str] = None) -> None:
        sessions.set_state(self, hold, state, now, what, session_id)

    def receive_deferred(self, seqs: Sequence[int], *, policy: Policy, now: datetime,
                         delete: bool, what: str,
                         session: Optional[sessions.SessionHold] = None) -> List:
        return receive.receive_deferred(self, seqs, policy=policy, now=now, delete=delete,
                                        what=what, session=session)

    def settle(self, messages: Sequence[settle.Locked], settlement: settle.Settlement,
               now: datetime, *, what: str) -> None:
        settle.settle_messages(self, messages, settlement, now, what=what)

    def void_locks(self, now: datetime) -> int:
        """End every message lock and session lock held at ``now`` here and in the
        dead-letter table (SETTLE-7: the entity's properties changed); returns how many
        ended (:func:`.settle.void_locks`)."""
        return settle.void_locks(self, now) + settle.void_locks(self.dead_letter_store(), now)

    def settle_frame(self, tokens, settlement: settle.Settlement, now: datetime, *,
                     what: str) -> int:
        return settle.settle_frame(self, tokens, settlement, now, what=what)

    def cancel_scheduled(self, seqs: Sequence[int], now: datetime, *, what: str) -> None:
        """Cancel scheduled messages not yet visible, all or none (see :mod:`.schedule`)."""
        schedule.cancel_scheduled(self, seqs, now, what=what)

    def cancel_scheduled_everywhere(self, subscriptions: Iterable["MessageStore"],
                                    seqs: Sequence[int], now: datetime, *, what: str) -> None:
        """TOPIC-6: cancel this topic's scheduled messages in each of its subscriptions."""
        schedule.cancel_topic_scheduled(self, subscriptions, seqs, now, what=what)

    def move_dead_letters(self, pids: Iterable[int], now: datetime, *,
                          copy_only: bool = False) -> int:
        return deadletter.move_dead_letters(self, pids, now, copy_only=copy_only)

    def finish_dead_letter_moves(self, now: datetime) -> int:
        """Move the DEADLETTERING rows a crash left, every partition (see :mod:`.deadletter`)."""
        return deadletter.finish_moves(self, now)

    # -- reads ---------------------------------------------------------------------------------
    def peek(self, n: int, from_seq: int, now: datetime, where: str = "TRUE"):
        return reads.peek(self, n, from_seq, now, where)

    def peek_partitions(self, n: int, starts: Dict[int, int], now: datetime,
                        where: str = "TRUE", *, first: bool = False) -> Dict[int, list]:
        return reads.peek_partitions(self, n, starts, now, where, first=first)

    def rows_by_seq(self, seqs: Sequence[int], where: str = "TRUE"):
        return reads.rows_by_seq(self, seqs, where)

    def counts(self, now: datetime) -> Counts:
        return reads.counts(self, now)

    def inbox_counts(self, now: datetime) -> Counts:
        """Scheduled messages and size of the inbox itself (a topic's counts)."""
        return reads.inbox_counts(self, now)

    def frontiers(self) -> Dict[int, int]:
        return reads.frontiers(self)

    def kept_frontiers(self) -> Dict[int, int]:
        """The frontiers maintenance must keep behind (see :func:`.reads.kept_frontiers`)."""
        return reads.kept_frontiers(self)

    # -- forwarding (FWD-2) --------------------------------------------------------------------
    def forward_new(self, dest: "forward.Destination", policy: Policy, now: datetime) -> int:
        """Move what was sent here past the frontiers into ``dest``'s inbox (expired
        messages are dead-lettered or dropped by ``policy``, as a receive would)."""
        return forward.forward_new(self, dest, policy, now)

    def forward_registered(self, dest: "forward.Destination", policy: Policy,
                           now: datetime) -> int:
        """Move registered messages (of this table: a dead-letter store moves its dead
        letters) into ``dest``'s inbox; messages locked by a receiver wait, expired ones are
        the sweep's."""
        return forward.forward_registered(self, dest, policy, now,
                                          dead_letters=self.dead_letter)

    # -- maintenance ---------------------------------------------------------------------------
    def sweep(self, policy: Policy, now: datetime, *, batch: int = expiry.DEFAULT_BATCH,
              dry_run: bool = False) -> expiry.SweepCounts:
        return expiry.sweep(self, policy, now, batch=batch, dry_run=dry_run)

    def purge_inbox(self, frontiers: Dict[int, int], *, dry_run: bool = False) -> int:
        return inbox.purge_inbox(self, frontiers, dry_run=dry_run)

    def trim_inbox_log(self, retain: timedelta, *, dry_run: bool = False,
                       readers: Optional[Sequence["MessageStore"]] = None) -> int:
        """Trim the inbox log behind every reader's frontier of ``retain`` ago (``readers``:
        a topic's subscriptions; default: this store)."""
        return inbox.trim_log(self, retain, dry_run=dry_run, readers=readers)

    def trim_messages_log(self, retain: timedelta, *, dry_run: bool = False) -> int:
        """Delete the messages table's log files of every version before its newest checkpoint
        older than ``retain`` (at least the operation bound); returns how many. Nothing reads
        an older version of this table than an operation's own snapshot (no change feed), and
        VACUUM with the same retention takes those versions' files; what Delta itself keeps
        (30 days by default) would make every commit and every delta-rs read of a busy queue
        list a log folder of millions of files."""
        before_ms = int((time.time() - retain.total_seconds()) * 1000)
        every = 2 ** 63 - 1  # no reader pins a version: any checkpoint may be kept from
        return trim_log(self.spark, self.messages_path, before_ms, lambda: every,
                        dry_run=dry_run)

    def topic_frontiers(self, subscriptions: Sequence["MessageStore"],
                        now: datetime) -> Dict[int, int]:
        """Per partition, the lowest frontier of a topic's subscriptions, no later than the
        last commit older than the operation bound (see :func:`.inbox.topic_frontiers`)."""
        return inbox.topic_frontiers(self, subscriptions, now)

    def dead_rows(self, frontiers: Dict[int, int], now: datetime, live_sources=None):
        """Rows nobody reads again: cancellation tombstones behind the frontier, duplicate
        detection history no message can still be checked against, session rows without
        state that nobody holds (their lock ended the operation bound ago: no holder's commit
        read them later; the next receiver of the session inserts a new one), and
        (dead-letter table) COMPLETED tombstones whose source row is gone (``live_sources``:
        keys still DEADLETTERING in the source).

        History of an id is checked when a receive registers a message (not when it is sent),
        against the message's enqueued time. It is kept while an inbox row past its partition's
        frontier (sent, not registered yet) carries the id with an enqueued time inside the
        window, and for the operation bound past the window: a send in flight stamped its
        messages' enqueued time up to that long ago, and a sender's clock may lag this one by
        up to that much.
        """
        if self.dead_letter:
            return deadletter.completed_tombstones(self, live_sources)
        from pyspark.sql import functions as F

        m = self.messages()
        history = m.where(f"kind = '{DEDUP}' AND {self._dead_sql({}, now, DEDUP)}")
        pending = inbox.pending_ids(self, frontiers)
        if pending is not None and not history.isEmpty():
            history = history.join(
                pending, F.expr("pid = _pid AND message_id = _mid AND _enq < dedup_until"),
                "left_anti")
        return (m.where(f"kind = '{MSG}' AND {self._dead_sql(frontiers, now, MSG)}")
                .unionByName(history)
                .unionByName(m.where(f"kind = '{SESSION}' AND "
                                     f"{self._dead_sql(frontiers, now, SESSION)}")))

    def dead_keys(self, frontiers: Dict[int, int], now: datetime,
                  live_sources: Optional[Sequence[Tuple[int, str]]] = None) -> Optional[list]:
        """The keys (``pid``, ``k``, ``kind``, ``rev``) of :meth:`dead_rows`, read without Spark
        (DataFusion over the local table) where the store's engine settles its tables with
        delta-rs; None elsewhere, and when duplicate-detection history is due (whether an
        unregistered inbox row still needs it is a join over the inbox's change feed, which
        :meth:`dead_rows` makes). ``live_sources``: for a dead-letter table, the source's
        DEADLETTERING keys (:meth:`deadlettering_keys`)."""
        if not self.engine.settles(self.messages_path):
            return None
        if self.dead_letter:
            live = set(live_sources or ())
            return [r for r in reads.query(
                        self, f"SELECT pid, k, kind, rev FROM {{M}} "
                              f"WHERE kind = '{MSG}' AND state = '{COMPLETED}'")
                    if (r.pid, r.k) not in live]
        found = reads.query(self, "SELECT pid, k, kind, rev FROM {M} WHERE " + " OR ".join(
            f"(kind = '{kind}' AND {self._dead_sql(frontiers, now, kind)})"
            for kind in (MSG, DEDUP, SESSION)))
        if any(r.kind == DEDUP for r in found):
            return None
        return found

    def deadlettering_keys(self) -> Optional[List[Tuple[int, str]]]:
        """(pid, k) of the rows marked DEADLETTERING, read without Spark where
        :meth:`dead_keys` can be (else None)."""
        if not self.engine.settles(self.messages_path):
            return None
        return [(r.pid, r.k) for r in reads.query(
            self, f"SELECT pid, k FROM {{M}} WHERE kind = '{MSG}' AND state = '{DEADLETTERING}'")]

    @staticmethod
    def _dead_sql(frontiers: Dict[int, int], now: datetime, kind: str) -> str:
        """The condition on rows of ``kind`` that makes them dead (see :meth:`dead_rows`)."""
        bound = sql_literal(now - OPERATION_BOUND)
        if kind == MSG:
            return f"state = '{CANCELLED}' AND seq <= {case_by_pid(frontiers, default='-1')}"
        if kind == DEDUP:
            return f"dedup_until <= {bound}"
        return (f"application_properties IS NULL "
                f"AND (locked_until IS NULL OR locked_until <= {bound})")

    def purge_rows(self, read_rows, now: datetime, read_keys=None) -> int:
        """Delete the rows ``read_rows()`` reads from this table, by revision: one guarded
        MERGE, redone from a fresh read when a receiver changed one of them meanwhile.
        ``read_keys()``, when given, reads their keys without Spark (None: it cannot)."""
        from pyspark.sql import functions as F

        def step():
            found = read_keys() if read_keys is not None else None
            if found is None:
                # Most runs find none or few: one job reads them, and they go as literal rows.
                found = read_rows().select("pid", "k", "kind", "rev").limit(
                    LITERAL_ROWS + 1).collect()
            if len(found) <= LITERAL_ROWS:
                if found:
                    apply_rows(self, [dict(pid=r.pid, k=r.k, kind=r.kind, rev=r.rev,
                                           _op="purge", _rev=r.rev) for r in found],
                               sorted({r.pid for r in found}), now)
                return len(found)
            plan = as_ops(read_rows().select("pid", "k", "kind", "rev"),
                          "purge").drop("_out").transform(materialize)
            counts = {r.pid: r.n for r in plan.groupBy("pid").agg(
                F.count(F.lit(1)).alias("n")).collect()}  # the partitions and the count: one job
            if counts:
                apply_df(self, plan, sorted(counts), now)
            return sum(counts.values())

        return retry(step, what=f"purge {self.messages_path}")



def _ensure_table(spark, engine: Engine, path: str, columns, properties, what: str,
                  folder: str) -> None:
    """Create the table at ``path`` if missing, refuse one of an older layout
    (StorageLayoutError), add the columns it lacks (through delta-rs where it can). A local
    table that delta-rs finds complete and portable is left alone without a Spark job (every
    client that opens an entity asks);
    a missing local one is made by delta-rs (:mod:`.rs_tables`), Spark making it only where
    delta-rs cannot.
    A table removed from an entity in use is not made again (:func:`_refuse_removed`)."""
    if engine.reads(path) and rs.table_ready(path, [n for n, _ in columns], FOREIGN_FEATURES):
        return
    if path in _READY and _latest_version(spark, path) >= 0:
        return  # made, portable and complete when this process last looked, and still there
    if engine.appends(path) and rs_tables.add_missing_columns(path, columns, FOREIGN_FEATURES):
        return  # made by an older sbdelta: the columns added since, by delta-rs (no JVM)
    there = _refuse_removed(spark, path, folder, what)
    if (engine.appends(path) and not there
            and rs_tables.create(path, columns, properties, partitioned_by="pid")):
        return  # made by delta-rs (no JVM), or found made by a concurrent creator
    create_table(spark, path, ddl(columns), partitioned_by="pid",
                 properties=tblproperties(properties))
    require_portable(spark, path, what)
    add_missing_columns(spark, path, columns)
    _READY.add(path)


#: Tables this process found made, portable and complete through Spark: opened again, only
#: their log is looked at (one listing, where the checks take four Spark commands).
_READY: Set[str] = set()


#: The tables an entity folder may hold (:mod:`.layout`).
_TABLES = ("inbox", "messages", "deadletter")
#: The file an entity folder gets once every table of it was made (local storage): from then
#: on a missing table was removed outside sbdelta, even if the entity was never used.
MADE_MARK = "_tables_made"


def _mark_made(folder: str) -> None:
    """Write :data:`MADE_MARK` into a local entity folder whose tables are all made (once;
    a storage that refuses the write leaves it to the next client that opens the entity)."""
    local = local_path(folder)
    if local is None:
        return
    mark = os.path.join(local, MADE_MARK)
    if os.path.exists(mark):
        return
    try:
        with open(mark, "a"):
            pass
    except OSError:
        pass


def _refuse_removed(spark, path: str, folder: str, what: str) -> bool:
    """Refuse to create the missing table ``path`` of the entity at ``folder`` when its tables
    were all made once (:data:`MADE_MARK`) or the entity was in use: another of its tables has
    a commit after its creation, or a client recorded activity on it (``_activity``, written
    only after every table was made; the two signs of entities older than the mark, and of
    storage that is not local). Such a table was removed outside sbdelta (issue 18, "Storage
    faults"); making it again, empty, would lose its messages without a word and number new
    ones from version 0 again, behind the frontiers receivers keep. A registered entity whose
    tables were never all made (its creator stopped half way) has none of these signs, and its
    tables are made as before. Returns whether a table is at ``path`` (one listing of its
    log, read once for the caller too).

    Raises:
        MessagingEntityNotFoundError: the table was removed; restore it or recreate the entity.
    """
    if _latest_version(spark, path) >= 0:
        return True  # there (an older layout, or one delta-rs cannot read): not removed
    used = [name for name in _TABLES if f"{folder}/{name}" != path
            and _latest_version(spark, f"{folder}/{name}") >= 1]
    local = local_path(folder)
    active = local is not None and bool(_listing(os.path.join(local, "_activity")))
    made = local is not None and os.path.exists(os.path.join(local, MADE_MARK))
    if not used and not active and not made:
        return False
    why = (f"its {' and '.join(used)} table{'s' if len(used) > 1 else ''} "
           f"{'have' if len(used) > 1 else 'has'} commits" if used
           else "clients recorded activity on it" if active
           else "all its tables were made when it was created")
    raise MessagingEntityNotFoundError(
        f"{what}: table {path} is missing from the storage although the entity was in use "
        f"({why}): it was removed outside sbdelta. It is not made again empty (its messages "
        "would be lost without a word, and new ones numbered again from the start). Restore "
        "the table's folder from a backup, or delete and recreate the entity")


def _listing(local: str) -> List[str]:
    try:
        return os.listdir(local)
    except OSError:
        return []


def _latest_version(spark, path: str) -> int:
    """The latest version of the table at ``path`` (-1 when there is none): from the names
    in its log folder for a local table (no JVM), else from Spark's DeltaLog."""
    local = local_path(path)
    if local is None:
        return latest_version(spark, path)
    found = [int(m.group(1)) for m in map(LOG_FILE.match,
                                          _listing(os.path.join(local, "_delta_log"))) if m]
    return max(found, default=-1)
