"""What a subscription takes from its topic: its rules as they stood when each message was
enqueued (TOPIC-2), and the time-to-live cap of TTL-3.

A topic stores each message once, in its inbox (TOPIC-1). A subscription reads that inbox
through an :class:`Admission`: a function from inbox rows to the rows it takes, built from Spark
Columns (never a Python function per row), so admitting a batch costs one filter over it.

Every rule a subscription ever had is a *window*: the rule's filter, and the enqueued times it
applied to (from its creation or last update; until its update or deletion, or open). Updating
or deleting a rule keeps its old version in the registry (kind ``rule_history``), so a message
enqueued before the change is judged by the rules of its time even when the subscription reads
it later. A message is admitted when the filter of at least one window that covers its enqueued
time matches it; a subscription without rules admits nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Dict, List, Optional, Sequence

from ._clock import as_utc, utc
from ._durations import expiry, expiry_sql
from ._properties import FalseRuleFilter, RuleProperties, TrueRuleFilter
from .rules import FILTER_EXCEPTION_REASON
from ._store import COPY_SHIFT, sql_literal

RULE_HISTORY = "rule_history"
_CONSTANT_FILTERS = (TrueRuleFilter, FalseRuleFilter)
#: Admission Columns built (:meth:`Admission._column`): (name, rules) -> (SparkContext,
#: Column), the most recently used :data:`_BUILT_MAX` kept.
_BUILT: "OrderedDict[tuple, tuple]" = OrderedDict()
_BUILT_MAX = 64
_BUILT_LOCK = threading.Lock()


@dataclass(frozen=True)
class RuleWindow:
    """A rule as it applied to messages enqueued in [valid_from, valid_until)."""

    rule: RuleProperties
    valid_from: datetime
    valid_until: Optional[datetime] = None

    def to_history(self) -> Dict[str, Any]:
        """The properties of a ``rule_history`` registry row."""
        return {"rule": self.rule.to_dict(), "valid_from": self.valid_from.isoformat(),
                "valid_until": None if self.valid_until is None
                else self.valid_until.isoformat()}

    @classmethod
    def from_history(cls, data: Dict[str, Any]) -> "RuleWindow":
        until = data.get("valid_until")
        return cls(RuleProperties.from_dict(data["rule"]),
                   utc(datetime.fromisoformat(data["valid_from"])),
                   None if until is None else utc(datetime.fromisoformat(until)))


class Admission:
    """Inbox rows -> the rows a subscription takes, as it sees them.

    Args:
        windows: Every rule window of the subscription (current rules and retired versions).
        ttl_cap: TTL-3 for a subscription: its default time to live when it is smaller than
            the topic's (messages with a longer TTL of their own are cut to it); None: no cut
            beyond what the topic's sender applied.
        dead_letter_errors: ``dead_lettering_on_filter_evaluation_exceptions``: a message no
            rule matches and some rule failed to evaluate on is admitted with its dead-letter
            reason set (registration moves it to the dead-letter queue); otherwise dropped.
        requires_session: the subscription requires sessions (SESS-1): a message the topic
            took without a session id is admitted for its dead-letter queue (reason
            :data:`SESSION_ID_NULL_REASON`), as Service Bus does, whatever the other flag says.
    """

    def __init__(self, windows: Sequence[RuleWindow], ttl_cap: Optional[timedelta],
                 dead_letter_errors: bool, requires_session: bool = False) -> None:
        self.windows = list(windows)
        self.ttl_cap = ttl_cap
        self.dead_letter_errors = dead_letter_errors
        self.requires_session = requires_session
        # TOPIC-5: each rule with an action gives its own copy, numbered by the rule's name
        # (1, 2, ... in name order): copy c of the topic message at position p has sequence
        # number p | c << COPY_SHIFT. Copy 0 is the one copy of the rules without actions.
        self.copy_numbers = {name: i + 1 for i, name in enumerate(sorted(
            {w.rule.name for w in self.windows if w.rule.action is not None}))}
        self.dead_letters = requires_session or (dead_letter_errors and any(
            _may_fail(w.rule) or w.rule.action is not None for w in self.windows))
        # Whether admitting rows costs enough to materialise them once per receive: a rule
        # that reads the message (SQL or correlation filter, an action). True and false
        # filters only compare the enqueued time.
        self.evaluates_messages = any(
            w.rule.action is not None or not isinstance(w.rule.filter, _CONSTANT_FILTERS)
            for w in self.windows)
        # What the Columns of :meth:`_column` depend on: the windows (filters, actions, rule
        # names, times) and the dead-letter flag; repr keeps 1, 1.0, True and '1' apart.
        self._identity = (tuple(repr(w.to_history()) for w in self.windows),
                          self.dead_letter_errors)

    def _column(self, name: str, make):
        """The Column ``make()`` builds, built once per Spark context for every Admission of
        the same rules (:data:`_BUILT`): a rule's Column costs hundreds of py4j calls to build
        (0.5-0.6 s for three rules, two with actions), and each client, and each registry
        version of the subscription, makes an Admission of its own."""
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
        key = (name, self._identity)
        with _BUILT_LOCK:
            cached = _BUILT.get(key)
            if cached is not None and cached[0] is context:
                _BUILT.move_to_end(key)
                return cached[1]
        column = make()
        with _BUILT_LOCK:
            _BUILT[key] = (context, column)
            while len(_BUILT) > _BUILT_MAX:
                _BUILT.popitem(last=False)
        return column

    def __call__(self, rows):
        from pyspark.sql import functions as F

        from .rules import with_properties

        if self.copy_numbers:
            rows = self._copies(rows, with_properties)
        else:
            rows = rows.withColumn("_admit", self._column(
                "admit", lambda: self._guarded(with_properties(self._evaluate),
                                               certain=self._certain())))
            if self.dead_letter_errors and self.dead_letters:
                rows = (rows.where(F.col("_admit.matched") | F.col("_admit.error").isNotNull())
                        .withColumn("dead_letter_reason",
                                    F.when(F.col("_admit.error").isNotNull(),
                                           F.lit(FILTER_EXCEPTION_REASON)))
                        .withColumn("dead_letter_error_description", F.col("_admit.error")))
            else:
                rows = rows.where(F.col("_admit.matched"))
            rows = rows.drop("_admit")
        if self.requires_session:
            rows = _refuse_without_session(rows)
        if self.ttl_cap is not None:
            rows = _cap_ttl(rows, self.ttl_cap)
        return rows

    def _guarded(self, rules, certain=None):
        """``rules`` (a Column) evaluated only where the pre-filter keeps the message, NULL
        elsewhere: messages no filter can match or fail on are ruled out by compiled code
        (:func:`sbdelta.rules.prefilter_column`) before the rules' costly property bag is
        built, and most of a filtered backlog is such messages. ``certain``: a pair
        (condition, result) taken instead of the rules where the condition holds
        (:meth:`_certain`).

        A CASE WHEN and not a ``where`` before the rules: the rules' struct is read twice
        (matched, error), so Spark evaluates it once per row as a common subexpression, ahead
        of the whole condition, which a ``where`` ANDed before it would not stop; the CASE
        WHEN is the common subexpression, and it builds the struct only where it holds."""
        from pyspark.sql import functions as F

        from .rules import prefilter_column

        keep = prefilter_column(w.rule.filter for w in self.windows)
        if certain is None:
            return rules if keep is None else F.when(keep, rules)
        sure, result = certain
        taken = F.when(sure, result)
        return taken.otherwise(rules) if keep is None else taken.when(keep, rules)

    def _certain(self):
        """Without actions: (where a rule whose window covers the message certainly matches
        it, the rules' struct for a match) or None, so that most of what a filtered receive
        keeps is taken by compiled code without its property bag
        (:func:`sbdelta.rules.certain_match_column`): a match makes no error, whatever the
        other rules do (:meth:`_evaluate`)."""
        from pyspark.sql import functions as F

        from .rules import certain_match_column

        sure = None
        for window, covers in self._windows():
            certain = certain_match_column(window.rule.filter)
            if certain is not None:
                sure = covers & certain if sure is None else sure | (covers & certain)
        if sure is None:
            return None
        return F.coalesce(sure, F.lit(False)), F.struct(
            F.lit(True).alias("matched"), F.lit(None).cast("string").alias("error"))

    def admit_rows(self, rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """:meth:`__call__` over inbox rows read without Spark (dicts, as delta-rs gives them):
        filters and actions evaluated in Python (:mod:`sbdelta.rules.evaluate`), the same
        rows and copies admitted with the same properties, dead-letter reasons and TTL cut."""
        from .rules.evaluate import Message, evaluate_filter

        out = []
        for row in rows:
            enqueued = as_utc(row.get("enqueued_time"))
            message = Message(row)
            results = [(window, evaluate_filter(window.rule.filter, message))
                       for window in self.windows if _window_covers(enqueued, window)]
            matched = any(hit is True for _, (hit, _) in results)
            error = next((failure for window, (_, failure) in results
                          if _may_fail(window.rule) and failure is not None), None)
            if self.copy_numbers:
                admitted = self._copies_of(row, message, results, matched, error)
            elif self.dead_letters and self.dead_letter_errors:
                admitted = [] if not matched and error is None else [dict(
                    row, dead_letter_reason=None if matched else FILTER_EXCEPTION_REASON,
                    dead_letter_error_description=None if matched else error)]
            else:
                admitted = [dict(row)] if matched else []
            for copy in admitted:
                if self.requires_session:
                    copy.setdefault("dead_letter_reason", None)
                    copy.setdefault("dead_letter_error_description", None)
                    if copy.get("session_id") is None and copy["dead_letter_reason"] is None:
                        copy["dead_letter_reason"] = SESSION_ID_NULL_REASON
                        copy["dead_letter_error_description"] = SESSION_ID_NULL_DESCRIPTION
                if self.ttl_cap is not None:
                    _cap_ttl_row(copy, self.ttl_cap)
                out.append(copy)
        return out

    def _copies_of(self, row, message, results, matched, error) -> List[Dict[str, Any]]:
        """:meth:`_copies` for one row: copy 0 when a rule without an action matches, one copy
        per matching rule with an action, copy 0 for the dead-letter queue where nothing
        matched and a filter failed."""
        from .rules import ACTION_EXCEPTION_REASON, action_naming_rule
        from .rules.evaluate import evaluate_action

        original = row.get("application_properties")
        copies = []  # (number, properties, reason, description)
        if any(hit is True for window, (hit, _) in results if window.rule.action is None):
            copies.append((0, original, None, None))
        for window, (hit, _) in results:
            if window.rule.action is None or hit is not True:
                continue
            number = self.copy_numbers[window.rule.name]
            props, failure = evaluate_action(action_naming_rule(window.rule), message)
            if failure is None:
                copies.append((number, props, None, None))
            elif self.dead_letter_errors:
                copies.append((number, original, ACTION_EXCEPTION_REASON, failure))
        if self.dead_letter_errors and not matched and error is not None:
            copies.append((0, original, FILTER_EXCEPTION_REASON, error))
        old_size = len(original.encode("utf-8")) if original is not None else 0
        made = []
        for number, props, reason, description in copies:
            copy = dict(row, seq=row["seq"] | (number << COPY_SHIFT),
                        application_properties=props)
            if row.get("size") is not None:
                copy["size"] = row["size"] - old_size + (
                    len(props.encode("utf-8")) if props is not None else 0)
            if self.dead_letter_errors and self.dead_letters:
                copy["dead_letter_reason"] = reason
                copy["dead_letter_error_description"] = description
            made.append(copy)
        return made

    def _windows(self):
        from pyspark.sql import functions as F

        return [(w, _covers(F.col("enqueued_time"), w)) for w in self.windows]

    def _matches(self, rules, then):
        """``then(row, windows)``: every window's filter is one struct, all bound in one let
        (each is read twice, evaluated once); ``row["w<i>"]`` is window i's result."""
        from .rules import let

        windows = self._windows()
        filters = {f"w{i}": rules.filter_struct(w.rule.filter)
                   for i, (w, _) in enumerate(windows)}
        return let(filters, lambda row: then(row, windows))

    @staticmethod
    def _any_match(row, windows, which=lambda w: True):
        from pyspark.sql import functions as F

        matched = F.lit(False)
        for i, (window, covers) in enumerate(windows):
            if which(window):
                matched = matched | F.coalesce(covers & row[f"w{i}"]["matched"], F.lit(False))
        return matched

    @staticmethod
    def _filter_error(row, windows):
        from pyspark.sql import functions as F

        errors = [F.when(covers, row[f"w{i}"]["error"])
                  for i, (window, covers) in enumerate(windows) if _may_fail(window.rule)]
        return (F.lit(None).cast("string") if not errors
                else errors[0] if len(errors) == 1 else F.coalesce(*errors))

    def _evaluate(self, rules):
        """Without actions: struct<matched, error> per message (error: no rule matched and
        some filter failed to evaluate)."""
        from pyspark.sql import functions as F

        def admit(row, windows):
            matched = self._any_match(row, windows)
            return F.struct(matched.alias("matched"),
                            F.when(~matched, self._filter_error(row, windows)).alias("error"))

        return self._matches(rules, admit)

    def _copies(self, rows, with_properties):
        """With actions (TOPIC-5): one row per copy. Copy 0 when a rule without an action
        matches; one copy per matching rule with an action, its properties changed by the
        action and the property ``RuleName`` set to the rule's name; where no rule matches
        and a filter failed, copy 0 for the dead-letter queue. An action that fails to
        evaluate dead-letters its copy (reason RuleActionException) when the subscription
        dead-letters evaluation errors, else drops it."""
        from pyspark.sql import functions as F

        from .rules import ACTION_EXCEPTION_REASON, action_naming_rule, let

        original = F.col("application_properties")
        no_text = F.lit(None).cast("string")

        def copy(number, props, reason, description):
            return F.struct(F.lit(number).cast("bigint").alias("copy"), props.alias("props"),
                            reason.alias("reason"), description.alias("description"))

        def evaluate(rules):
            def admit(row, windows):
                copies = [F.when(self._any_match(row, windows, lambda w: w.rule.action is None),
                                 copy(0, original, no_text, no_text))]
                for i, (window, covers) in enumerate(windows):
                    if window.rule.action is None:
                        continue
                    hit = F.coalesce(covers & row[f"w{i}"]["matched"], F.lit(False))
                    action = rules.action_struct(action_naming_rule(window.rule))

                    def made(bound, number=self.copy_numbers[window.rule.name]):
                        result = bound["a"]
                        failed = result["error"].isNotNull()
                        if self.dead_letter_errors:
                            return copy(number, F.when(failed, original)
                                        .otherwise(result["application_properties"]),
                                        F.when(failed, F.lit(ACTION_EXCEPTION_REASON)),
                                        result["error"])
                        return F.when(~failed, copy(number, result["application_properties"],
                                                    no_text, no_text))

                    # Evaluated only for the messages the rule matched.
                    copies.append(F.when(hit, let({"a": action}, made)))
                if self.dead_letter_errors:
                    error = self._filter_error(row, windows)
                    copies.append(F.when(~self._any_match(row, windows) & error.isNotNull(),
                                         copy(0, original, F.lit(FILTER_EXCEPTION_REASON),
                                              error)))
                return F.filter(F.array(*copies), lambda c: c.isNotNull())

            return self._matches(rules, admit)

        old_size = F.coalesce(F.octet_length(original), F.lit(0))
        rows = (rows.withColumn("_copy", self._column(
                    "copies", lambda: F.explode(self._guarded(with_properties(evaluate)))))
                .withColumn("seq", F.col("seq").bitwiseOR(
                    F.shiftleft(F.col("_copy.copy"), COPY_SHIFT)))
                .withColumn("size", (F.col("size") - old_size + F.coalesce(
                    F.octet_length("_copy.props"), F.lit(0))).cast("int"))
                .withColumn("application_properties", F.col("_copy.props")))
        if self.dead_letter_errors and self.dead_letters:
            rows = (rows.withColumn("dead_letter_reason", F.col("_copy.reason"))
                    .withColumn("dead_letter_error_description", F.col("_copy.description")))
        return rows.drop("_copy")


#: Why a message the topic took without a session id is in a session subscription's
#: dead-letter queue (Service Bus's reason and description).
SESSION_ID_NULL_REASON = "Session id is null."
SESSION_ID_NULL_DESCRIPTION = ("Session enabled entity doesn't allow a message whose session "
                               "identifier is null.")


def _refuse_without_session(rows):
    """SESS-1 on a subscription: rows without a session id get the dead-letter reason (a rule's
    own reason, when it has one, stays)."""
    from pyspark.sql import functions as F

    for name in ("dead_letter_reason", "dead_letter_error_description"):
        if name not in rows.columns:
            rows = rows.withColumn(name, F.lit(None).cast("string"))
    refused = F.col("session_id").isNull() & F.col("dead_letter_reason").isNull()
    return (rows.withColumn("dead_letter_error_description",
                            F.when(refused, F.lit(SESSION_ID_NULL_DESCRIPTION))
                            .otherwise(F.col("dead_letter_error_description")))
            .withColumn("dead_letter_reason", F.when(refused, F.lit(SESSION_ID_NULL_REASON))
                        .otherwise(F.col("dead_letter_reason"))))


def _covers(enqueued, window: RuleWindow):
    """The window's rule applies to a message enqueued at ``enqueued`` (TOPIC-2)."""
    from pyspark.sql import functions as F

    covers = enqueued >= F.expr(sql_literal(window.valid_from))
    if window.valid_until is not None:
        covers = covers & (enqueued < F.expr(sql_literal(window.valid_until)))
    return covers


def _window_covers(enqueued: Optional[datetime], window: RuleWindow) -> bool:
    """:func:`_covers` for one message (an unknown enqueued time is covered by nothing)."""
    if enqueued is None or enqueued < window.valid_from:
        return False
    return window.valid_until is None or enqueued < window.valid_until


def _cap_ttl_row(row: Dict[str, Any], cap: timedelta) -> None:
    """:func:`_cap_ttl` for one row."""
    cap_ms = int(cap / timedelta(milliseconds=1))
    ttl = row.get("time_to_live_ms")
    if ttl is None or ttl <= cap_ms:
        return
    start = as_utc(row.get("scheduled_enqueue_time") or row.get("enqueued_time"))
    row["expires_at"] = None if start is None else expiry(start, timedelta(milliseconds=cap_ms))
    row["time_to_live_ms"] = cap_ms


def _may_fail(rule: RuleProperties) -> bool:
    """Only SQL filters can fail at evaluation (a type error the parser could not see)."""
    from ._properties import CorrelationRuleFilter, FalseRuleFilter, TrueRuleFilter

    return not isinstance(rule.filter, (TrueRuleFilter, FalseRuleFilter, CorrelationRuleFilter))


def _cap_ttl(rows, cap: timedelta):
    """TTL-3: a message TTL longer than the subscription's default is cut to it; its expiry
    counts from when it became visible (TTL-2). Messages without a TTL get the default from
    the receive policy, as on a queue."""
    from pyspark.sql import functions as F

    cap_ms = int(cap / timedelta(milliseconds=1))
    longer = F.col("time_to_live_ms") > F.lit(cap_ms)
    cut_expiry = F.expr(expiry_sql("coalesce(scheduled_enqueue_time, enqueued_time)",
                                   str(cap_ms * 1000)))
    return (rows.withColumn("expires_at", F.when(longer, cut_expiry)
                            .otherwise(F.col("expires_at")))
            .withColumn("time_to_live_ms", F.when(longer, F.lit(cap_ms).cast("bigint"))
                        .otherwise(F.col("time_to_live_ms"))))
