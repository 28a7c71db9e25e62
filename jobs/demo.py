"""The main job: set up a local namespace from conf/namespace.json and show what is in it.

    python -m jobs.demo [--namespace DIR] [--config FILE]
    spark-submit $(sbdelta spark-submit-args) jobs/demo.py --namespace DIR

Runs on the embedded default (local Spark, a local Delta namespace). Applying the config is
idempotent: a second run reports every entity as unchanged.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # spark-submit runs this file without the repo on sys.path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default=str(ROOT / "namespace"),
                        help="namespace root (default: ./namespace)")
    parser.add_argument("--config", default=str(ROOT / "conf" / "namespace.json"),
                        help="emulator-format config to apply (default: conf/namespace.json)")
    args = parser.parse_args(argv)

    from sbdelta import ServiceBusError
    from sbdelta.management import ServiceBusAdministrationClient

    started = time.monotonic()
    try:
        admin = ServiceBusAdministrationClient(args.namespace)
        print(f"== applying {args.config}")
        print(admin.apply_config(args.config))
        print("== entities")
        for q in admin.list_queues():
            print(f"queue        {q.name:<28} lock={q.lock_duration} "
                  f"max_delivery={q.max_delivery_count} partitioned={q.enable_partitioning}")
        for t in admin.list_topics():
            print(f"topic        {t.name}")
            for s in admin.list_subscriptions(t.name):
                rules = ", ".join(f"{r.name}={type(r.filter).__name__}"
                                  for r in admin.list_rules(t.name, s.name))
                print(f"subscription {t.name}/{s.name:<21} rules: {rules}")
    except ServiceBusError as exc:
        print(f"demo failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"== done in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
