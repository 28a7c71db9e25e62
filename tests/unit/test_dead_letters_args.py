"""``resubmit_dead_letters`` refuses what it cannot do before it touches the namespace (the
client is never used here)."""

import pytest

from sbdelta import ServiceBusInvalidOperationError, resubmit_dead_letters


def test_a_subscriptions_dead_letters_go_back_only_through_the_topic_when_asked():
    with pytest.raises(ServiceBusInvalidOperationError, match="pass to_topic=True"):
        resubmit_dead_letters(None, "events", subscription_name="audit")


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_max_count_is_a_positive_integer_or_none(bad):
    with pytest.raises(ServiceBusInvalidOperationError, match="max_count must be an integer"):
        resubmit_dead_letters(None, "orders", max_count=bad)
