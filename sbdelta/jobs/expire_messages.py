"""Expiry sweep: dead-letter or drop expired messages and messages past their delivery limit.

    python -m jobs.expire_messages [--namespace DIR] [--entity NAME ...] [--dry-run]
                                   [--batch-size N]
    spark-submit $(sbdelta spark-submit-args) jobs/expire_messages.py --namespace DIR

Safe to run while senders, receivers and other sweeps are active, and idempotent. Prints the
report; exits 1 with the error on failure. Settings: conf/maintenance.json, then
``SBDELTA_NAMESPACE``, then flags.
"""

from __future__ import annotations

from . import common


def main(argv=None) -> int:
    def flags(parser):
        parser.add_argument("--batch-size", type=int, metavar="N",
                            help="messages per commit, repeated until none is left "
                                 "(default: conf, else 10000)")

    def action(args, settings):
        from ..maintenance import DEFAULT_SWEEP_BATCH, expire_messages

        batch = args.batch_size or settings.get("batch_size") or DEFAULT_SWEEP_BATCH
        return expire_messages(args.namespace, entities=args.entities, dry_run=args.dry_run,
                               batch_size=batch)

    return common.run("expire_messages", __doc__, action, flags, argv=argv)


def entry() -> None:
    """The console script (``sbdelta-expire-messages``, a Databricks wheel task)."""
    common.exit_with(main())


if __name__ == "__main__":
    entry()
