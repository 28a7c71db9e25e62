"""A receive's plan as ONE SQL query, written once and run by either engine.

The plan is the apply-MERGE source of one receive (:mod:`.receive`): which registered
messages it locks (or removes), which free ones it dead-letters or drops, which new inbox rows
it registers (locked, waiting, scheduled, duplicates dropped, cancellations honoured) and where
each partition's frontier moves; ``_out`` marks what is handed out. It reads two relations:

``{M}``  the entity's ``messages`` table;
``{N}``  the new inbox rows read past the frontiers (inbox columns, ``seq`` and ``pos``).

:func:`plan_sql` writes the query in Spark SQL with those two placeholders. Spark runs it over
temporary views (the table, and the change-feed DataFrame the receive read); delta-rs's
DataFusion runs it, translated (:mod:`.datafusion`), over the registered table and a literal
VALUES relation of the rows read (:func:`values_cte`). Only functions both engines share are
used: ``row_number``/``min``/``max`` windows, ``CASE``, ``coalesce``, ``concat``, ``lpad``,
``CAST``, comparisons, and interval literals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Dict, List, Optional, Sequence, Set, Tuple

from .apply import SOURCE_COLUMNS, expiry_marks
from .inbox import UNCOUNTED
from .literals import sql_literal
from .layout import (ACTIVE, CANCELLED, COLUMN_NAMES, DEADLETTERING, DEDUP, FRONTIER,
                     IDX_MASK, INBOX_COLUMNS, MESSAGE_FIELDS, MSG, SCHEDULED,
                     TTL_EXPIRED_DESCRIPTION, TTL_EXPIRED_REASON, case_by_pid, frontier_at,
                     frontier_change, key_sql, pid_list, sessions_sql)
from .locks import Policy, conditions, expired_sql, grant

#: The columns of ``{N}`` the plan reads (a subscription's rows may add :data:`REJECT_COLUMNS`).
NEW_COLUMNS = (("pid", "INT"), ("kind", "STRING"), ("seq", "BIGINT"), ("pos", "BIGINT")) + \
    MESSAGE_FIELDS
#: Of those, the ones a plan's conditions read: the rest only pass through, so a literal
#: relation of new rows may leave them NULL and have them filled in after (:func:`values_cte`).
DECIDING = ("pid", "kind", "seq", "pos", "message_id", "session_id", "enqueued_time",
            "scheduled_enqueue_time", "expires_at")


#: What a subscription's rules set on a row whose filter or action failed (TOPIC-5): it goes
#: to the dead-letter queue with them, never to a receiver.
REJECT_COLUMNS = ["dead_letter_reason", "dead_letter_error_description"]


@dataclass(frozen=True)
class Grant:
    """How a receive locks what it hands out: the grant prefix of the lock tokens and when the
    locks end; for a session receive, the ids of the sessions held. ``every_row``: the
    receive registers every new row it read (a session receive; a subscription of a topic
    with duplicate detection, whose new rows include SEEN rows) and hands out the first
    ``new_limit`` of its own (messages, of the sessions held)."""

    prefix: str
    until: datetime
    session_ids: Optional[Tuple[str, ...]] = None
    new_limit: int = 0
    every_row: bool = False

    def sessions_sql(self) -> str:
        """SQL that holds for the held sessions' messages."""
        return sessions_sql(self.session_ids)


@dataclass(frozen=True)
class Choice:
    """What a receive decided to plan, from its statistics: per chosen partition how many
    registered (``take_old``) and new (``take_new``) messages to take, the frontier rows'
    revisions read (``revs``), how many new rows each partition had (``new_counts``; for a
    partition :data:`.inbox.UNCOUNTED`, see :func:`uncounted`) up to inbox version ``hi``,
    whether some chosen partition has messages needing action (``act``), and which hold
    cancellation tombstones. ``ahead``: a partition handing out new rows registers, free, up to
    this many of them (handed out included) from the inbox version of the last one handed out,
    which every receive has read whole: the next receives lock them without reading the inbox
    again. ``cuts``: per partition taking part of its new rows, the position of the last one
    it takes, when the counts per version placed it (:func:`.inbox.cut_positions`)."""

    chosen: Sequence[int]
    take_old: Dict[int, int]
    take_new: Dict[int, int]
    revs: Dict[int, int]
    hi: int
    new_counts: Dict[int, Optional[int]]
    act: bool
    tombstones: Set[int]
    ahead: int = 0
    cuts: Dict[int, int] = field(default_factory=dict)


def _typed(expr: str, kind: str) -> str:
    if kind == "TIMESTAMP" and expr != "NULL":
        return expr
    return f"CAST({expr} AS {kind})"


def source(values: Dict[str, str], *, out: bool = False) -> str:
    """A SELECT list in the apply-MERGE source shape (:data:`.apply.SOURCE_COLUMNS`, then
    ``_out``): ``values`` maps a column to its SQL; the others are NULL (``_guard``:
    STALE)."""
    cols = []
    for name, kind in SOURCE_COLUMNS:
        expr = values.get(name, "'STALE'" if name == "_guard" else "NULL")
        cols.append(f"{_typed(expr, kind)} AS {name}")
    return ", ".join(cols) + f", {'TRUE' if out else 'FALSE'} AS _out"


def _row(columns: Sequence[str], **changes: str) -> Dict[str, str]:
    return {**{c: c for c in columns}, **changes}


def plan_sql(choice: Choice, policy: Policy, now: datetime, *, delete: bool, lock: Grant,
             dead_letter: bool, duplicate_detection: Optional[timedelta],
             new_rows: bool, rejects: bool = False) -> Optional[str]:
    """The plan's query (Spark SQL, with ``{M}`` and ``{N}`` placeholders), or None when it
    has nothing to do. ``new_rows``: ``{N}`` holds rows read past the frontiers;
    ``rejects``: they carry :data:`REJECT_COLUMNS` (a subscription's filter errors, TOPIC-5)."""
    claimable, action, _ = conditions(policy, now, dead_letter=dead_letter)
    if lock.session_ids is not None:
        claimable = f"({claimable}) AND {lock.sessions_sql()}"
    chosen = choice.chosen
    ctes = [f"m AS (SELECT * FROM {{M}} WHERE pid IN ({pid_list(chosen)}))"]
    parts: List[str] = []

    # 1. Registered messages that are free: lock them (or delete them: ReceiveAndDelete).
    if any(choice.take_old.values()):
        ctes.append(f"old0 AS (SELECT m.*, row_number() OVER (PARTITION BY pid ORDER BY seq) "
                    f"AS _rn FROM m WHERE {claimable})")
        ctes.append(f"old AS (SELECT * FROM old0 WHERE _rn <= {case_by_pid(choice.take_old)})")
        if delete:
            removed = _row(COLUMN_NAMES, _op="'delete'", _rev="rev")
            parts.append(f"SELECT {source(removed, out=True)} FROM old")
        else:
            locked = _row(COLUMN_NAMES, _op="'update'", _rev="rev",
                          **grant(lock.prefix, lock.until))
            parts.append(f"SELECT {source(locked, out=True)} FROM old")

    # 2. Free messages that expired or reached the delivery limit: dead-letter or drop.
    if choice.act and not dead_letter:
        to_dlq, marks = expiry_marks(policy)
        ctes.append(f"act AS (SELECT * FROM m WHERE {action} "
                    f"AND state <> '{DEADLETTERING}' LIMIT 10000)")
        dropped = _row(COLUMN_NAMES, _op="'delete'", _rev="rev")
        marked = _row(COLUMN_NAMES, _op="'update'", _rev="rev", **marks)
        parts.append(f"SELECT {source(dropped)} FROM act WHERE NOT {to_dlq}")
        parts.append(f"SELECT {source(marked)} FROM act WHERE {to_dlq}")

    # 3. New inbox rows: register, lock, drop duplicates, honour cancellations.
    taking = new_rows and any(choice.take_new.get(p) for p in chosen)
    carrier = None
    if taking:
        carrier = _register(ctes, parts, choice, policy, now, delete, lock, dead_letter,
                            duplicate_detection, rejects)

    # 4. Frontiers of the chosen partitions that took new rows (those not counted before the
    # plan: carried by the rows, ``_fr``, for the receive to write, :func:`frontier_of`).
    if taking:
        _frontiers(ctes, parts, choice, lock)
    if not parts:
        return None
    if carrier is not None:
        parts = [part if part is carrier
                 else f"SELECT *, CAST(NULL AS BIGINT) AS _fr FROM ({part})" for part in parts]
    return f"WITH {', '.join(ctes)}\n" + "\nUNION ALL\n".join(parts)


def _register(ctes, parts, choice: Choice, policy: Policy, now: datetime, delete: bool,
              lock: Grant, dead_letter: bool, duplicate_detection: Optional[timedelta],
              rejects: bool) -> Optional[str]:
    """Add the registration of the new rows read; returns its part when its rows carry the
    frontier of partitions not counted before the plan (``_fr``), else None."""
    chosen = choice.chosen
    late = uncounted(choice, lock)
    columns = [n for n, _ in NEW_COLUMNS] + (REJECT_COLUMNS if rejects else [])
    ctes.append(f"n0 AS (SELECT {', '.join(columns)} FROM {{N}} "
                f"WHERE pid IN ({pid_list(chosen)}))")
    # The rows taken: per partition the first take_new in order of position and copy
    # (``_hand``: handed out), and the other copies of the last position taken, so that a
    # position is never registered in part (its frontier passes all its copies at once). A
    # session receive registers every row read and hands out the first new_limit of its
    # sessions' own (in order of position: each session's in its order, whatever the partition).
    # A receive of a topic with duplicate detection registers every row read too (SEEN rows
    # only as duplicate history) and hands out the first of its messages.
    if lock.every_row:
        mine = "TRUE" if lock.session_ids is None else lock.sessions_sql()
        ctes.append(f"n1 AS (SELECT n0.*, coalesce({mine}, FALSE) AND kind = '{MSG}' AS _mine "
                    "FROM n0)")
        ctes.append("n2 AS (SELECT n1.*, row_number() OVER (PARTITION BY _mine ORDER BY "
                    "pos, seq) AS _rn FROM n1)")
        ctes.append(f"taken AS (SELECT {', '.join(columns)}, "
                    f"_mine AND _rn <= {int(lock.new_limit)} AS _hand FROM n2)")
    elif not late and _placed(choice):
        # Every partition taking new rows takes all it read (counted before the plan) or up
        # to a known position: no window numbers the rows, so they need no shuffle.
        taking = [p for p in chosen if choice.take_new.get(p)]
        upto = (f" AND pos <= {case_by_pid(choice.cuts, default=str(2 ** 63 - 1))}"
                if choice.cuts else "")
        ctes.append(f"taken AS (SELECT {', '.join(columns)}, TRUE AS _hand FROM n0 "
                    f"WHERE pid IN ({pid_list(taking)}){upto})")
    else:
        takes = case_by_pid({p: choice.take_new.get(p, 0) for p in chosen})
        # ``_top``: the last position read in the partition, where the rows were not counted
        # before the plan (in the window that finds the last position taken).
        top = ", max(pos) OVER (PARTITION BY pid) AS _top" if late else ""
        ctes.append("n1 AS (SELECT n0.*, row_number() OVER (PARTITION BY pid ORDER BY pos, seq) "
                    "AS _rn FROM n0)")
        ctes.append(f"n2 AS (SELECT n1.*, _rn <= {takes} AS _hand FROM n1)")
        # The last position taken: of the last handed out, or of a row registered ahead.
        if choice.ahead:
            ctes.append("n2a AS (SELECT n2.*, max(CASE WHEN _hand THEN pos END) OVER "
                        "(PARTITION BY pid) AS _hl FROM n2)")
            most = case_by_pid({p: max(choice.take_new.get(p, 0), choice.ahead)
                                for p in chosen})
            ahead = f"_rn <= {most} AND pos <= _hl - _hl % {IDX_MASK + 1} + {IDX_MASK}"
            ctes.append(f"n3 AS (SELECT n2a.*, max(CASE WHEN {ahead} THEN pos END) OVER "
                        f"(PARTITION BY pid) AS _last{top} FROM n2a)")
        else:
            ctes.append("n3 AS (SELECT n2.*, max(CASE WHEN _hand THEN pos END) OVER "
                        f"(PARTITION BY pid) AS _last{top} FROM n2)")
        carried = ", _last, _top, _rn" if late else ""
        ctes.append(f"taken AS (SELECT {', '.join(columns)}, _hand{carried} "
                    "FROM n3 WHERE pos <= _last)")
    ctes.append(f"r0 AS (SELECT taken.*, {key_sql('seq')} AS k, {key_sql('pos')} AS _tk, "
                "coalesce(scheduled_enqueue_time, enqueued_time) AS visible_at FROM taken)")
    # Cancelled (or swept) before registration: a tombstone waits under the key of the
    # message's position (every copy a subscription makes of it is cancelled).
    tombstones = sorted(choice.tombstones)
    if tombstones:
        ctes.append(f"tomb AS (SELECT pid AS _tpid, k AS _tkey, rev AS _trev FROM m "
                    f"WHERE pid IN ({pid_list(tombstones)}) AND kind = '{MSG}' "
                    f"AND state = '{CANCELLED}')")
        ctes.append("r1 AS (SELECT r0.*, tomb._trev FROM r0 LEFT JOIN tomb "
                    "ON r0.pid = tomb._tpid AND r0._tk = tomb._tkey)")
    else:
        ctes.append("r1 AS (SELECT r0.*, CAST(NULL AS BIGINT) AS _trev FROM r0)")
    if duplicate_detection is not None:
        micros = int(duplicate_detection / timedelta(microseconds=1))
        ctes.append(f"hist AS (SELECT pid AS _hpid, message_id AS _hmid, dedup_until AS "
                    f"_dedup_until, rev AS _drev FROM m WHERE kind = '{DEDUP}')")
        ctes.append("r2 AS (SELECT r1.*, hist._dedup_until, hist._drev FROM r1 LEFT JOIN hist "
                    "ON r1.pid = hist._hpid AND r1.message_id = hist._hmid)")
        # The first occurrence of an id: the lowest position (all its copies, and its SEEN
        # row); its history entry is written once (``_nth``: by position first, since a later
        # position's copy 0 has a lower sequence number than an earlier one's copy 1).
        ctes.append("r3 AS (SELECT r2.*, pos = min(pos) OVER (PARTITION BY pid, message_id) "
                    "AS _first, row_number() OVER (PARTITION BY pid, message_id ORDER BY pos, "
                    "seq) AS _nth FROM r2)")
        ctes.append("r AS (SELECT r3.*, (message_id IS NOT NULL AND (NOT _first OR "
                    "(_dedup_until IS NOT NULL AND enqueued_time < _dedup_until))) AS _dup "
                    "FROM r3)")
        # New history entries, one per id first seen.
        history = {"pid": "pid", "k": "concat('d:', message_id)", "kind": f"'{DEDUP}'",
                   "rev": "coalesce(_drev, 0)", "seq": "seq",
                   "dedup_until": f"enqueued_time + INTERVAL '{micros} microseconds'",
                   "message_id": "message_id",
                   "_op": "CASE WHEN _drev IS NULL THEN 'insert' ELSE 'update' END",
                   "_rev": "_drev"}
        parts.append(f"SELECT {source(history)} FROM r WHERE message_id IS NOT NULL "
                     "AND NOT _dup AND _trev IS NULL AND _nth = 1")
    else:
        ctes.append("r AS (SELECT r1.*, FALSE AS _dup FROM r1)")
    expired = expired_sql(policy, now, dead_letter=dead_letter)
    failed = "dead_letter_reason IS NOT NULL" if rejects else "FALSE"
    live = f"(NOT _dup AND _trev IS NULL AND kind = '{MSG}')"
    # Only a schedule hides a message: its enqueued time is its sender's clock, which may run
    # ahead of this host's (docs/ARCHITECTURE.md, "Whose clock decides").
    visible = (f"(scheduled_enqueue_time IS NULL OR scheduled_enqueue_time <= "
               f"{sql_literal(now)})")
    ready = f"{live} AND NOT ({failed}) AND {visible} AND NOT ({expired})"
    if tombstones:  # tombstones of cancelled messages are consumed (once, whatever copies)
        consumed = {"pid": "pid", "k": "_tk", "kind": f"'{MSG}'", "_rev": "_trev",
                    "_op": "'delete'"}
        parts.append(f"SELECT DISTINCT {source(consumed)} FROM r WHERE _trev IS NOT NULL")
    base = [n for n, _ in INBOX_COLUMNS if n not in ("idx",)] + ["seq", "k", "visible_at"] + (
        REJECT_COLUMNS if rejects else [])
    registered = _row(base, rev="0", delivery_count="0", _op="'insert'")
    # What becomes of each message read, one category per row (they exclude each other), so
    # that the rows are written by ONE select over ``r`` (each engine then reads the new rows
    # once, where a select per category re-ran the CTEs above for each).
    # Handed out now.
    cases = [("hand", f"{ready} AND _hand",
              _row(base, rev="0") if delete
              else {**registered, **grant(lock.prefix, lock.until, first=True)})]
    # Copies past the batch of a message whose first copies were handed out: registered
    # free, as active messages (a position is registered whole, TOPIC-5).
    cases.append(("free", ready, {**registered, "state": repr(ACTIVE)}))
    # Scheduled for later: registered, invisible until its time.
    cases.append(("later", f"{live} AND NOT ({failed}) AND NOT {visible}",
                  {**registered, "state": repr(SCHEDULED)}))
    # Expired on arrival: dead-lettered (when the entity says so) or dropped.
    if policy.dead_letter_on_expiration and not dead_letter:
        cases.append(("expired", f"{live} AND NOT ({failed}) AND {visible}",
                      {**registered, "state": f"'{DEADLETTERING}'",
                       "dead_letter_reason": sql_literal(TTL_EXPIRED_REASON),
                       "dead_letter_error_description": sql_literal(TTL_EXPIRED_DESCRIPTION)}))
    if rejects:
        cases.append(("rejected", f"{live} AND ({failed})",
                      {**registered, "state": repr(DEADLETTERING)}))
    which = " ".join(f"WHEN {when} THEN '{name}'" for name, when, _ in cases)
    if not late:
        ctes.append(f"rc AS (SELECT r.*, CASE {which} END AS _cat FROM r)")
        parts.append(f"SELECT {source_cases(cases, out='hand')} FROM rc WHERE _cat IS NOT NULL")
        return None
    # Rows not counted before the plan: each row written, and the partition's first row read
    # (a row that writes nothing when its message is not registered), carries ``_fr``, the
    # partition's frontier: past every row read when all were taken (the last position taken
    # is the last read), else the last position taken (:func:`frontier_of`). So the frontier
    # comes out of the one select that reads the rows (a second select over them would run
    # the change-feed scan and the rules again), and out of the window that finds ``_last``.
    hi = case_by_pid({p: frontier_at(p, choice.hi) for p in late})
    ctes.append(f"rc AS (SELECT r.*, CASE {which} END AS _cat, CASE WHEN _last >= _top "
                f"THEN {hi} ELSE _last END AS _fr FROM r)")
    part = (f"SELECT {source_cases(cases, out='hand', only_cases=True)}, _fr FROM rc "
            "WHERE _cat IS NOT NULL OR _rn = 1")
    parts.append(part)
    return part


def source_cases(cases, *, out: str, only_cases: bool = False) -> str:
    """A SELECT list in the apply-MERGE source shape (as :func:`source`) over rows whose
    ``_cat`` names one of ``cases`` ((name, condition, values) triples, :func:`source`'s
    ``values`` per case): a column's SQL is its case's (one expression where every case has
    the same); ``_out`` holds for the rows of case ``out``. ``only_cases``: rows without a
    case are selected too, and write nothing (their ``_op`` is NULL)."""
    cols = []
    for name, kind in SOURCE_COLUMNS:
        default = "'STALE'" if name == "_guard" else "NULL"
        exprs = {case: values.get(name, default) for case, _, values in cases}
        if len(set(exprs.values())) == 1 and not (only_cases and name == "_op"):
            expr = next(iter(exprs.values()))
        else:
            expr = ("CASE _cat " + " ".join(f"WHEN '{case}' THEN {e}" for case, e in exprs.items())
                    + " END")
        cols.append(f"{_typed(expr, kind)} AS {name}")
    return ", ".join(cols) + f", _cat = '{out}' AS _out"


def uncounted(choice: Choice, lock: Grant) -> List[int]:
    """The chosen partitions whose new rows were not counted before the plan
    (:data:`.inbox.UNCOUNTED`): the rows taken carry their frontier (``_fr``). None when
    the plan registers every row read (its frontiers are literal)."""
    if lock.every_row:
        return []
    return [p for p in choice.chosen
            if p in choice.new_counts and choice.new_counts[p] is UNCOUNTED]


def frontier_of(choice: Choice, rows_fr: Optional[int], p: int) -> Dict[str, object]:
    """The frontier row (an apply source row) of a partition :func:`uncounted`, from the
    largest ``_fr`` of the plan's rows (None: the plan read no row of it, every row of the
    versions read was refused by the rules: past them all)."""
    return frontier_change(p, frontier_at(p, choice.hi) if rows_fr is None else int(rows_fr),
                        choice.revs.get(p))


def _placed(choice: Choice) -> bool:
    """Whether every chosen partition that takes new rows takes all it read (as counted
    before the plan) or up to its cut (:attr:`Choice.cuts`): its frontier is known."""
    return all(_takes_all(choice, p) or p in choice.cuts
               for p in choice.chosen if choice.take_new.get(p))


def _takes_all(choice: Choice, p: int) -> bool:
    """Whether partition ``p`` takes every new row it read (as counted before the plan)."""
    return choice.take_new[p] == choice.new_counts.get(p, 0)


def _frontiers(ctes, parts, choice: Choice, lock: Grant) -> None:
    """Frontier rows: literal where a partition took all it read, else the last position
    taken. ``_rev`` comes from the same read as the frontiers the plan started from, so a
    concurrent registration trips the guard."""
    fixed, partial = {}, []
    late = uncounted(choice, lock)
    for p in choice.chosen:
        if not choice.take_new.get(p) or p in late:
            continue
        if _takes_all(choice, p) or lock.every_row:
            fixed[p] = frontier_at(p, choice.hi)
        elif p in choice.cuts:
            fixed[p] = choice.cuts[p]
        else:
            partial.append(p)
    rows = [f"SELECT CAST({int(p)} AS INT) AS pid, CAST({int(v)} AS BIGINT) AS seq, "
            f"CAST({sql_literal(choice.revs.get(p))} AS BIGINT) AS _rev"
            for p, v in fixed.items()]
    if partial:
        known = {p: choice.revs[p] for p in partial if p in choice.revs}
        revs = case_by_pid(known, default="NULL") if known else "NULL"
        rows.append(f"SELECT pid, max(pos) AS seq, CAST({revs} AS BIGINT) AS _rev FROM taken "
                    f"WHERE pid IN ({pid_list(partial)}) GROUP BY pid")
    if not rows:
        return
    ctes.append(f"fr AS ({' UNION ALL '.join(rows)})")
    frontier = {"pid": "pid", "seq": "seq", "_rev": "_rev", "k": "'f'", "kind": f"'{FRONTIER}'",
                "rev": "coalesce(_rev, 0)",
                "_op": "CASE WHEN _rev IS NULL THEN 'insert' ELSE 'update' END"}
    parts.append(f"SELECT {source(frontier)} FROM fr")


def taken_rows(rows: List[dict], choice: Choice) -> List[dict]:
    """Of the new rows read, those a plan can take: per chosen partition the first
    ``take_new`` in order of position and copy, those registered ahead
    (:attr:`Choice.ahead`), and the other copies of the last position taken (a
    subscription's action copies, TOPIC-5: a position is registered whole). The plan takes
    the same; the rest would only make its literal relation longer."""
    by_pid: Dict[int, List[dict]] = {}
    for row in sorted(rows, key=lambda r: (r["pos"], r["seq"])):
        by_pid.setdefault(row["pid"], []).append(row)
    taken = []
    for p in choice.chosen:
        found, n = by_pid.get(p, []), choice.take_new.get(p, 0)
        if n <= 0 or not found:
            continue
        end = found[:n][-1]["pos"] | IDX_MASK  # the last handed out's inbox version
        last = [row for row in found[:max(n, choice.ahead)] if row["pos"] <= end][-1]["pos"]
        taken += [row for row in found if row["pos"] <= last]
    return taken


def carries_rejects(rows: Sequence[dict]) -> bool:
    """Whether new rows read by delta-rs carry :data:`REJECT_COLUMNS` (a subscription's rules
    set them on every row they admit when some rows may go to the dead-letter queue; SEEN
    rows have none)."""
    return bool(rows) and any(REJECT_COLUMNS[0] in row for row in rows)


def values_cte(rows: Sequence[dict]) -> str:
    """``{N}`` as a literal relation of new inbox rows (dicts with :data:`NEW_COLUMNS`, and
    :data:`REJECT_COLUMNS` when a subscription's rules set them): the columns in
    :data:`DECIDING` and the reject columns as literals, the others NULL (the caller fills
    them in from its rows by sequence number: they only pass through)."""
    columns = NEW_COLUMNS + (tuple((n, "STRING") for n in REJECT_COLUMNS)
                             if carries_rejects(rows) else ())
    kinds = dict(columns)
    names = [n for n, _ in columns]
    literal = set(DECIDING) | set(REJECT_COLUMNS)
    values = ", ".join(
        "(" + ", ".join(_typed(sql_literal(row.get(n)) if n in literal else "NULL", kinds[n])
                        for n in names) + ")" for row in rows)
    return f"(SELECT * FROM (VALUES {values}) AS v({', '.join(names)}))"
