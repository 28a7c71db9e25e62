"""Expiry sweep: dead-letter or drop expired messages and messages past their delivery limit.

    python -m jobs.expire_messages [--namespace DIR] [--entity NAME ...] [--dry-run]
    spark-submit $(sbdelta spark-submit-args) jobs/expire_messages.py --namespace DIR

Safe to run while senders, receivers and other sweeps are active, and idempotent. Prints the
report; exits 1 with the error on failure. Defaults come from the environment
(``SBDELTA_NAMESPACE``) and flags override them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # spark-submit runs this file without the repo on sys.path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default=os.environ.get("SBDELTA_NAMESPACE",
                                                              str(ROOT / "namespace")),
                        help="namespace root (default: $SBDELTA_NAMESPACE or ./namespace)")
    parser.add_argument("--entity", action="append", dest="entities", metavar="NAME",
                        help="only this queue (repeatable; default: every queue)")
    parser.add_argument("--dry-run", action="store_true", help="report, change nothing")
    args = parser.parse_args(argv)

    from sbdelta import ServiceBusError
    from sbdelta.maintenance import expire_messages

    try:
        report = expire_messages(args.namespace, entities=args.entities, dry_run=args.dry_run)
    except ServiceBusError as exc:
        print(f"expire_messages failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
