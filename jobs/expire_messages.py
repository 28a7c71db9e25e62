"""Expiry sweep: dead-letter or drop expired messages and messages past their delivery limit.

    python -m jobs.expire_messages [--namespace DIR] [--entity NAME ...] [--dry-run]
    spark-submit $(sbdelta spark-submit-args) jobs/expire_messages.py --namespace DIR

Safe to run while senders, receivers and other sweeps are active, and idempotent. Prints the
report; exits 1 with the error on failure. Settings: conf/maintenance.json, then
``SBDELTA_NAMESPACE``, then flags.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # spark-submit: repo not on path

from jobs import _common  # noqa: E402


def main(argv=None) -> int:
    def action(args, settings):
        from sbdelta.maintenance import expire_messages

        return expire_messages(args.namespace, entities=args.entities, dry_run=args.dry_run)

    return _common.run("expire_messages", __doc__, action, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
