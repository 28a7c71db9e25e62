"""The ``sbdelta`` command line (click; tables by rich, ``--json`` for scripts).

Commands by module: :mod:`.entities` (apply, list, show), :mod:`.messages` (stats, peek, send,
receive, purge, dlq resubmit), :mod:`.maintenance` (sweep, compact, syphon), :mod:`.runtime`
(setup, spark-submit-args). ``python -m sbdelta.cli`` is ``sbdelta`` (:func:`entry`).
"""

from . import entities, maintenance, messages, runtime  # importing them registers commands
from .base import DEFAULT_NAMESPACE, main


def entry() -> None:
    """The ``sbdelta`` console script: the command, then the process ends as the jobs' do
    (:func:`sbdelta.jobs.common.exit_with`: flushed, then ``os._exit``), because a command
    that ran through delta-rs leaves its Tokio worker threads running, and one caught in the
    interpreter's finalization can abort the process (SIGABRT) after the command is done."""
    from ..jobs.common import exit_with

    try:
        main.main(prog_name="sbdelta")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    exit_with(code)


__all__ = ["main", "entry", "DEFAULT_NAMESPACE", "entities", "maintenance", "messages",
           "runtime"]
