"""Auto-delete on idle: delete queues, topics and subscriptions idle past auto_delete_on_idle.

    python -m jobs.delete_idle_entities [--namespace DIR] [--entity PATH ...] [--dry-run]
    spark-submit $(sbdelta spark-submit-args) jobs/delete_idle_entities.py --namespace DIR

Idempotent; an entity that became active while the job ran is kept. Prints the report (every
entity visited, how long it has been idle, what was deleted); exits 1 on failure. Settings:
conf/maintenance.json, then ``SBDELTA_NAMESPACE``, then flags.
"""

from __future__ import annotations

from . import common


def main(argv=None) -> int:
    def action(args, settings):
        from ..maintenance import delete_idle_entities

        return delete_idle_entities(args.namespace, entities=args.entities,
                                    dry_run=args.dry_run)

    return common.run("delete_idle_entities", __doc__, action, argv=argv)


def entry() -> None:
    """The console script (``sbdelta-delete-idle-entities``, a Databricks wheel task)."""
    common.exit_with(main())


if __name__ == "__main__":
    entry()
