"""Dead letters back to work: :func:`resubmit_dead_letters` sends a queue's (or, through its
topic, a subscription's) dead letters again and removes them from the dead-letter queue.

Used by ``sbdelta dlq resubmit`` and the dead-letter notebook; built on the public client API
only (the same locks, commits and errors as any program).
"""

from __future__ import annotations

from typing import Callable, List, Optional

from ._amqp_body import body_of
from ._message import (ServiceBusMessage, ServiceBusReceivedMessage, ServiceBusSubQueue,
                       with_body)
from .exceptions import MessageLockLostError, ServiceBusInvalidOperationError

#: Dead letters per receive and per send commit.
BATCH = 500


def resubmit_dead_letters(client, entity_name: str, *, subscription_name: Optional[str] = None,
                          reason: Optional[str] = None, max_count: Optional[int] = None,
                          to_topic: bool = False,
                          on_batch: Optional[Callable[[int], None]] = None) -> int:
    """Send dead letters of queue ``entity_name`` back to it (or, with ``subscription_name`` and
    ``to_topic=True``, a subscription's to its topic), then complete them in the dead-letter
    queue; returns how many.

    Only those whose ``dead_letter_reason`` is ``reason`` (all when None), at most
    ``max_count``. Each batch is one send commit, then one completion commit: a crash between
    the two sends that batch again (at least once; a queue with duplicate detection drops the
    repeats). The copies keep body, application properties, message id, session, partition
    key, subject, content type, correlation id and the reply fields; their time to live starts
    again from the entity's default. Dead letters left out stay where they were (their locks
    are released at the end). ``on_batch(n)`` is told of each batch moved.

    A subscription has no inbox of its own: its dead letters can only go back through its
    topic, which copies them to every subscription whose rules take them; ``to_topic=True``
    says that is meant (ServiceBusInvalidOperationError otherwise).
    """
    if subscription_name is not None and not to_topic:
        raise ServiceBusInvalidOperationError(
            "a subscription's dead letters can only go back through its topic, which copies "
            "them to every subscription whose rules take them: pass to_topic=True to do that")
    if max_count is not None and (isinstance(max_count, bool) or not isinstance(max_count, int)
                                  or max_count < 1):
        raise ServiceBusInvalidOperationError(
            f"max_count must be an integer >= 1 or None, got {max_count!r}")
    if subscription_name is None:
        sender = client.get_queue_sender(entity_name)
        receiver = client.get_queue_receiver(entity_name, max_wait_time=0,
                                             sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    else:
        sender = client.get_topic_sender(entity_name)
        receiver = client.get_subscription_receiver(entity_name, subscription_name,
                                                    max_wait_time=0,
                                                    sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    moved, seen = 0, set()
    held: List[ServiceBusReceivedMessage] = []
    with sender, receiver:
        try:
            while max_count is None or moved < max_count:
                want = BATCH if max_count is None else min(BATCH, max_count - moved)
                batch = [m for m in receiver.receive_messages(want)
                         if m.sequence_number not in seen]
                if not batch:
                    break
                seen.update(m.sequence_number for m in batch)
                chosen = [m for m in batch if reason is None or m.dead_letter_reason == reason]
                held += [m for m in batch if m not in chosen]  # locked: not received again
                if chosen:
                    sender.send_messages([copy_of(m) for m in chosen])
                    receiver.complete_messages(chosen)
                    moved += len(chosen)
                    if on_batch is not None:
                        on_batch(len(chosen))
        finally:
            for m in held:  # the ones left out go back to the dead-letter queue at once
                try:
                    receiver.abandon_message(m)
                except MessageLockLostError:
                    pass  # its lock ended already: it is back anyway
    return moved


def copy_of(message: ServiceBusReceivedMessage) -> ServiceBusMessage:
    """A message to send again with what ``message`` carried (not its time to live, schedule
    or broker fields)."""
    props = message.application_properties
    return with_body(ServiceBusMessage(
        None,
        application_properties=None if props is None else {str(k): v for k, v in props.items()},
        session_id=message.session_id, message_id=message.message_id,
        partition_key=message.partition_key, content_type=message.content_type,
        correlation_id=message.correlation_id, subject=message.subject, to=message.to,
        reply_to=message.reply_to, reply_to_session_id=message.reply_to_session_id),
        *body_of(message))
