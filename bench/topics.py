"""Topics (issue 13): send cost against the number of subscriptions, and a filtered
subscription's receive against a queue receive of the same size.

Rows:

- ``send_dataframe N to a topic with K subscriptions`` against the same send to a queue: a topic
  stores each message once and reads no subscription at send time, so the ratio should stay
  flat in K (target <= 1.2x).
- ``receive_dataframe R from 1 of S filtered subscriptions`` at a topic backlog of B, each
  subscription's SQL filter matching 10% (``g = i``), against ``receive_dataframe R`` from a
  queue (target <= 1.3x). Each repetition reads another subscription (its 10% of the backlog
  is at least R).
- ``fan-out drain``: a topic of F messages and S subscriptions (every message in each), each
  subscription drained by ``receive_dataframe`` + ``complete_messages`` in batches: messages
  settled per second over all S subscriptions, against the same drain of a queue of F messages.
"""

from __future__ import annotations

from typing import List

from .measure import KB, LOCK, Row, Timer, median, throughput_row


def _tagged(bench, n: int, start: int = 0):
    """``n`` message rows whose application property ``g`` is ``id % 10``."""
    from pyspark.sql import functions as F

    return bench.source(n, KB, start=start).withColumn(
        "application_properties", F.to_json(F.struct((F.col("message_id").substr(2, 20)
                                                      .cast("bigint") % 10).alias("g"))))


def run_topics(bench) -> List[Row]:
    from sbdelta.management import RuleProperties, SqlRuleFilter

    s = bench.sizes
    rows: List[Row] = []
    n = s.topic_send
    for k in s.topic_subscriptions:
        topic = f"topic{next(bench._names)}"
        bench.admin.create_topic(topic)
        for i in range(k):
            bench.admin.create_subscription(topic, f"s{i}", lock_duration=LOCK)
        queue = bench.queue("tq")
        to_topic = bench.client.get_topic_sender(topic)
        to_queue = bench.client.get_queue_sender(queue)
        sb, base = [], []
        for rep in range(s.reps):
            df = _tagged(bench, n, start=rep * n)
            a, b = bench.pair(rep, lambda: to_topic.send_dataframe(df),
                              lambda: to_queue.send_dataframe(df))
            sb.append(a)
            base.append(b)
        subscriptions = f"{k} subscription{'s' if k > 1 else ''}"
        rows.append(throughput_row("topics", f"send_dataframe {n:,} to a topic with "
                                   f"{subscriptions}", n, sb, base, "the same send to a queue",
                                   subscriptions=k, series="topic send"))
        bench.echo(f"  topic send {n} with {subscriptions}: {rows[-1].sbdelta:,.0f} msgs/s "
                   f"vs queue {rows[-1].baseline:,.0f}")

    # A filtered subscription's receive at a backlog, against a queue receive.
    r, backlog, subs = s.topic_receive, s.topic_backlog, s.topic_filtered_subscriptions
    topic = f"topicr{next(bench._names)}"
    bench.admin.create_topic(topic)
    for i in range(subs):
        bench.admin.create_subscription(topic, f"g{i}", lock_duration=LOCK, default_rule=(
            RuleProperties(topic, f"g{i}", "tenth", filter=SqlRuleFilter(f"g = {i % 10}"))))
    sender = bench.client.get_topic_sender(topic)
    for at in range(0, backlog, s.backlog_chunk):
        sender.send_dataframe(_tagged(bench, min(s.backlog_chunk, backlog - at), start=at))
    queue = bench.queue("tqr")
    bench.fill(queue, r * (s.reps + 1), s.backlog_chunk)
    plain = bench.client.get_queue_receiver(queue, max_wait_time=0)
    sb, base = [], []
    for rep in range(s.reps):
        # Each repetition reads another subscription: each one's share of the backlog (10%)
        # is one receive's worth, at the same backlog.
        sub = bench.client.get_subscription_receiver(topic, f"g{rep % subs}", max_wait_time=0)
        for receiver, out in ((sub, sb), (plain, base)):
            with Timer() as t:
                df = receiver.receive_dataframe(r)
                got = df.count()
            if got != r:
                raise RuntimeError(f"topics: received {got} of {r}")
            out.append(t.seconds)
            receiver.complete_messages(df)  # untimed
    rows.append(throughput_row(
        "topics", f"receive_dataframe {r:,} from 1 of {subs} subscriptions (10% SQL filter), "
        f"topic backlog {backlog:,}", r, sb, base, f"receive_dataframe {r:,} from a queue",
        subscriptions=subs, backlog=backlog, series="subscription receive"))
    bench.echo(f"  subscription receive {r}: {median(sb):.2f} s vs queue {median(base):.2f} s")
    if s.topic_fanout:
        rows.append(_fanout_drain(bench))
    return rows


def _drained(receiver, expected: int, batch: int) -> int:
    done = 0
    while done < expected:  # stop at the last message, like the queue drain
        df = receiver.receive_dataframe(batch)
        if df.count() == 0:
            break
        done += receiver.complete_messages(df)
    if done != expected:
        raise RuntimeError(f"fan-out drain: completed {done} of {expected}")
    return done


def _fanout_drain(bench) -> Row:
    s = bench.sizes
    f, subs, batch = s.topic_fanout, s.topic_fanout_subscriptions, s.topic_fanout_batch
    sb, base = [], []
    for rep in range(s.reps):
        topic = f"topicf{next(bench._names)}"
        bench.admin.create_topic(topic)
        for i in range(subs):
            bench.admin.create_subscription(topic, f"f{i}", lock_duration=LOCK)
        sender = bench.client.get_topic_sender(topic)
        for at in range(0, f, s.backlog_chunk):  # untimed: the drain is measured
            sender.send_dataframe(_tagged(bench, min(s.backlog_chunk, f - at), start=at))
        queue = bench.queue("tqf")
        bench.fill(queue, f, s.backlog_chunk)
        with Timer() as t:
            for i in range(subs):
                _drained(bench.client.get_subscription_receiver(topic, f"f{i}",
                                                                max_wait_time=0), f, batch)
        sb.append(t.seconds)
        with Timer() as t:
            _drained(bench.client.get_queue_receiver(queue, max_wait_time=0), f, batch)
        base.append(t.seconds)
    row = Row("topics", f"fan-out drain: {f:,} messages x {subs} subscriptions, "
              f"receive_dataframe + complete_messages of {batch:,}", "msgs/s", True,
              f * subs / median(sb), baseline=f / median(base),
              baseline_name=f"the same drain of a queue of {f:,}",
              params=dict(messages=f, subscriptions=subs, batch=batch, series="fan-out drain"),
              samples={"sbdelta_seconds": sb, "baseline_seconds": base})
    bench.echo(f"  fan-out drain {f} x {subs}: {row.sbdelta:,.0f} msgs/s vs queue "
               f"{row.baseline:,.0f}")
    return row
