"""The message tables of one entity and every operation on them.

Each entity (a queue today; subscriptions later) has three Delta tables under its folder:

``inbox``      written only by senders, only by blind appends (partitioned by ``pid``, change
               data feed on). A row's sequence number is implicit: ``pid << 48 | version << 20
               | idx`` where ``version`` is the commit that added it and ``idx`` its position in
               that commit's partition. Appends never conflict with each other, so senders never
               make anyone fail and sequence numbers follow commit order.
``messages``   owned by receivers (partitioned by ``pid``). It holds the rows a receiver has
               *registered* (taken over from the inbox): locked, deferred, scheduled and
               returned messages, one ``FRONTIER`` row per partition (the last inbox position
               registered), ``DEDUP`` rows (duplicate detection history) and ``CANCELLED``
               tombstones for scheduled messages cancelled before registration. Messages that
               were never touched stay in the inbox, so this table's size follows the work in
               flight, not the backlog.
``deadletter`` the dead-letter queue: the same shape as ``messages`` without a frontier; rows
               keep their sequence number.

Every change to ``messages``/``deadletter`` is ONE ``MERGE`` (:data:`APPLY_CLAUSES`) whose
source rows name the row they expect (``_rev``, the row's revision, or ``_token``, its lock
token). A row that is not as expected trips a guard and the whole MERGE writes nothing. Its
ON clause carries literal ``pid IN (...)`` so that Delta's conflict check only sees the
partitions the operation touched.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ._delta import (create_table, delta_log, find_commit, latest_version, merge,
                     remove_files_quietly, retry, sql_literal)
from .schema import ddl, tblproperties

PID_SHIFT = 48
VERSION_SHIFT = 20
IDX_MASK = (1 << VERSION_SHIFT) - 1
MAX_VERSION = (1 << (PID_SHIFT - VERSION_SHIFT)) - 1
MAX_ROWS_PER_PARTITION_PER_COMMIT = 1 << VERSION_SHIFT
SEQ_MASK = (1 << 64) - 1

# Message kinds (column ``kind``) and states (column ``state``).
MSG, FRONTIER, DEDUP, PING = "MSG", "FRONTIER", "DEDUP", "PING"
# PAIR-6: a message of this content type is a ping (kind PING in the inbox). Registration drops
# pings, so no receive, peek or count ever sees one (RECV-7); maintenance purges them from the
# inbox with the registered rows.
PING_CONTENT_TYPE = "application/vnd.ms-servicebus-ping"
ACTIVE, DEFERRED, SCHEDULED = "ACTIVE", "DEFERRED", "SCHEDULED"
DEADLETTERING, CANCELLED, COMPLETED = "DEADLETTERING", "CANCELLED", "COMPLETED"

MAX_DELIVERY_REASON = "MaxDeliveryCountExceeded"
TTL_EXPIRED_REASON = "TTLExpiredException"

# What a sender sets (and what travels with a message into the dead-letter queue).
MESSAGE_FIELDS = (
    ("message_id", "STRING"),
    ("body", "BINARY"),
    ("application_properties", "STRING"),
    ("session_id", "STRING"),
    ("partition_key", "STRING"),
    ("content_type", "STRING"),
    ("correlation_id", "STRING"),
    ("subject", "STRING"),
    ("to_address", "STRING"),
    ("reply_to", "STRING"),
    ("reply_to_session_id", "STRING"),
    ("time_to_live_ms", "BIGINT"),
    ("enqueued_time", "TIMESTAMP"),
    ("scheduled_enqueue_time", "TIMESTAMP"),
    ("expires_at", "TIMESTAMP"),
    ("size", "INT"),
)

INBOX_COLUMNS = (("pid", "INT"), ("idx", "INT"), ("kind", "STRING")) + MESSAGE_FIELDS

# Columns a planner-driven update ('update' op) sets from the source row.
CONTROL_COLUMNS = (
    ("seq", "BIGINT"),
    ("state", "STRING"),
    ("lock_token", "STRING"),
    ("locked_until", "TIMESTAMP"),
    ("delivery_count", "INT"),
    ("visible_at", "TIMESTAMP"),
    ("dedup_until", "TIMESTAMP"),
    ("dead_letter_reason", "STRING"),
    ("dead_letter_error_description", "STRING"),
    ("dead_letter_source", "STRING"),
)

MESSAGES_COLUMNS = ((("pid", "INT"), ("k", "STRING"), ("kind", "STRING"), ("rev", "BIGINT"))
                    + CONTROL_COLUMNS + MESSAGE_FIELDS)

# Extra source columns of the apply MERGE.
APPLY_COLUMNS = (
    ("_op", "STRING"),        # delete | update | insert | settle_delete | settle_update | cancel
                              # | purge (maintenance: really delete, even in a dead-letter table)
    ("_rev", "BIGINT"),       # expected revision (delete, update)
    ("_token", "STRING"),     # expected lock token (settle_*)
    ("_guard", "STRING"),     # guard code raised when the row is not as expected
    ("_keep_lock", "BOOLEAN"),  # settle_update: keep the lock (renew) or release it
    ("_abandon", "BOOLEAN"),  # settle_update: an abandon (may hit max delivery count)
    ("_max_dc", "INT"),       # the entity's max delivery count, for abandon
)
SOURCE_COLUMNS = MESSAGES_COLUMNS + APPLY_COLUMNS
COLUMN_NAMES = [name for name, _ in MESSAGES_COLUMNS]

INBOX_PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
    "delta.enableDeletionVectors": "false",
    # Each file's defaultRowCommitVersion tells maintenance which send commit it holds.
    "delta.enableRowTracking": "true",
}
MESSAGES_PROPERTIES = {
    "delta.enableDeletionVectors": "false",
}


def _apply_clauses(pids: Sequence[int], now: datetime, tombstones: bool = False) -> str:
    """The apply MERGE. With ``tombstones`` (the dead-letter table) removals leave a COMPLETED
    row behind, so that a repeated dead-letter copy cannot bring a completed message back."""
    pid_list = ", ".join(str(int(p)) for p in sorted(set(pids)))
    remove = (f"UPDATE SET state = '{COMPLETED}', lock_token = NULL, locked_until = NULL, "
              f"body = NULL, rev = t.rev + 1") if tombstones else "DELETE"
    now_sql = sql_literal(now)
    lock_ok = f"t.lock_token = s._token AND t.locked_until > {now_sql}"
    update_all = ", ".join(f"{c} = s.{c}" for c, _ in CONTROL_COLUMNS)
    over_max = "(s._abandon AND t.delivery_count >= s._max_dc)"
    insert_cols = ", ".join(COLUMN_NAMES)
    insert_vals = ", ".join(f"s.{c}" for c in COLUMN_NAMES)
    raise_guard = "CAST(raise_error(concat('SBDELTA_GUARD:', s._guard)) AS STRING)"
    return f"""
    ON t.pid IN ({pid_list}) AND t.pid = s.pid AND t.k = s.k
    WHEN MATCHED AND s._op = 'delete' AND t.rev = s._rev THEN {remove}
    WHEN MATCHED AND s._op = 'purge' AND t.rev = s._rev THEN DELETE
    WHEN MATCHED AND s._op = 'update' AND t.rev = s._rev THEN
      UPDATE SET {update_all}, application_properties = s.application_properties,
                 rev = t.rev + 1
    WHEN MATCHED AND s._op = 'settle_delete' AND {lock_ok} THEN {remove}
    WHEN MATCHED AND s._op = 'settle_update' AND {lock_ok} THEN UPDATE SET
      state = CASE WHEN {over_max} THEN '{DEADLETTERING}' ELSE coalesce(s.state, t.state) END,
      dead_letter_reason = CASE WHEN {over_max} THEN '{MAX_DELIVERY_REASON}'
                                ELSE coalesce(s.dead_letter_reason, t.dead_letter_reason) END,
      dead_letter_error_description = CASE WHEN {over_max}
          THEN concat('Message could not be consumed after ', t.delivery_count,
                      ' delivery attempts.')
          ELSE coalesce(s.dead_letter_error_description, t.dead_letter_error_description) END,
      lock_token = CASE WHEN s._keep_lock THEN t.lock_token END,
      locked_until = CASE WHEN s._keep_lock THEN s.locked_until END,
      application_properties = coalesce(s.application_properties, t.application_properties),
      rev = t.rev + 1
    WHEN MATCHED AND s._op = 'cancel' AND t.state = '{SCHEDULED}' AND t.visible_at > {now_sql}
      THEN DELETE
    WHEN MATCHED AND s._op <> 'cancel' THEN UPDATE SET k = {raise_guard}
    WHEN NOT MATCHED AND s._op IN ('insert', 'cancel') THEN INSERT ({insert_cols})
      VALUES ({insert_vals})
    WHEN NOT MATCHED THEN INSERT (k) VALUES ({raise_guard})
    """


def frontier_at(pid: int, version: int) -> int:
    """The frontier value that passes every row of ``version`` (and before) in ``pid``.

    Frontiers are sequence numbers, so they carry the partition id in their top bits.
    """
    return (pid << PID_SHIFT) | (version << VERSION_SHIFT) | IDX_MASK


def msg_key(seq: int) -> str:
    return f"m{seq:019d}"


def key_sql(seq_col: str) -> str:
    return f"concat('m', lpad(CAST({seq_col} AS STRING), 19, '0'))"


def seq_sql(pid: str = "pid", version: str = "_commit_version", idx: str = "idx") -> str:
    return (f"(shiftleft(CAST({pid} AS BIGINT), {PID_SHIFT}) | "
            f"shiftleft(CAST({version} AS BIGINT), {VERSION_SHIFT}) | CAST({idx} AS BIGINT))")


def partition_of(seq: int) -> int:
    return seq >> PID_SHIFT


def lock_token_prefix() -> str:
    """Random first half of the lock tokens handed out by one lock grant."""
    return f"{random.getrandbits(64):016x}"


def lock_token_sql(prefix: str, seq_col: str = "seq") -> str:
    """A UUID-shaped lock token: 64 random bits of the grant, then the 64-bit sequence number."""
    h = f"lpad(hex({seq_col}), 16, '0')"
    return (f"lower(concat('{prefix[:8]}-{prefix[8:12]}-{prefix[12:16]}-', substr({h}, 1, 4), "
            f"'-', substr({h}, 5, 12)))")


def lock_token(prefix: str, seq: int) -> str:
    h = f"{seq:016x}"
    return f"{prefix[:8]}-{prefix[8:12]}-{prefix[12:16]}-{h[:4]}-{h[4:]}"


def seq_of_token(token: str) -> Optional[int]:
    """The sequence number inside a lock token, or None when it is not one of ours."""
    try:
        value = uuid.UUID(str(token))
    except (ValueError, TypeError, AttributeError):
        return None
    if str(value) != str(token).lower():
        return None
    return value.int & SEQ_MASK


def seq_of_token_sql(col: str) -> str:
    return f"CAST(conv(substr(replace({col}, '-', ''), 17, 16), 16, 10) AS BIGINT)"


@dataclass(frozen=True)
class Policy:
    """What the entity's properties say about delivery, read when an operation starts."""

    lock_duration: timedelta
    max_delivery_count: int
    default_ttl: Optional[timedelta]
    dead_letter_on_expiration: bool
    duplicate_detection: Optional[timedelta]  # the window, None when off


DLQ_POLICY = Policy(timedelta(seconds=30), 2 ** 31 - 1, None, False, None)


@dataclass
class Counts:
    active: int = 0
    scheduled: int = 0
    deferred: int = 0
    locked: int = 0
    size_in_bytes: int = 0


class MessageStore:
    """The tables of one entity, and every read and write on them.

    ``partitions`` is 16 for partitioned entities, 1 otherwise; ``dead_letter`` makes this the
    store of a dead-letter queue (no inbox, no expiry, no delivery limit).
    """

    def __init__(self, spark, folder: str, partitions: int, *, dead_letter: bool = False) -> None:
        self.spark = spark
        self.folder = folder
        self.partitions = partitions
        self.dead_letter = dead_letter
        self.inbox_path = None if dead_letter else f"{folder}/inbox"
        self.messages_path = f"{folder}/deadletter" if dead_letter else f"{folder}/messages"
        self._delta_logs: Dict[str, object] = {}

    def dead_letter_store(self) -> "MessageStore":
        return MessageStore(self.spark, self.folder, self.partitions, dead_letter=True)

    # -- tables --------------------------------------------------------------------------------
    def ensure_tables(self) -> None:
        if self.inbox_path:
            create_table(self.spark, self.inbox_path, ddl(INBOX_COLUMNS), partitioned_by="pid",
                         properties=tblproperties(INBOX_PROPERTIES))
            self.dead_letter_store().ensure_tables()
        create_table(self.spark, self.messages_path, ddl(MESSAGES_COLUMNS), partitioned_by="pid",
                     properties=tblproperties(MESSAGES_PROPERTIES))

    def _delta_log(self, path: str):
        log = self._delta_logs.get(path)
        if log is None:
            log = self._delta_logs[path] = delta_log(self.spark, path)
        return log

    def latest_version(self, path: str) -> int:
        """The table's latest committed version (a listing of its log, no Spark job)."""
        return latest_version(self.spark, path)

    def commit_version_of(self, path: str, token: str, after: int) -> int:
        """The version whose commitInfo.userMetadata is ``token``, searching after ``after``."""
        changes = self._delta_log(path).getChanges(after + 1, False)
        while changes.hasNext():
            entry = changes.next()
            actions = entry._2()
            for i in range(actions.size()):
                action = actions.apply(i)
                if action.getClass().getSimpleName() == "CommitInfo":
                    meta = action.userMetadata()
                    if meta.isDefined() and meta.get() == token:
                        return int(entry._1())
        raise RuntimeError(f"commit {token} not found in {path} after version {after}")

    def messages(self):
        return self.spark.read.format("delta").load(self.messages_path)

    # -- send ----------------------------------------------------------------------------------
    def append(self, df) -> Optional[Tuple[int, int]]:
        """Append inbox rows in one commit; returns its (version, rows written), read from the
        Delta log, or None when ``df`` had no rows (then nothing was committed).

        Appends only to the existing inbox: DataFrameWriterV2's ``append`` refuses a missing
        table, where ``df.write.mode("append")`` would create one in a deleted queue's folder.
        """
        token = f"sbdelta:{uuid.uuid4().hex}"
        before = self.latest_version(self.inbox_path)
        df.writeTo(f"delta.`{self.inbox_path}`").option("userMetadata", token).append()
        return find_commit(self._delta_log(self.inbox_path), token, before)

    # -- shared SQL ----------------------------------------------------------------------------
    def _expired_sql(self, policy: Policy, now_sql: str, prefix: str = "") -> str:
        if self.dead_letter:
            return "FALSE"
        stored = f"{prefix}expires_at"
        if policy.default_ttl is None:
            exp = stored
        else:
            micros = int(policy.default_ttl / timedelta(microseconds=1))
            exp = (f"coalesce({stored}, timestamp_micros(unix_micros({prefix}enqueued_time) "
                   f"+ {micros}))")
        return f"coalesce({exp} <= {now_sql}, FALSE)"

    def _conditions(self, policy: Policy, now: datetime) -> Tuple[str, str, str]:
        """SQL for (claimable, needs-action, expired) over messages rows."""
        now_sql = sql_literal(now)
        live = (f"kind = '{MSG}' AND state IN ('{ACTIVE}', '{SCHEDULED}') "
                f"AND visible_at <= {now_sql} "
                f"AND (locked_until IS NULL OR locked_until <= {now_sql})")
        expired = self._expired_sql(policy, now_sql)
        over = "FALSE" if self.dead_letter else f"delivery_count >= {policy.max_delivery_count}"
        claimable = f"({live} AND NOT ({expired}) AND NOT ({over}))"
        action = (f"(({live} AND (({expired}) OR ({over}))) "
                  f"OR (kind = '{MSG}' AND state = '{DEADLETTERING}'))")
        return claimable, action, expired

    # -- reading the inbox ---------------------------------------------------------------------
    @staticmethod
    def _start_version(frontier: int) -> int:
        if frontier < 0:
            return 0
        version, idx = frontier >> VERSION_SHIFT & MAX_VERSION, frontier & IDX_MASK
        return version + 1 if idx == IDX_MASK else version

    def _inbox_range(self, pids: Iterable[int], frontiers: Dict[int, int], lo: int, hi: int):
        """Inbox rows of versions lo..hi in ``pids`` past each partition's frontier, with seq."""
        from pyspark.sql import functions as F

        pids = sorted(set(pids))
        frontier_case = "CASE pid " + " ".join(
            f"WHEN {p} THEN {frontiers.get(p, -1)}" for p in pids) + " ELSE -1 END"
        df = (self.spark.read.format("delta").option("readChangeFeed", "true")
              .option("startingVersion", lo).option("endingVersion", hi)
              .load(self.inbox_path)
              .where(f"_change_type = 'insert' AND pid IN ({', '.join(map(str, pids))})")
              .withColumn("seq", F.expr(seq_sql()))
              .where(f"seq > {frontier_case}"))
        return df

    def _scan_inbox(self, frontiers: Dict[int, int], need: int, latest: int):
        """Find unregistered inbox rows, reading as few commits as it can.

        Returns (rows DataFrame or None, last version read, available count per partition).
        Reads versions [lo, lo+window) and widens the window (x8) while fewer than ``need``
        rows turned up and newer versions exist, so the cost follows the batch, not the
        backlog.
        """
        lagging = {p: self._start_version(f) for p, f in frontiers.items()
                   if self._start_version(f) <= latest}
        if not lagging:
            return None, latest, {}
        lo = min(lagging.values())
        window = 16
        while True:
            hi = min(latest, lo + window - 1)
            pids = [p for p, start in lagging.items() if start <= hi]
            df = self._inbox_range(pids, frontiers, lo, hi)
            counts = {r.pid: r.n for r in df.groupBy("pid").count()
                      .withColumnRenamed("count", "n").collect()}
            if sum(counts.values()) >= need or hi >= latest or window >= 4096:
                return df, hi, counts
            window *= 8

    # -- receive -------------------------------------------------------------------------------
    def _stats(self, policy: Policy, now: datetime):
        from pyspark.sql import functions as F

        claimable, action, _ = self._conditions(policy, now)
        rows = (self.messages().groupBy("pid").agg(
            F.max(F.when(F.col("kind") == FRONTIER, F.col("seq"))).alias("frontier"),
            F.max(F.when(F.col("kind") == FRONTIER, F.col("rev"))).alias("frontier_rev"),
            F.sum(F.when(F.expr(claimable), 1).otherwise(0)).alias("claimable"),
            F.sum(F.when(F.expr(action), 1).otherwise(0)).alias("actions"),
        ).collect())
        return {r.pid: r for r in rows}

    def acquire(self, n: int, *, policy: Policy, now: datetime, delete: bool):
        """Hand out up to ``n`` messages: lock them (PeekLock) or remove them (ReceiveAndDelete).

        One MERGE per call (retried from scratch on conflict). Returns a DataFrame of the
        handed-out rows (checkpointed: it does not change when the tables do), possibly empty,
        and the partitions it touched.
        """
        return retry(lambda: self._acquire_once(n, policy, now, delete),
                     what=f"receive from {self.messages_path}")

    def _acquire_once(self, n: int, policy: Policy, now: datetime, delete: bool):
        stats = self._stats(policy, now)
        frontiers = {p: (stats[p].frontier if p in stats and stats[p].frontier is not None
                         else -1) for p in range(self.partitions)}
        claimable = {p: (stats[p].claimable if p in stats else 0) for p in range(self.partitions)}
        actions = {p: (stats[p].actions if p in stats else 0) for p in range(self.partitions)}
        revs = {p: stats[p].frontier_rev for p in stats if stats[p].frontier_rev is not None}
        new_rows, hi, new_counts = None, -1, {}
        if not self.dead_letter and n > sum(claimable.values()):
            latest = self.latest_version(self.inbox_path)
            have = sum(claimable.values())
            new_rows, hi, new_counts = self._scan_inbox(frontiers, max(0, n - have), latest)

        # Choose partitions: a random rotation, until the chosen ones can fill the batch.
        start = random.randrange(self.partitions)
        chosen: List[int] = []
        take_old: Dict[int, int] = {}
        take_new: Dict[int, int] = {}
        remaining = n
        for i in range(self.partitions):
            p = (start + i) % self.partitions
            old, new = claimable[p], new_counts.get(p, 0)
            if old + new + actions[p] == 0:
                continue
            if remaining <= 0 and n == 0 and actions[p]:
                pass  # a sweep (n == 0) visits every partition that needs action
            elif remaining <= 0 and old + new > 0:
                break
            take_old[p] = min(old, remaining)
            take_new[p] = min(new, remaining - take_old[p])
            remaining -= take_old[p] + take_new[p]
            chosen.append(p)
        # Partitions whose frontier lags although nothing of theirs was in the versions read.
        idle = [p for p in range(self.partitions)
                if new_rows is not None and p not in new_counts
                and self._start_version(frontiers[p]) <= hi]
        # Advance them when they lag far (or nothing else is to do), so that a partition no
        # sender uses does not make every receive re-read old commits.
        idle = [p for p in idle if not chosen or hi - self._start_version(frontiers[p]) >= 64]
        if idle:
            self._advance_frontiers(idle, hi, now)
        if not chosen:
            return self.spark.createDataFrame([], ddl(SOURCE_COLUMNS + (("_out", "BOOLEAN"),))), []

        prefix = lock_token_prefix()
        plan = self._plan(chosen, take_old, take_new, revs, new_rows, hi, new_counts,
                          policy, now, delete, prefix)
        plan = plan.localCheckpoint(eager=True)
        source = plan.where("_op IS NOT NULL").drop("_out")
        merge(self.spark, self.messages_path, source,
              _apply_clauses(chosen, now, self.dead_letter))
        out = plan.where("_out")
        if any(actions[p] for p in chosen) or (
                policy.dead_letter_on_expiration and any(take_new.values())):
            self.move_dead_letters(chosen, now)
        return out, chosen

    def _plan(self, chosen, take_old, take_new, revs, new_rows, hi, new_counts,
              policy: Policy, now: datetime, delete: bool, prefix: str):
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        claimable, action, expired = self._conditions(policy, now)
        pid_in = f"pid IN ({', '.join(map(str, chosen))})"
        lock_until = sql_literal(now + policy.lock_duration)
        m = self.messages().where(pid_in)
        parts = []

        def case(mapping: Dict[int, int]) -> str:
            return "CASE pid " + " ".join(f"WHEN {p} THEN {v}" for p, v in mapping.items()) \
                + " ELSE 0 END"

        by_pid = Window.partitionBy("pid").orderBy("seq")
        # 1. Registered messages that are free: lock them (or delete them: ReceiveAndDelete).
        old = (m.where(claimable).withColumn("_rn", F.row_number().over(by_pid))
               .where(f"_rn <= {case(take_old)}").drop("_rn"))
        if delete:
            old = self._ops(old, "delete", out=True)
        else:
            old = (old.withColumn("lock_token", F.expr(lock_token_sql(prefix)))
                   .withColumn("locked_until", F.expr(lock_until))
                   .withColumn("delivery_count", F.col("delivery_count") + 1)
                   .withColumn("state", F.lit(ACTIVE)))
            old = self._ops(old, "update", out=True)
        parts.append(old)

        # 2. Free messages that expired or reached the delivery limit: dead-letter or drop.
        over = f"delivery_count >= {policy.max_delivery_count}"
        act = m.where(f"{action} AND state <> '{DEADLETTERING}'").limit(10000)
        if not self.dead_letter:
            to_dlq = f"({over}) OR {str(policy.dead_letter_on_expiration).upper()}"
            reason = f"CASE WHEN {over} THEN '{MAX_DELIVERY_REASON}' ELSE '{TTL_EXPIRED_REASON}' END"
            desc = (f"CASE WHEN {over} THEN concat('Message could not be consumed after ', "
                    f"delivery_count, ' delivery attempts.') "
                    f"ELSE 'The message expired and was dead lettered.' END")
            drop = self._ops(act.where(f"NOT ({to_dlq})"), "delete")
            mark = (act.where(to_dlq).withColumn("state", F.lit(DEADLETTERING))
                    .withColumn("dead_letter_reason", F.expr(reason))
                    .withColumn("dead_letter_error_description", F.expr(desc))
                    .withColumn("lock_token", F.lit(None).cast("string"))
                    .withColumn("locked_until", F.lit(None).cast("timestamp")))
            parts += [drop, self._ops(mark, "update")]

        # 3. New inbox rows: register, lock, drop duplicates, honour cancellations.
        if new_rows is not None and any(take_new.get(p) for p in chosen):
            parts += self._register(m, new_rows, chosen, take_new, policy, now, delete, prefix,
                                    lock_until)
        # 4. Frontiers of the chosen partitions that took new rows.
        frontier_rows = []
        for p in chosen:
            if not take_new.get(p):
                continue
            if take_new[p] == new_counts.get(p, 0):
                frontier_rows.append((p, frontier_at(p, hi)))
            else:
                frontier_rows.append((p, None))  # the last row taken, computed below
        if frontier_rows:
            parts.append(self._frontier_rows(frontier_rows, revs, new_rows, take_new))
        plan = parts[0]
        for part in parts[1:]:
            plan = plan.unionByName(part)
        return plan

    def _ops(self, df, op: str, *, out: bool = False, guard: str = "STALE"):
        """Shape rows read from ``messages`` into apply-MERGE source rows."""
        from pyspark.sql import functions as F

        cols = [F.col(c) for c in COLUMN_NAMES]
        return df.select(
            *cols, F.lit(op).alias("_op"), F.col("rev").alias("_rev"),
            F.lit(None).cast("string").alias("_token"), F.lit(guard).alias("_guard"),
            F.lit(None).cast("boolean").alias("_keep_lock"),
            F.lit(None).cast("boolean").alias("_abandon"),
            F.lit(None).cast("int").alias("_max_dc"), F.lit(out).alias("_out"))

    def _register(self, m, new_rows, chosen, take_new, policy: Policy, now: datetime,
                  delete: bool, prefix: str, lock_until: str):
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        now_sql = sql_literal(now)
        takes = "CASE pid " + " ".join(f"WHEN {p} THEN {take_new.get(p, 0)}"
                                       for p in chosen) + " ELSE 0 END"
        rows = (new_rows.where(f"pid IN ({', '.join(map(str, chosen))})")
                .withColumn("_rn", F.row_number().over(Window.partitionBy("pid").orderBy("seq")))
                .where(f"_rn <= {takes}").drop("_rn", "_change_type", "_commit_timestamp",
                                                "_commit_version", "idx")
                .withColumn("k", F.expr(key_sql("seq")))
                .withColumn("visible_at", F.coalesce("scheduled_enqueue_time", "enqueued_time")))
        # Cancelled before registration: a tombstone waits in messages under the same key.
        tomb = m.where(f"kind = '{MSG}' AND state = '{CANCELLED}'").select(
            "pid", "k", F.col("rev").alias("_trev"))
        rows = rows.join(tomb, ["pid", "k"], "left")
        dup = F.lit(False)
        dedup_parts = []
        if policy.duplicate_detection is not None:
            window_us = int(policy.duplicate_detection / timedelta(microseconds=1))
            hist = m.where(f"kind = '{DEDUP}'").select(
                "pid", "message_id", F.col("dedup_until").alias("_dedup_until"),
                F.col("rev").alias("_drev"))
            first = Window.partitionBy("pid", "message_id").orderBy("seq")
            rows = (rows.join(hist, ["pid", "message_id"], "left")
                    .withColumn("_first", F.row_number().over(first) == 1))
            dup = (F.col("message_id").isNotNull() & (
                ~F.col("_first") | (F.col("_dedup_until").isNotNull()
                                    & (F.col("enqueued_time") < F.col("_dedup_until")))))
            rows = rows.withColumn("_dup", dup)
            # New history entries for the first occurrence of each id.
            fresh = rows.where("message_id IS NOT NULL AND NOT _dup AND _trev IS NULL")
            dedup_rows = (fresh.select(
                "pid", F.concat(F.lit("d:"), F.col("message_id")).alias("k"),
                F.lit(DEDUP).alias("kind"), F.coalesce("_drev", F.lit(0)).alias("rev"),
                "seq", F.lit(None).cast("string").alias("state"),
                F.expr(f"timestamp_micros(unix_micros(enqueued_time) + {window_us})")
                .alias("dedup_until"), "message_id",
                F.when(F.col("_drev").isNull(), F.lit("insert")).otherwise(F.lit("update"))
                .alias("_op"), F.col("_drev").alias("_rev")))
            dedup_parts.append(self._source(dedup_rows))
        else:
            rows = rows.withColumn("_dup", F.lit(False))
        expired = self._expired_sql(policy, now_sql)
        rows = (rows.withColumn("_cancelled", F.col("_trev").isNotNull())
                .withColumn("_expired", F.expr(expired))
                .withColumn("_visible", F.expr(f"visible_at <= {now_sql}"))
                .withColumn("_live", ~F.col("_dup") & ~F.col("_cancelled")
                            & (F.col("kind") == MSG)))
        parts = []
        # Tombstones of cancelled messages are consumed.
        parts.append(self._source(
            rows.where("_cancelled").select("pid", "k", F.lit(MSG).alias("kind"),
                                            F.col("_trev").alias("_rev"),
                                            F.lit("delete").alias("_op"))))
        handed = F.col("_live") & F.col("_visible") & ~F.col("_expired")
        base = rows.withColumn("rev", F.lit(0).cast("bigint"))
        # Handed out now.
        if delete:
            parts.append(self._source(base.where(handed), out=True))
        else:
            locked = (base.where(handed)
                      .withColumn("state", F.lit(ACTIVE))
                      .withColumn("lock_token", F.expr(lock_token_sql(prefix)))
                      .withColumn("locked_until", F.expr(lock_until))
                      .withColumn("delivery_count", F.lit(1))
                      .withColumn("_op", F.lit("insert")))
            parts.append(self._source(locked, out=True))
        # Scheduled for later: registered, invisible until its time.
        later = (base.where(F.col("_live") & ~F.col("_visible"))
                 .withColumn("state", F.lit(SCHEDULED)).withColumn("delivery_count", F.lit(0))
                 .withColumn("_op", F.lit("insert")))
        parts.append(self._source(later))
        # Expired on arrival: dead-lettered (when the entity says so) or dropped.
        if policy.dead_letter_on_expiration and not self.dead_letter:
            dead = (base.where(F.col("_live") & F.col("_visible") & F.col("_expired"))
                    .withColumn("state", F.lit(DEADLETTERING))
                    .withColumn("delivery_count", F.lit(0))
                    .withColumn("dead_letter_reason", F.lit(TTL_EXPIRED_REASON))
                    .withColumn("dead_letter_error_description",
                                F.lit("The message expired and was dead lettered."))
                    .withColumn("_op", F.lit("insert")))
            parts.append(self._source(dead))
        return parts + dedup_parts

    def _source(self, df, *, out: bool = False):
        """Complete ``df`` to the apply-MERGE source shape (missing columns become NULL)."""
        from pyspark.sql import functions as F

        present = set(df.columns)
        cols = []
        for name, kind in SOURCE_COLUMNS:
            if name in present:
                cols.append(F.col(name).cast(kind.lower()).alias(name))
            elif name == "_guard":
                cols.append(F.lit("STALE").alias(name))
            else:
                cols.append(F.lit(None).cast(kind.lower()).alias(name))
        cols.append(F.lit(out).alias("_out"))
        return df.select(*cols)

    def _frontier_rows(self, frontier_rows, revs, new_rows, take_new):
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        pids = [p for p, _ in frontier_rows]
        fixed = {p: v for p, v in frontier_rows if v is not None}
        takes = "CASE pid " + " ".join(f"WHEN {p} THEN {take_new[p]}" for p in pids) + " END"
        last = (new_rows.where(f"pid IN ({', '.join(map(str, pids))})")
                .withColumn("_rn", F.row_number().over(Window.partitionBy("pid").orderBy("seq")))
                .where(f"_rn <= {takes}").groupBy("pid").agg(F.max("seq").alias("_last")))
        fixed_case = ("CASE pid " + " ".join(f"WHEN {p} THEN {v}" for p, v in fixed.items())
                      + " END") if fixed else "CAST(NULL AS BIGINT)"
        # The revisions come from the same read as the frontiers the plan started from.
        rev_case = ("CASE pid " + " ".join(f"WHEN {p} THEN {revs[p]}" for p in pids if p in revs)
                    + " END") if any(p in revs for p in pids) else "NULL"
        rows = (last.withColumn("_rev", F.expr(f"CAST({rev_case} AS BIGINT)"))
                .select("pid", F.lit("f").alias("k"), F.lit(FRONTIER).alias("kind"),
                        F.coalesce(F.expr(fixed_case), F.col("_last")).alias("seq"),
                        F.coalesce(F.col("_rev"), F.lit(0)).alias("rev"), "_rev",
                        F.when(F.col("_rev").isNull(), F.lit("insert"))
                        .otherwise(F.lit("update")).alias("_op")))
        return self._source(rows)

    def _advance_frontiers(self, pids: List[int], hi: int, now: datetime) -> None:
        """Move idle partitions' frontiers past versions that held nothing for them."""
        def step():
            m = self.messages().where(f"pid IN ({', '.join(map(str, pids))}) "
                                      f"AND kind = '{FRONTIER}'")
            current = {r.pid: (r.seq, r.rev) for r in m.select("pid", "seq", "rev").collect()}
            rows = []
            for p in pids:
                seq, rev = current.get(p, (-1, None))
                target = frontier_at(p, hi)
                if seq >= target:
                    continue
                rows.append({"pid": p, "k": "f", "kind": FRONTIER, "seq": target,
                             "rev": rev or 0, "_rev": rev,
                             "_op": "insert" if rev is None else "update"})
            if rows:
                self.apply_rows(rows, pids, now)
        retry(step, what=f"advance frontiers in {self.messages_path}")

    # -- apply from Python rows ----------------------------------------------------------------
    def apply_rows(self, rows: List[dict], pids: Iterable[int], now: datetime) -> None:
        """One apply MERGE from small Python-built source rows (settlement, cancel...)."""
        names = [n for n, _ in SOURCE_COLUMNS]
        data = [tuple(row.get(n, "STALE" if n == "_guard" else None) for n in names)
                for row in rows]
        if len(data) <= 2000:
            # A literal VALUES relation: Delta need not materialize it, unlike a Python RDD.
            values = ", ".join(
                "(" + ", ".join(f"CAST({sql_literal(v)} AS {kind})"
                                for v, (_, kind) in zip(row, SOURCE_COLUMNS)) + ")"
                for row in data)
            df = self.spark.sql(f"SELECT * FROM VALUES {values} AS v({', '.join(names)})")
        else:
            df = self.spark.createDataFrame(data, ddl(SOURCE_COLUMNS))
        merge(self.spark, self.messages_path, df,
              _apply_clauses(list(pids), now, self.dead_letter))

    def settle_one(self, row: dict, now: datetime) -> bool:
        """One message's settlement as ONE DELETE or UPDATE (cheaper than the apply MERGE).

        ``row`` is a settle row as for :meth:`apply_rows`. Returns False, having written
        nothing, when the lock is not held (wrong token, expired, or the message is gone).
        """
        lit = sql_literal
        table = f"delta.`{self.messages_path}`"
        where = (f"pid = {int(row['pid'])} AND k = {lit(row['k'])} "
                 f"AND lock_token = {lit(row['_token'])} AND locked_until > {lit(now)}")
        if row["_op"] == "settle_delete" and not self.dead_letter:
            statement = f"DELETE FROM {table} WHERE {where}"
        elif row["_op"] == "settle_delete":
            statement = (f"UPDATE {table} SET state = '{COMPLETED}', lock_token = NULL, "
                         f"locked_until = NULL, body = NULL, rev = rev + 1 WHERE {where}")
        else:
            over = (f"({lit(bool(row.get('_abandon')))} "
                    f"AND delivery_count >= {int(row.get('_max_dc') or 0)})")
            keep = bool(row.get("_keep_lock"))

            def text(name):
                return f"CAST({lit(row.get(name))} AS STRING)"

            statement = (
                f"UPDATE {table} SET "
                f"state = CASE WHEN {over} THEN '{DEADLETTERING}' "
                f"ELSE coalesce({text('state')}, state) END, "
                f"dead_letter_reason = CASE WHEN {over} THEN '{MAX_DELIVERY_REASON}' "
                f"ELSE coalesce({text('dead_letter_reason')}, dead_letter_reason) END, "
                f"dead_letter_error_description = CASE WHEN {over} THEN concat("
                f"'Message could not be consumed after ', delivery_count, "
                f"' delivery attempts.') ELSE coalesce({text('dead_letter_error_description')}, "
                f"dead_letter_error_description) END, "
                f"lock_token = {'lock_token' if keep else 'NULL'}, "
                f"locked_until = {lit(row.get('locked_until')) if keep else 'NULL'}, "
                f"application_properties = coalesce({text('application_properties')}, "
                f"application_properties), rev = rev + 1 WHERE {where}")
        result = self.spark.sql(statement).collect()
        return bool(result) and result[0][0] == 1

    def apply_df(self, df, pids: Iterable[int], now: datetime) -> None:
        merge(self.spark, self.messages_path, df,
              _apply_clauses(list(pids), now, self.dead_letter))

    # -- dead-letter moves ---------------------------------------------------------------------
    def move_dead_letters(self, pids: Iterable[int], now: datetime, *,
                          copy_only: bool = False) -> int:
        """Copy DEADLETTERING rows into the dead-letter table, then remove them here.

        Two commits, each safe to repeat: the copy inserts only keys the dead-letter table does
        not have; the removal deletes only the revision it copied. A crash between them leaves
        DEADLETTERING rows that the next receive or sweep on the partition moves again.
        """
        pids = sorted(set(pids))
        dlq = self.dead_letter_store()
        moved = 0

        def step():
            from pyspark.sql import functions as F

            rows = (self.messages().where(
                f"pid IN ({', '.join(map(str, pids))}) AND kind = '{MSG}' "
                f"AND state = '{DEADLETTERING}'").limit(100000).localCheckpoint(eager=True))
            if rows.isEmpty():
                return 0
            copy = (rows.withColumn("state", F.lit(ACTIVE))
                    .withColumn("lock_token", F.lit(None).cast("string"))
                    .withColumn("locked_until", F.lit(None).cast("timestamp"))
                    .withColumn("visible_at", F.col("enqueued_time"))
                    .withColumn("rev", F.lit(0).cast("bigint"))
                    .withColumn("_op", F.lit("insert")))
            copy = self._source(copy).drop("_out")
            merge(self.spark, dlq.messages_path, copy,
                  f"ON t.pid IN ({', '.join(map(str, pids))}) AND t.pid = s.pid AND t.k = s.k "
                  f"WHEN NOT MATCHED THEN INSERT ({', '.join(COLUMN_NAMES)}) "
                  f"VALUES ({', '.join('s.' + c for c in COLUMN_NAMES)})")
            if copy_only:  # tests: stop as a crash between the two commits would
                return rows.count()
            remove = self._ops(rows, "delete").drop("_out")
            self.apply_df(remove, pids, now)
            return rows.count()

        moved = retry(step, what=f"dead-letter move in {self.messages_path}")
        return moved

    # -- peek ------------------------------------------------------------------------------------
    def peek(self, n: int, from_seq: int, now: datetime):
        """Up to ``n`` messages of ONE partition with sequence number >= ``from_seq``.

        Returns (rows, partition) where rows are Spark Rows sorted by sequence number, without
        changing anything. The partition is the one ``from_seq`` belongs to.
        """
        from pyspark.sql import functions as F

        p = partition_of(from_seq) if self.partitions > 1 else 0
        m = self.messages().where(f"pid = {p}")
        registered = (m.where(f"kind = '{MSG}' AND state IN ('{ACTIVE}', '{DEFERRED}', "
                              f"'{SCHEDULED}') AND seq >= {from_seq}")
                      .orderBy("seq").limit(n).collect())
        rows = list(registered)
        if self.inbox_path:
            frontier = m.where(f"kind = '{FRONTIER}'").select("seq").collect()
            f = frontier[0].seq if frontier else -1
            latest = self.latest_version(self.inbox_path)
            # Past the frontier, and at or after from_seq (in this partition's range).
            start = f if from_seq <= (p << PID_SHIFT) else max(f, from_seq - 1)
            df, _, counts = self._scan_inbox({p: start}, n, latest)
            if df is not None and counts:
                new = (df.withColumn("k", F.expr(key_sql("seq")))
                       .withColumn("visible_at",
                                   F.coalesce("scheduled_enqueue_time", "enqueued_time"))
                       .where(f"kind = '{MSG}'")
                       .orderBy("seq").limit(n).collect())
                rows += new
        rows.sort(key=lambda r: r.seq)
        return rows[:n], p

    # -- lookups -------------------------------------------------------------------------------
    def rows_by_seq(self, seqs: Sequence[int], where: str = "TRUE"):
        pids = sorted({partition_of(s) if self.partitions > 1 else 0 for s in seqs})
        keys = ", ".join(sql_literal(msg_key(s)) for s in seqs)
        return (self.messages().where(f"pid IN ({', '.join(map(str, pids))}) AND k IN ({keys}) "
                                      f"AND {where}"), pids)

    # -- counts --------------------------------------------------------------------------------
    def counts(self, now: datetime) -> Counts:
        from pyspark.sql import functions as F

        now_sql = sql_literal(now)
        result = Counts()
        m = self.messages()
        agg = m.where(f"kind = '{MSG}' AND state <> '{CANCELLED}'").agg(
            F.sum(F.expr(f"CASE WHEN state = '{ACTIVE}' OR (state = '{SCHEDULED}' "
                         f"AND visible_at <= {now_sql}) THEN 1 ELSE 0 END")).alias("active"),
            F.sum(F.expr(f"CASE WHEN state = '{SCHEDULED}' AND visible_at > {now_sql} "
                         f"THEN 1 ELSE 0 END")).alias("scheduled"),
            F.sum(F.expr(f"CASE WHEN state = '{DEFERRED}' THEN 1 ELSE 0 END")).alias("deferred"),
            F.sum(F.expr(f"CASE WHEN state NOT IN ('{DEADLETTERING}', '{COMPLETED}') "
                         f"AND locked_until > {now_sql} THEN 1 ELSE 0 END")).alias("locked"),
            F.sum(F.expr(f"CASE WHEN state NOT IN ('{DEADLETTERING}', '{COMPLETED}') "
                         f"THEN size ELSE 0 END"))
            .alias("size")).collect()[0]
        result.active = agg.active or 0
        result.scheduled = agg.scheduled or 0
        result.deferred = agg.deferred or 0
        result.locked = agg.locked or 0
        result.size_in_bytes = agg.size or 0
        if self.inbox_path:
            frontiers = {r.pid: r.seq for r in m.where(f"kind = '{FRONTIER}'")
                         .select("pid", "seq").collect()}
            frontiers = {p: frontiers.get(p, -1) for p in range(self.partitions)}
            latest = self.latest_version(self.inbox_path)
            lagging = {p: f for p, f in frontiers.items() if self._start_version(f) <= latest}
            if lagging:
                lo = min(self._start_version(f) for f in lagging.values())
                inbox = self._inbox_range(lagging, frontiers, lo, latest).where(
                    f"kind = '{MSG}'")
                agg = inbox.agg(
                    F.sum(F.expr(f"CASE WHEN coalesce(scheduled_enqueue_time, enqueued_time) "
                                 f"<= {now_sql} THEN 1 ELSE 0 END")).alias("active"),
                    F.sum(F.expr(f"CASE WHEN scheduled_enqueue_time > {now_sql} "
                                 f"THEN 1 ELSE 0 END")).alias("scheduled"),
                    F.sum("size").alias("size")).collect()[0]
                result.active += agg.active or 0
                result.scheduled += agg.scheduled or 0
                result.size_in_bytes += agg.size or 0
        return result

    # -- maintenance ---------------------------------------------------------------------------
    def frontiers(self) -> Dict[int, int]:
        """Each partition's frontier (-1 where nothing was registered yet)."""
        found = {r.pid: r.seq for r in self.messages().where(f"kind = '{FRONTIER}'")
                 .select("pid", "seq").collect()}
        return {p: found.get(p, -1) for p in range(self.partitions)}

    def purge_inbox(self, frontiers: Dict[int, int], *, dry_run: bool = False) -> int:
        """Remove the inbox files every partition frontier has passed; returns their rows.

        A send commit writes one file per partition, so a file holds the rows of one commit
        (its ``defaultRowCommitVersion``, kept by row tracking) in one partition. Files whose
        commit is wholly behind their partition's frontier are registered (copied into the
        messages table, or settled) and nobody reads them again. They are removed in one
        commit marked ``dataChange=false``: the change feed that receivers read past the
        frontier shows nothing for it, and senders (blind appends) never conflict with it.
        """
        # Versions <= done[p] are wholly behind the frontier of p (version 0 is the CREATE).
        done = {p: self._start_version(f) - 1 for p, f in frontiers.items()}
        where = " OR ".join(f"(partitionValues['pid'] = '{p}' AND defaultRowCommitVersion <= {v})"
                            for p, v in done.items() if v >= 1)
        if not where:
            return 0
        return remove_files_quietly(self.spark, self.inbox_path, where, dry_run=dry_run)[1]

    def dead_rows(self, frontiers: Dict[int, int], now: datetime, live_sources=None):
        """Rows nobody reads again: cancellation tombstones behind the frontier, duplicate
        detection history past its window, and (dead-letter table) COMPLETED tombstones whose
        source row is gone (``live_sources``: keys still DEADLETTERING in the source)."""
        if self.dead_letter:
            dead = self.messages().where(f"kind = '{MSG}' AND state = '{COMPLETED}'")
            if live_sources is not None:
                dead = dead.join(live_sources, ["pid", "k"], "left_anti")
            return dead
        case = ("CASE pid " + " ".join(f"WHEN {p} THEN {f}" for p, f in frontiers.items())
                + " ELSE -1 END")
        return self.messages().where(
            f"(kind = '{MSG}' AND state = '{CANCELLED}' AND seq <= {case}) "
            f"OR (kind = '{DEDUP}' AND dedup_until <= {sql_literal(now)})")

    def purge_rows(self, read_rows, now: datetime) -> int:
        """Delete the rows ``read_rows()`` reads from this table, by revision: one guarded
        MERGE, redone from a fresh read when a receiver changed one of them meanwhile."""
        from pyspark.sql import functions as F

        def step():
            plan = read_rows().select("pid", "k", "kind", F.col("rev").alias("_rev"),
                               F.lit("purge").alias("_op")).localCheckpoint(eager=True)
            pids = sorted(r.pid for r in plan.select("pid").distinct().collect())
            if pids:
                self.apply_df(self._source(plan).drop("_out"), pids, now)
            return plan.count()

        return retry(step, what=f"purge {self.messages_path}")
