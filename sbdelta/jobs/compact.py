"""Table maintenance: remove settled rows, compact small files, checkpoint and vacuum.

    python -m jobs.compact [--namespace DIR] [--entity NAME ...] [--retain-hours H] [--dry-run]
    spark-submit $(sbdelta spark-submit-args) jobs/compact.py --namespace DIR

Safe to run while senders, receivers and other jobs are active, and idempotent. --retain-hours
(default 168, Delta's) may go down to 1, the safe floor (the longest an sbdelta operation reads
an older snapshot); a lower value is refused. Prints the report; exits 1 on failure.
Settings: conf/maintenance.json ("compact": {"retain_hours": ...}), then flags.
"""

from __future__ import annotations

from . import common


def main(argv=None) -> int:
    def flags(parser):
        parser.add_argument("--retain-hours", type=float, metavar="H",
                            help="vacuum keeps files removed less than H hours ago, H >= 1 "
                                 "(default: the conf file's retain_hours, else 168)")

    def action(args, settings):
        from ..maintenance import DEFAULT_RETAIN_HOURS, compact

        hours = args.retain_hours
        if hours is None:
            hours = float(settings.get("retain_hours", DEFAULT_RETAIN_HOURS))
        return compact(args.namespace, entities=args.entities, dry_run=args.dry_run,
                       retain_hours=hours)

    return common.run("compact", __doc__, action, flags, argv=argv)


def entry() -> None:
    """The console script (``sbdelta-compact``, a Databricks wheel task)."""
    common.exit_with(main())


if __name__ == "__main__":
    entry()
