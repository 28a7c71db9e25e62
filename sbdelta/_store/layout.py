"""What an entity's message tables hold: columns, kinds, states, and sequence-number arithmetic.

Each entity (a queue today; subscriptions later) has three Delta tables under its folder:

``inbox``      written only by senders, only by blind appends (partitioned by ``pid``, change
               data feed on). A row's sequence number is implicit: ``pid << 48 | version << 20
               | idx`` where ``version`` is the commit that added it and ``idx`` its position in
               that commit's partition. Appends never conflict with each other, so senders never
               make anyone fail and sequence numbers follow commit order (SEND-3).
``messages``   owned by receivers (partitioned by ``pid``). It holds the rows a receiver has
               *registered* (taken over from the inbox): locked, deferred, scheduled and
               returned messages, one ``FRONTIER`` row per partition (the last inbox position
               registered), ``DEDUP`` rows (duplicate detection history) and ``CANCELLED``
               tombstones for scheduled messages cancelled before registration. Messages that
               were never touched stay in the inbox, so this table's size follows the work in
               flight, not the backlog.
``deadletter`` the dead-letter queue: the same shape as ``messages`` without a frontier; rows
               keep their sequence number.
"""

from __future__ import annotations

import re
import zlib
from datetime import timedelta

from .schema import PORTABLE_PROPERTIES

#: The name of a commit file or checkpoint in a table's ``_delta_log`` (group 1: its version).
LOG_FILE = re.compile(r"^(\d{20})\.(json|checkpoint\..*parquet)$")

PID_SHIFT = 48
PID_MASK = 0xF  # partitions 0..15
#: TOPIC-5: copy c (>= 1) of a topic message that a subscription rule with an action made has
#: the topic message's sequence number (its *position*) with c in the bits from COPY_SHIFT on.
COPY_SHIFT = 52
POS_MASK = (1 << COPY_SHIFT) - 1
VERSION_SHIFT = 20
IDX_MASK = (1 << VERSION_SHIFT) - 1
MAX_VERSION = (1 << (PID_SHIFT - VERSION_SHIFT)) - 1
MAX_ROWS_PER_PARTITION_PER_COMMIT = 1 << VERSION_SHIFT
SEQ_MASK = (1 << 64) - 1

# Row kinds (column ``kind``) and message states (column ``state``).
MSG, FRONTIER, DEDUP, PING = "MSG", "FRONTIER", "DEDUP", "PING"
# A topic message a subscription's rules do not take, read by a receive of a topic with
# duplicate detection (issue 13): a row of the receive's new rows only (never stored), so that
# the subscription's duplicate history holds every message id the topic took, whatever its
# rules, and a duplicate is dropped by every subscription alike. Its sequence number is its
# position with copy number SEEN_COPY (no rule's copy has it).
SEEN = "SEEN"
SEEN_COPY = (1 << (63 - COPY_SHIFT)) - 1
# SESS-2..5: one row per session of a session entity (key ``s:<session id>``), in the partition
# its session id hashes to: the session lock (lock_token, locked_until) and the session state.
SESSION = "SESSION"
# PAIR-6: a message of this content type is a ping (kind PING in the inbox). Registration drops
# pings, so no receive, peek or count ever sees one (RECV-7); maintenance purges them from the
# inbox with the registered rows.
PING_CONTENT_TYPE = "application/vnd.ms-servicebus-ping"
ACTIVE, DEFERRED, SCHEDULED = "ACTIVE", "DEFERRED", "SCHEDULED"
# A registered message on its way to the forwarding destination (_store/forward.py).
FORWARDING = "FORWARDING"
DEADLETTERING, CANCELLED, COMPLETED = "DEADLETTERING", "CANCELLED", "COMPLETED"

MAX_DELIVERY_REASON = "MaxDeliveryCountExceeded"
TTL_EXPIRED_REASON = "TTLExpiredException"
TTL_EXPIRED_DESCRIPTION = "The message expired and was dead lettered."
#: FWD-3: a message crosses at most this many forwarding hops; one more is dead-lettered.
MAX_HOPS = 4
HOP_LIMIT_REASON = "MaxTransferHopCountExceeded"
HOP_LIMIT_DESCRIPTION = (f"The message was forwarded {MAX_HOPS} times; a fifth forwarding hop "
                         "is not allowed.")

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
    # FWD-3: forwarding hops crossed so far (NULL: none); set by the forwarder, never by users.
    ("hops", "INT"),
    # The AMQP body form (issue 17): NULL for DATA (the body's bytes), 'value' or 'sequence'
    # for a body stored as JSON (sbdelta._amqp_body). Added after the first layouts: older
    # tables get it when opened (NULL: DATA).
    ("body_type", "STRING"),
)

INBOX_COLUMNS = (("pid", "INT"), ("idx", "INT"), ("kind", "STRING")) + MESSAGE_FIELDS
INBOX_NAMES = [name for name, _ in INBOX_COLUMNS]

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
COLUMN_NAMES = [name for name, _ in MESSAGES_COLUMNS]

INBOX_PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
    # Receivers read the change feed of every commit past their partition's frontier, however
    # old: Delta must not delete those commits from the log by age (its default after 30
    # days). Compaction trims the log itself, behind every frontier (inbox.trim_log).
    "delta.enableExpiredLogCleanup": "false",
    # A checkpoint every 10 commits from delta-rs too (Spark's default; delta-rs's is 100).
    # delta-rs (1.6) keeps each commit it replays since the last checkpoint as one more Arrow
    # batch of an open table's state, walked by every later operation: single sends through
    # one client took 12 ms at first and 34 ms 90 commits after a checkpoint, 12-14 ms
    # throughout with this (docs/benchmarks.md; with :data:`.rs.REOPEN_AFTER`).
    "delta.checkpointInterval": "10",
    **PORTABLE_PROPERTIES,
}
MESSAGES_PROPERTIES = {
    # File statistics for the first four data columns only (``k``, ``kind``, ``rev``, ``seq``;
    # ``pid`` is the partition): lookups by key or sequence number still skip files, and the
    # other columns' ranges skip almost nothing here (a receive's MERGE gathers a partition's
    # registered rows of every state into the file of its frontier row). Every settlement and
    # receive rewrites such a file, and both engines computed statistics for all 30 data
    # columns of it: 1.4-1.8 ms of a delta-rs completion's 15.6-17.4 ms (docs/benchmarks.md).
    # Tables made before keep Delta's default (32 columns); they work the same.
    "delta.dataSkippingNumIndexedCols": "4",
    # A checkpoint every 10 commits from delta-rs too, as for the inbox: every receive and
    # settlement commits here. A single completion in a send-receive-complete loop: 12.2-12.8
    # ms against 15.1-16.0 ms (docs/benchmarks.md). Tables made before keep delta-rs's 100.
    "delta.checkpointInterval": "10",
    **PORTABLE_PROPERTIES,
}

#: The longest any sbdelta operation may take: a receive from reading its snapshot to its
#: commit, a send from stamping its messages' enqueued time to its commit; clocks of the
#: processes on a namespace agree within it too. Maintenance never removes what an operation
#: started less than this long ago may still read or write against: it is the floor of
#: VACUUM's retention, the delay before inbox log trimming, and how long duplicate-detection
#: history outlives its window.
OPERATION_BOUND = timedelta(hours=1)


def frontier_change(pid: int, seq: int, rev) -> dict:
    """The apply source row that sets ``pid``'s frontier to ``seq``: an update of the frontier
    row at revision ``rev``, or its insert when there is none yet (``rev`` None)."""
    return {"pid": pid, "k": "f", "kind": FRONTIER, "seq": seq, "rev": rev or 0, "_rev": rev,
            "_op": "insert" if rev is None else "update"}


def frontier_at(pid: int, version: int) -> int:
    """The frontier value that passes every row of ``version`` (and before) in ``pid``.

    Frontiers are sequence numbers, so they carry the partition id in their top bits.
    """
    return (pid << PID_SHIFT) | (version << VERSION_SHIFT) | IDX_MASK


#: A forwarding source's frontier row carries, in ``lock_token``, the frontier it had before the
#: forwarder's last range (``fwd:<seq>``): until that range is in the destination, readers that
#: decide what may be removed (compaction, log trimming) use the old one.
FORWARD_MARK = "fwd:"


def mark(previous_frontier: int) -> str:
    return f"{FORWARD_MARK}{int(previous_frontier)}"


def marked_from(lock_token) -> "int | None":
    """The frontier before a forwarder's range (None: the row carries no mark)."""
    if lock_token is None or not str(lock_token).startswith(FORWARD_MARK):
        return None
    return int(str(lock_token)[len(FORWARD_MARK):])


def kept_frontier_sql() -> str:
    """SQL over FRONTIER rows: the frontier behind which nothing is read again."""
    return (f"CASE WHEN lock_token LIKE '{FORWARD_MARK}%' "
            f"THEN CAST(substr(lock_token, {len(FORWARD_MARK) + 1}) AS BIGINT) ELSE seq END")


def version_of(frontier: int) -> int:
    """The inbox version a frontier (or sequence number) points into."""
    return frontier >> VERSION_SHIFT & MAX_VERSION


def start_version(frontier: int) -> int:
    """The first inbox version that may hold rows past ``frontier`` (-1: nothing registered)."""
    if frontier < 0:
        return 0
    version, idx = frontier >> VERSION_SHIFT & MAX_VERSION, frontier & IDX_MASK
    return version + 1 if idx == IDX_MASK else version


def sequence_number(pid: int, version: int, idx: int) -> int:
    """SEND-3: the sequence number of row ``idx`` of partition ``pid`` in inbox commit ``version``."""
    return (pid << PID_SHIFT) | (version << VERSION_SHIFT) | idx


def key_partition(key: str, partitions: int) -> int:
    """PART-2: the partition a session id, partition key or message id chooses."""
    return zlib.crc32(key.encode("utf-8")) % partitions if partitions > 1 else 0


_U64 = (1 << 64) - 1
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _U64


def spark_xxhash64(value: int) -> int:
    """Spark's ``xxhash64`` of one BIGINT (XXH64 with seed 42, as Spark's ``hashLong``), a
    signed 64-bit integer: the Python form of the partition choice of rows without a key."""
    h = (42 + _P5 + 8) & _U64
    h ^= (_rotl((value & _U64) * _P2 & _U64, 31) * _P1) & _U64
    h = (_rotl(h, 27) * _P1 + _P4) & _U64
    h ^= h >> 33
    h = h * _P2 & _U64
    h ^= h >> 29
    h = h * _P3 & _U64
    h ^= h >> 32
    return h - (1 << 64) if h >> 63 else h


def keyless_partition(seq: int, partitions: int) -> int:
    """The partition a forwarded message without a key takes in its destination: Spark's
    ``pmod(xxhash64(seq), partitions)``, in either engine."""
    return spark_xxhash64(seq) % partitions if partitions > 1 else 0


def session_key(session_id: str) -> str:
    return f"s:{session_id}"


def msg_key(seq: int) -> str:
    return f"m{seq:019d}"


def sessions_sql(session_ids) -> str:
    """SQL that holds for the messages of the sessions ``session_ids`` (a session receive's,
    or a sessions receiver's group)."""
    from .literals import sql_literal

    return f"session_id IN ({', '.join(sql_literal(s) for s in sorted(session_ids))})"


def key_sql(seq_col: str) -> str:
    return f"concat('m', lpad(CAST({seq_col} AS STRING), 19, '0'))"


def seq_sql(pid: str = "pid", version: str = "_commit_version", idx: str = "idx") -> str:
    return (f"(shiftleft(CAST({pid} AS BIGINT), {PID_SHIFT}) | "
            f"shiftleft(CAST({version} AS BIGINT), {VERSION_SHIFT}) | CAST({idx} AS BIGINT))")


def partition_of(seq: int) -> int:
    return (seq >> PID_SHIFT) & PID_MASK


def position_of(seq: int) -> int:
    """The inbox position a (copy's) sequence number comes from."""
    return seq & POS_MASK


def pid_list(pids) -> str:
    """``1, 2, 3``: partition ids for a literal ``pid IN (...)`` (Delta narrows conflicts by it)."""
    return ", ".join(str(int(p)) for p in sorted(set(pids)))


def case_by_pid(mapping, default: str = "0") -> str:
    """``CASE pid WHEN p THEN v ... ELSE default END`` for per-partition values."""
    return ("CASE pid " + " ".join(f"WHEN {int(p)} THEN {v}" for p, v in mapping.items())
            + f" ELSE {default} END")
