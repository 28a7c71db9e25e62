"""Forwarding catch-up: move what waits in forwarding queues and subscriptions (and dead letters
to forward_dead_lettered_messages_to) to their destinations.

    python -m jobs.forward_messages [--namespace DIR] [--entity NAME ...] [--dry-run]
    spark-submit $(sbdelta spark-submit-args) jobs/forward_messages.py --namespace DIR

Sends move their messages along forward_to themselves; this job moves what a send left behind
(a crash between its commits), what a source held before forwarding was switched on, and dead
letters. Safe to run while senders and other copies run; each message arrives once. Prints the
report; exits 1 with the error on failure. Settings: conf/maintenance.json, then
``SBDELTA_NAMESPACE``, then flags.
"""

from __future__ import annotations

from . import common


def main(argv=None) -> int:
    def action(args, settings):
        from ..maintenance import forward_messages

        return forward_messages(args.namespace, entities=args.entities, dry_run=args.dry_run)

    return common.run("forward_messages", __doc__, action, argv=argv)


def entry() -> None:
    """The console script (``sbdelta-forward-messages``, a Databricks wheel task)."""
    common.exit_with(main())


if __name__ == "__main__":
    entry()
