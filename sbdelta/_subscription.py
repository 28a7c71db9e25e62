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

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Dict, Optional, Sequence

from ._clock import utc
from ._properties import RuleProperties
from ._store import sql_literal

RULE_HISTORY = "rule_history"


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
    """

    def __init__(self, windows: Sequence[RuleWindow], ttl_cap: Optional[timedelta],
                 dead_letter_errors: bool) -> None:
        self.windows = list(windows)
        self.ttl_cap = ttl_cap
        self.dead_letters = dead_letter_errors and any(
            _may_fail(w.rule) for w in self.windows)

    def __call__(self, rows):
        from pyspark.sql import functions as F

        from .rules import FILTER_EXCEPTION_REASON, let, with_properties

        enqueued = F.col("enqueued_time")
        windows = [(w, _covers(enqueued, w)) for w in self.windows]

        def evaluate(rules):
            # Every window's filter is one struct, all bound in one let (rules.let): each is
            # read twice below and evaluated once.
            filters = {f"w{i}": rules.filter_struct(w.rule.filter) for i, (w, _) in
                       enumerate(windows)}

            def admit(row):
                matched, errors = F.lit(False), []
                for i, (window, covers) in enumerate(windows):
                    result = row[f"w{i}"]
                    matched = matched | F.coalesce(covers & result["matched"], F.lit(False))
                    if _may_fail(window.rule):
                        errors.append(F.when(covers, result["error"]))
                error = (F.lit(None).cast("string") if not errors
                         else errors[0] if len(errors) == 1 else F.coalesce(*errors))
                return F.struct(matched.alias("matched"), F.when(~matched, error).alias("error"))

            return let(filters, admit)

        # One struct per row: the property bag is parsed once for every rule (with_properties),
        # and the filter below reads one field of it.
        rows = rows.withColumn("_admit", with_properties(evaluate))
        if self.dead_letters:
            rows = (rows.where(F.col("_admit.matched") | F.col("_admit.error").isNotNull())
                    .withColumn("dead_letter_reason",
                                F.when(F.col("_admit.error").isNotNull(),
                                       F.lit(FILTER_EXCEPTION_REASON)))
                    .withColumn("dead_letter_error_description", F.col("_admit.error")))
        else:
            rows = rows.where(F.col("_admit.matched"))
        rows = rows.drop("_admit")
        if self.ttl_cap is not None:
            rows = _cap_ttl(rows, self.ttl_cap)
        return rows


def _covers(enqueued, window: RuleWindow):
    """The window's rule applies to a message enqueued at ``enqueued`` (TOPIC-2)."""
    from pyspark.sql import functions as F

    covers = enqueued >= F.expr(sql_literal(window.valid_from))
    if window.valid_until is not None:
        covers = covers & (enqueued < F.expr(sql_literal(window.valid_until)))
    return covers


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
    cut_expiry = F.expr(f"timestamp_micros(unix_micros(coalesce(scheduled_enqueue_time, "
                        f"enqueued_time)) + {cap_ms * 1000})")
    return (rows.withColumn("expires_at", F.when(longer, cut_expiry)
                            .otherwise(F.col("expires_at")))
            .withColumn("time_to_live_ms", F.when(longer, F.lit(cap_ms).cast("bigint"))
                        .otherwise(F.col("time_to_live_ms"))))
