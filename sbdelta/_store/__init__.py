"""sbdelta's storage seam: the only code that touches Delta tables.

Code above ``_store`` imports from here, never from the modules inside: the tables and their
columns (:mod:`.layout`, :mod:`.schema`), the lock room (:mod:`.locks`), the settle path
(:mod:`.settle`) and :class:`MessageStore`, which holds an entity's tables and hands every
verb on to the module that owns it.
"""

from .codec import inbox_rows
from .delta import (DEFAULT_RETRY, RetryPolicy, checkpoint, latest_version, optimize, retry,
                    retry_policy, storage_errors, vacuum)
from .literals import local_path, sql_literal
from .engines import ENGINES, Engine, resolve_engine
from .faults import refused, storage_fault, storage_refusal
from .expiry import DEFAULT_BATCH as DEFAULT_SWEEP_BATCH
from .layout import (ACTIVE, CANCELLED, COPY_SHIFT, DEADLETTERING, DEFERRED, INBOX_COLUMNS,
                     INBOX_NAMES,
                     MAX_HOPS, MAX_ROWS_PER_PARTITION_PER_COMMIT, MSG, OPERATION_BOUND, PID_SHIFT, PING,
                     PING_CONTENT_TYPE, SCHEDULED, key_partition, msg_key, partition_of,
                     sequence_number)
from . import forward
from .forward import Destination
from .locks import DLQ_POLICY, Policy, seq_of_token
from .messages import Counts, MessageStore
from .schema import ddl
from .sessions import SessionHold
from .syphon import Moved as SyphonMoved, Progress as SyphonProgress, Refusal as SyphonRefusal
from .syphon import Hold as SyphonHold, Target as SyphonTarget
from .syphon import move_backlog
from .settle import Disposition, Locked, Settlement

__all__ = [
    # tables and rows
    "MessageStore", "Counts", "Destination", "forward", "INBOX_COLUMNS", "INBOX_NAMES", "MAX_ROWS_PER_PARTITION_PER_COMMIT",
    "MAX_HOPS",
    "ACTIVE", "CANCELLED", "DEADLETTERING", "DEFERRED", "SCHEDULED", "MSG", "PING",
    "PING_CONTENT_TYPE", "PID_SHIFT", "COPY_SHIFT", "msg_key", "partition_of", "sequence_number",
    "key_partition",
    "OPERATION_BOUND", "ddl", "inbox_rows", "sql_literal", "local_path",
    # locks and settlement
    "Policy", "DLQ_POLICY", "seq_of_token", "Disposition", "Locked", "Settlement", "SessionHold",
    # commits
    "latest_version", "retry", "checkpoint", "optimize", "vacuum", "refused", "storage_refusal",
    "storage_fault", "storage_errors",
    "RetryPolicy", "DEFAULT_RETRY", "retry_policy",
    # engines
    "ENGINES", "Engine", "resolve_engine",
    # maintenance
    "DEFAULT_SWEEP_BATCH",
    # the syphon of paired namespaces
    "move_backlog", "SyphonHold", "SyphonMoved", "SyphonProgress", "SyphonRefusal", "SyphonTarget",
]
