"""Reads through delta-rs (``deltalake``) on local tables: answers that need no Spark job.

Spark answers these too, at the cost of a snapshot rebuild and a job or two each; on a local
namespace delta-rs reads the same log in milliseconds. Every function returns None when it
cannot answer (a remote table, ``deltalake`` not installed on Python < 3.10, or any error),
and the caller then asks Spark: the answers only decide whether Spark work is needed.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from typing import List, Optional

from .delta import local_path

log = logging.getLogger("sbdelta")


def _table(path: str):
    local = local_path(path)
    if local is None:
        return None
    try:
        from deltalake import DeltaTable
    except ImportError:  # Python < 3.10: the package is not installed
        return None
    return DeltaTable(local)


def rows(path: str) -> Optional[List[dict]]:
    """Every row of the table's latest version, or None."""
    try:
        table = _table(path)
        return None if table is None else table.to_pyarrow_table().to_pylist()
    except Exception as exc:  # noqa: BLE001 - Spark reads it instead
        log.debug("delta-rs read of %s failed: %s", path, exc)
        return None


def vacuum_candidates(path: str, retain_hours: float) -> Optional[int]:
    """How many files a VACUUM keeping ``retain_hours`` could delete: files the table no longer
    references, or never did, older than that (whole hours, rounded down, so never fewer than
    Spark would find). None when delta-rs cannot say."""
    try:
        table = _table(path)
        if table is None:
            return None
        return len(table.vacuum(retention_hours=int(math.floor(retain_hours)), dry_run=True,
                                enforce_retention_duration=False, full=True))
    except Exception as exc:  # noqa: BLE001 - Spark decides instead
        log.debug("delta-rs vacuum dry run of %s failed: %s", path, exc)
        return None


def most_files_in_a_partition(path: str) -> Optional[int]:
    """The largest number of data files any partition of the table has (0 when empty): with
    at most one everywhere, OPTIMIZE has nothing to bin-pack. None when delta-rs cannot say."""
    try:
        table = _table(path)
        if table is None:
            return None
        adds = table.get_add_actions(flatten=True).to_pylist()
        columns = [c for c in (adds[0] if adds else {}) if c.startswith("partition.")]
        per_partition = Counter(tuple(a[c] for c in columns) for a in adds)
        return max(per_partition.values(), default=0)
    except Exception as exc:  # noqa: BLE001 - Spark decides instead
        log.debug("delta-rs file count of %s failed: %s", path, exc)
        return None
