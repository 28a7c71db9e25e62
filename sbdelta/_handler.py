"""What senders and receivers share: their client, entity name, context manager, clock and
argument checks. Time: every broker decision (lock expiry, TTL, schedules, duplicate windows)
uses the client's ``clock``; only waiting for messages (``max_wait_time``) uses real time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Union

from .exceptions import ServiceBusInvalidOperationError

if TYPE_CHECKING:
    from ._client import ServiceBusClient
    from ._entity import Entity


def positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ServiceBusInvalidOperationError(
            f"{name} must be an integer >= 1, got {value!r}")
    return value


def wait_seconds(value: Any, name: str) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ServiceBusInvalidOperationError(
            f"{name} must be None or a number of seconds >= 0, got {value!r}")
    return float(value)


def sequence_numbers(value: Union[int, Sequence[int]]) -> List[int]:
    """One sequence number or many, each an integer in [0, 2**63), duplicates dropped."""
    seqs = [value] if isinstance(value, int) else list(value)
    for s in seqs:
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 2 ** 63:
            raise ServiceBusInvalidOperationError(
                f"sequence numbers are integers in [0, 2**63), got {s!r}")
    return list(dict.fromkeys(seqs))


class Handler:
    """A sender or receiver bound to one entity of a client's namespace."""

    def __init__(self, client: "ServiceBusClient", entity_name: str) -> None:
        self._client = client
        self._name = entity_name

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release: every operation is its own commit."""

    def _now(self) -> datetime:
        return self._client._ns.clock.now()

    def _lookup(self) -> "Entity":
        """The entity as it is now (SETTLE-7: properties may change at any time); a lookup is
        activity (IDLE-2: sends, receives, peeks and settlements; one small file a minute)."""
        self._client._check_open()
        entity = self._client._entities.queue(self._name)
        self._client._activity.touch(entity.store.folder)
        return entity
