"""What every maintenance job shares: flags, defaults from conf/maintenance.json, exit codes.

Settings come, weakest first, from ``conf/maintenance.json`` (or ``--conf FILE``), the
environment (``SBDELTA_NAMESPACE``, ``SBDELTA_ENGINE``) and the command line (``--engine``
wins over the conf file's ``engine``, which wins over ``$SBDELTA_ENGINE``). A job prints its report and exits 0,
or prints the error and exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, Dict, Optional

#: A source checkout: ``conf/`` beside the ``sbdelta`` package. Its conf file and its
#: ``./namespace`` are the defaults there; an installed wheel (a Databricks job) has neither,
#: so the namespace comes from a flag or the environment and the conf file is optional.
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONF = ROOT / "conf" / "maintenance.json"
DEFAULT_NAMESPACE = (ROOT if (ROOT / "conf").is_dir() else Path.cwd()) / "namespace"
ENGINES = ("auto", "spark", "delta-rs")  # as sbdelta's engine option (docs/engines.md)


def load_settings(path: Optional[str], job: str) -> Dict[str, object]:
    """The job's section of the maintenance conf merged over its shared keys."""
    import json5

    file = Path(path) if path else DEFAULT_CONF
    if not file.exists():
        if path:
            raise SystemExit(f"{job}: conf file {file} does not exist")
        return {}
    data = json5.loads(file.read_text())
    if not isinstance(data, dict):
        raise SystemExit(f"{job}: {file} must hold a JSON object")
    shared = {k: v for k, v in data.items() if not isinstance(v, dict)}
    return {**shared, **(data.get(job) or {})}


def run(job: str, doc: str, action: Callable[[argparse.Namespace, Dict[str, object]], object],
        add_flags: Callable[[argparse.ArgumentParser], None] = lambda p: None,
        argv=None) -> int:
    parser = argparse.ArgumentParser(prog=job, description=doc.splitlines()[0])
    parser.add_argument("--conf", metavar="FILE",
                        help="settings file (default: conf/maintenance.json of a source checkout)")
    parser.add_argument("--namespace", help="namespace root (default: the conf file's "
                        "namespace, else $SBDELTA_NAMESPACE, else ./namespace)")
    parser.add_argument("--entity", action="append", dest="entities", metavar="NAME",
                        help="only this entity (repeatable; default: all): a queue, a topic (with "
                             "its subscriptions) or topic/Subscriptions/name")
    parser.add_argument("--dry-run", action="store_true", help="report, change nothing")
    parser.add_argument("--engine", choices=ENGINES,
                        help="which engine works on local tables (docs/engines.md; default: the "
                             "conf file's engine, else $SBDELTA_ENGINE, else auto)")
    add_flags(parser)
    args = parser.parse_args(argv)
    settings = load_settings(args.conf, job)
    engine = args.engine or settings.get("engine")
    if engine is not None and engine not in ENGINES:
        raise SystemExit(f"{job}: engine {engine!r} in {args.conf or DEFAULT_CONF} is not an "
                         f"engine: use one of {', '.join(ENGINES)}")
    if engine is not None:  # the jobs' clients and maintenance functions read it from there
        os.environ["SBDELTA_ENGINE"] = str(engine)
    args.namespace = (args.namespace or settings.get("namespace")
                      or os.environ.get("SBDELTA_NAMESPACE") or str(DEFAULT_NAMESPACE))
    args.entities = args.entities or settings.get("entities") or None

    from ..exceptions import ServiceBusError

    try:
        report = action(args, settings)
    except (ServiceBusError, ValueError) as exc:
        print(f"{job} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(report)
    return 0


def exit_with(code: int) -> None:
    """End the job's process with ``code``, without Python's interpreter finalization.

    delta-rs (the engine of single calls on local namespaces) keeps a Tokio runtime whose worker
    threads are never told to stop; one caught mid-task while the interpreter finalizes can
    abort the process (SIGABRT, exit status 134) after the job has finished and printed its
    report (seen in the suite: the expire job exiting 134 instead of 1; the same failure as
    delta-io/delta-rs#2184 and lancedb/lancedb#4175). The job's output is flushed first; Spark
    stops through the JVM's own shutdown hook. On Databricks, where the task's Python process
    belongs to the cluster, it exits as usual (``sys.exit``).
    """
    import logging

    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        sys.exit(code)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
