"""Every Delta table sbdelta writes, in one place: columns, partitioning, table properties.

Registry (``<root>/_sbdelta/registry``), one row per entity, unpartitioned (it is small and
written rarely; every write is one MERGE or DELETE whose condition carries its precondition):

    key         STRING     case-folded full path: ``orders``, ``events``,
                           ``events:subscriptions:all``, ``events:subscriptions:all:rules:$default``
                           (``:`` is not allowed in names, so a key's children are ``<key>:%``)
    kind        STRING     queue | topic | subscription | rule
    name        STRING     the name as the user wrote it (queue/topic path, subscription or rule name)
    parent      STRING     key of the topic (subscriptions) or subscription (rules), else NULL
    location    STRING     folder of the entity's tables relative to the root, NULL for rules
    properties  STRING     JSON of the entity's properties (``to_dict()`` of the *Properties class)
    created_at  TIMESTAMP  UTC
    updated_at  TIMESTAMP  UTC
"""

REGISTRY_COLUMNS = (
    ("key", "STRING"),
    ("kind", "STRING"),
    ("name", "STRING"),
    ("parent", "STRING"),
    ("location", "STRING"),
    ("properties", "STRING"),
    ("created_at", "TIMESTAMP"),
    ("updated_at", "TIMESTAMP"),
)

# Every table sbdelta creates must stay writable by a second Delta engine, delta-rs (the
# ``deltalake`` package): it refuses tables with row tracking (which brings domain metadata),
# and its UPDATE, DELETE and MERGE write no deletion vectors. Stating these properties (rather
# than leaving them to session defaults, e.g. on Databricks) keeps the features off whatever
# the cluster's defaults say.
PORTABLE_PROPERTIES = {
    "delta.enableDeletionVectors": "false",
    "delta.enableRowTracking": "false",
}
#: Table features that make delta-rs 1.6 refuse to write a table (checked when an entity is
#: opened; only the inbox of sbdelta's first layout has them).
FOREIGN_FEATURES = ("rowTracking", "domainMetadata")

# Commits to the registry are rare; checkpoints keep its log replay short.
REGISTRY_PROPERTIES = {
    "delta.checkpointInterval": "10",
    **PORTABLE_PROPERTIES,
}


def ddl(columns) -> str:
    """``name TYPE, ...`` for CREATE TABLE and createDataFrame schemas."""
    return ", ".join(f"{name} {kind}" for name, kind in columns)


#: How a SQL type of sbdelta's schemas is held in Arrow (delta-rs's rows and schemas).
_ARROW_TYPES = {"STRING": "string", "BIGINT": "int64", "INT": "int32", "BOOLEAN": "bool_",
                "BINARY": "binary"}


def arrow_type(kind: str):
    """The Arrow type of a column of SQL type ``kind`` (a TIMESTAMP: UTC microseconds, the
    type Delta's ``timestamp`` is)."""
    import pyarrow as pa

    if kind == "TIMESTAMP":
        return pa.timestamp("us", tz="UTC")
    return getattr(pa, _ARROW_TYPES[kind])()


def tblproperties(props) -> str:
    return ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
