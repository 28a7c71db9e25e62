"""The syphon of a paired namespace: move backlog messages home to the primary (PAIR-7).

    python -m jobs.syphon --namespace PRIMARY --secondary SECONDARY [--follow]
                          [--poll-seconds S] [--entity BACKLOG_QUEUE ...] [--dry-run]
    spark-submit $(sbdelta spark-submit-args) jobs/syphon.py --namespace P --secondary S

Finds the primary's backlog queues in the secondary namespace (``<primary identity>/
x-servicebus-transfer/<i>``) and moves every message to the entity its ``x-ms-path`` names,
with session id, time to live and scheduled time restored. Messages whose destination is
missing go to the backlog queue's dead-letter queue with the reason; a destination disabled
for sending is waited for (the report says so), or with ``--dead-letter-disabled`` its
messages are dead-lettered too (reason ``MessagingEntityDisabled``). A drain by
default; ``--follow`` polls every ``--poll-seconds`` until SIGTERM or Ctrl-C. Safe to run while
paired senders, receivers and other syphons are active, and after being killed: nothing is lost
or delivered twice. Prints the report; exits 1 with the error on failure. Settings:
conf/maintenance.json (``namespace``, section ``syphon``: ``secondary``, ``poll_seconds``,
``disabled``: ``wait`` or ``dead_letter``), then
``SBDELTA_NAMESPACE``, then flags.
"""

from __future__ import annotations

import signal
import threading

from . import common

DEFAULT_POLL_SECONDS = 5.0


def main(argv=None) -> int:
    def flags(parser):
        parser.add_argument("--secondary", metavar="NS",
                            help="the secondary namespace holding the backlog queues "
                                 "(default: conf)")
        parser.add_argument("--follow", action="store_true",
                            help="keep polling the backlog queues until stopped")
        parser.add_argument("--poll-seconds", type=float, metavar="S",
                            help=f"seconds between polls with --follow (default: conf, else "
                                 f"{DEFAULT_POLL_SECONDS:g})")
        parser.add_argument("--dead-letter-disabled", action="store_true",
                            help="dead-letter messages for a disabled destination instead of "
                                 "waiting for it (default: conf 'disabled', else wait)")

    def action(args, settings):
        from ..exceptions import ConfigurationError
        from ..paired.syphon import Syphon, SyphonReport

        secondary = args.secondary or settings.get("secondary")
        if not secondary:
            raise ConfigurationError("syphon: --secondary (or 'secondary' in the conf file's "
                                     "syphon section) names the namespace of the backlog "
                                     "queues")
        poll = next((v for v in (args.poll_seconds, settings.get("poll_seconds"))
                     if v is not None), DEFAULT_POLL_SECONDS)
        if not isinstance(poll, (int, float)) or isinstance(poll, bool) or poll <= 0:
            raise ConfigurationError(f"syphon: poll_seconds must be a number > 0, got {poll!r}")
        disabled = "dead_letter" if args.dead_letter_disabled else settings.get("disabled",
                                                                                   "wait")
        syphon = Syphon(args.namespace, secondary, disabled=disabled)
        if not args.follow:
            return syphon.drain(queues=args.entities, dry_run=args.dry_run)
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        total = SyphonReport(dry_run=args.dry_run)
        while not stop.is_set():
            report = syphon.drain(queues=args.entities, dry_run=args.dry_run, stop=stop.is_set)
            total.add(report)
            total.backlog_queues = report.backlog_queues
            total.seconds += report.seconds
            total.waiting = dict(report.waiting)  # what waits now, not what waited before
            if report.total_moved or report.dead_lettered or report.waiting:
                print(report, flush=True)
            stop.wait(poll)
        return total

    return common.run("syphon", __doc__, action, flags, argv=argv)


def entry() -> None:
    """The console script (``sbdelta-syphon``, a Databricks wheel task)."""
    common.exit_with(main())


if __name__ == "__main__":
    entry()
