"""Pairing options and the backlog queues' names and properties (PAIR-1).

A client paired with a secondary namespace keeps ``backlog_queue_count`` backlog queues there,
named ``<primary identity>/x-servicebus-transfer/<i>``. The primary identity names the primary
namespace whatever its URI looks like (``file:/data/ns``, ``abfss://c@acct.dfs.core.windows.net/
sb``, ``s3a://bucket/ns``...): a readable slug of the URI's last segments and 10 hex digits of
a SHA-256 of the whole normalized URI, so it is a valid entity path, stable across processes
and hosts that name the primary the same way, and distinct for distinct primaries.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Dict

from ..exceptions import ConfigurationError

__all__ = ["PairedNamespaceOptions", "BACKLOG_QUEUE_PROPERTIES", "MAX_BACKLOG_QUEUES",
           "primary_identity", "backlog_queue_name", "TRANSFER_SEGMENT", "is_backlog_queue",
           "backlog_queues_of", "DISABLED_CHOICES"]

TRANSFER_SEGMENT = "x-servicebus-transfer"
#: Backlog queue indexes run 0..n-1; more than this many is a mistake, not a need.
MAX_BACKLOG_QUEUES = 100

#: PAIR-1: exactly these properties on every backlog queue sbdelta creates (a queue that
#: exists already is used as it is). None is "unlimited" (TimeSpan.MaxValue) in QueueProperties.
BACKLOG_QUEUE_PROPERTIES: Dict[str, Any] = {
    "max_size_in_megabytes": 5120,
    "max_delivery_count": 2 ** 31 - 1,
    "default_message_time_to_live": None,
    "auto_delete_on_idle": None,
    "lock_duration": timedelta(minutes=1),
    "dead_lettering_on_message_expiration": True,
    "enable_batched_operations": True,
}


#: What a syphon may do with messages for a disabled destination (``Syphon(disabled=...)``,
#: ``PairedNamespaceOptions(syphon_disabled=...)``).
DISABLED_CHOICES = ("wait", "dead_letter")


def _interval(value: Any, name: str) -> timedelta:
    if isinstance(value, bool) or not isinstance(value, (timedelta, int, float)):
        raise ConfigurationError(
            f"{name} must be a timedelta or a number of seconds, got {type(value).__name__}")
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not 0 < seconds <= 24 * 3600:
        raise ConfigurationError(f"{name} must be more than 0 and at most 1 day, got {value!r}")
    return timedelta(seconds=seconds)


@dataclass(frozen=True)
class PairedNamespaceOptions:
    """How a client pairs with a secondary namespace (azure's
    ``SendAvailabilityPairedNamespaceOptions``, in PEP 8).

    Args:
        secondary: The secondary namespace location (folder path or Hadoop URI), where the
            backlog queues live.
        backlog_queue_count: How many backlog queues to use (1..100; default 10).
        failover_interval: How long sends to an entity may keep failing before its sends go to
            the backlog queues (PAIR-3; default 1 minute).
        ping_primary_interval: How often a failed-over entity's primary is pinged (PAIR-5;
            default 1 minute).
        enable_syphon: Whether the client runs a syphon moving backlog messages to the primary
            (PAIR-7; default False: run ``jobs/syphon.py`` instead).
        syphon_disabled: What the client's syphon does with messages for a destination that
            is Disabled or SendDisabled: ``"wait"`` (default: they, and what is behind them
            in their backlog queue, wait until it takes messages again) or ``"dead_letter"``
            (to the backlog queue's dead-letter queue, reason ``MessagingEntityDisabled``);
            as ``Syphon(disabled=...)`` and the job's ``--dead-letter-disabled``.
    """

    secondary: str
    backlog_queue_count: int = 10
    failover_interval: timedelta = timedelta(minutes=1)
    ping_primary_interval: timedelta = timedelta(minutes=1)
    enable_syphon: bool = False
    syphon_disabled: str = "wait"

    def __post_init__(self) -> None:
        if not isinstance(self.secondary, str) or not self.secondary.strip():
            raise ConfigurationError(
                f"secondary must be the secondary namespace's folder path or URI, got "
                f"{self.secondary!r}")
        count = self.backlog_queue_count
        if isinstance(count, bool) or not isinstance(count, int) \
                or not 1 <= count <= MAX_BACKLOG_QUEUES:
            raise ConfigurationError(
                f"backlog_queue_count must be an integer from 1 to {MAX_BACKLOG_QUEUES}, got "
                f"{count!r}")
        object.__setattr__(self, "failover_interval",
                           _interval(self.failover_interval, "failover_interval"))
        object.__setattr__(self, "ping_primary_interval",
                           _interval(self.ping_primary_interval, "ping_primary_interval"))
        if not isinstance(self.enable_syphon, bool):
            raise ConfigurationError(
                f"enable_syphon must be True or False, got {self.enable_syphon!r}")
        if self.syphon_disabled not in DISABLED_CHOICES:
            raise ConfigurationError(
                f"syphon_disabled must be one of {list(DISABLED_CHOICES)} (what the syphon "
                f"does with messages for a disabled destination), got {self.syphon_disabled!r}")


def primary_identity(root: str) -> str:
    """The primary namespace's name in backlog queue paths: ``<slug>-<10 hex digits>``.

    ``root`` is the primary's normalized root URI (``Namespace.root``): the same primary named
    the same way gives the same identity in every process."""
    if not isinstance(root, str) or not root:
        raise ConfigurationError(f"a namespace root URI is needed, got {root!r}")
    digest = hashlib.sha256(root.encode("utf-8")).hexdigest()[:10]
    path = re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*:/*", "", root).rstrip("/")
    tail = "-".join(path.split("/")[-2:])
    slug = re.sub(r"[^a-z0-9]+", "-", tail.lower()).strip("-")[:40].strip("-")
    return f"{slug}-{digest}" if slug else f"ns-{digest}"


def backlog_queue_name(identity: str, index: int) -> str:
    """PAIR-1: ``<primary identity>/x-servicebus-transfer/<index>``."""
    return f"{identity}/{TRANSFER_SEGMENT}/{index}"


_BACKLOG_NAME = re.compile(rf"^(.+)/{re.escape(TRANSFER_SEGMENT)}/([0-9]+)$", re.IGNORECASE)


def is_backlog_queue(name: str) -> bool:
    """Whether queue ``name`` is a backlog queue (``<identity>/x-servicebus-transfer/<i>``)."""
    return isinstance(name, str) and _BACKLOG_NAME.match(name) is not None


def backlog_queues_of(identity: str, names) -> list:
    """The backlog queues of primary ``identity`` among queue ``names``, by index."""
    found = []
    for name in names:
        m = _BACKLOG_NAME.match(name)
        if m and m.group(1).casefold() == identity.casefold():
            found.append((int(m.group(2)), name))
    return [name for _, name in sorted(found)]
