"""``sbdelta sweep | compact | syphon``: the batch jobs, one run from a terminal.

The same functions the spark-submit jobs in ``jobs/`` run (:mod:`sbdelta.maintenance`,
:class:`sbdelta.paired.syphon.Syphon`); their report prints as a table, or with ``--json`` as
data.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import click

from .base import guard, json_option, main, namespace_option, to_json


def _print(report, as_json: bool) -> None:
    click.echo(to_json(dataclasses.asdict(report)) if as_json else str(report))


def _entities(entity: Tuple[str, ...]) -> Optional[list]:
    return list(entity) or None


entity_filter = click.option(
    "--entity", "-e", multiple=True,
    help="Only this queue, topic (with its subscriptions) or TOPIC/Subscriptions/SUB; "
         "repeatable. Default: every entity.")


@main.command()
@namespace_option
@entity_filter
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="Messages per commit (default: the job's).")
@click.option("--dry-run", is_flag=True, help="Count what would move; change nothing.")
@json_option
@guard
def sweep(namespace: str, entity: Tuple[str, ...], batch_size: Optional[int], dry_run: bool,
          as_json: bool) -> None:
    """Dead-letter or drop expired messages and messages past their delivery limit (TTL-5/6,
    RECV-5), as the expire job does."""
    from ..maintenance import DEFAULT_SWEEP_BATCH, expire_messages

    _print(expire_messages(namespace, entities=_entities(entity), dry_run=dry_run,
                           batch_size=batch_size or DEFAULT_SWEEP_BATCH), as_json)


@main.command()
@namespace_option
@entity_filter
@click.option("--retain-hours", type=float, default=None,
              help="VACUUM retention (default: Delta's 7 days; never below the safe floor).")
@click.option("--dry-run", is_flag=True, help="Count what would be removed; change nothing.")
@json_option
@guard
def compact(namespace: str, entity: Tuple[str, ...], retain_hours: Optional[float],
            dry_run: bool, as_json: bool) -> None:
    """Remove settled rows, compact small files, vacuum and checkpoint, as the compaction job
    does."""
    from ..maintenance import DEFAULT_RETAIN_HOURS
    from ..maintenance import compact as run

    _print(run(namespace, entities=_entities(entity), dry_run=dry_run,
               retain_hours=DEFAULT_RETAIN_HOURS if retain_hours is None else retain_hours),
           as_json)


@main.command()
@namespace_option
@click.option("--secondary", "-s", envvar="SBDELTA_SECONDARY", required=True,
              help="The secondary namespace holding the backlog queues.")
@click.option("--dry-run", is_flag=True, help="List the backlog queues; move nothing.")
@click.option("--dead-letter-disabled", is_flag=True,
              help="Dead-letter messages for a disabled destination instead of waiting for it.")
@guard
def syphon(namespace: str, secondary: str, dry_run: bool, dead_letter_disabled: bool) -> None:
    """Move the paired primary NAMESPACE's backlog messages home from SECONDARY (PAIR-7).

    One drain; jobs/syphon.py --follow keeps polling.
    """
    from ..paired.syphon import Syphon

    disabled = "dead_letter" if dead_letter_disabled else "wait"
    click.echo(str(Syphon(namespace, secondary, disabled=disabled).drain(dry_run=dry_run)))
