"""Auto-delete on idle: delete queues, topics and subscriptions idle past auto_delete_on_idle.

    python -m jobs.delete_idle_entities [--namespace DIR] [--entity PATH ...] [--dry-run]
    spark-submit $(sbdelta spark-submit-args) jobs/delete_idle_entities.py --namespace DIR

Idempotent; an entity that became active while the job ran is kept. Prints the report (every
entity visited, how long it has been idle, what was deleted); exits 1 on failure. Settings:
conf/maintenance.json, then ``SBDELTA_NAMESPACE``, then flags.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # spark-submit: repo not on path

from jobs import _common  # noqa: E402


def main(argv=None) -> int:
    def action(args, settings):
        from sbdelta.maintenance import delete_idle_entities

        return delete_idle_entities(args.namespace, entities=args.entities,
                                    dry_run=args.dry_run)

    return _common.run("delete_idle_entities", __doc__, action, argv=argv)


if __name__ == "__main__":
    _common.exit_with(main())
