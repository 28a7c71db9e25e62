"""The batch jobs: the expiry sweep, compaction, idle-entity deletion, forwarding catch-up and
the syphon, with their flags, settings (``conf/maintenance.json``) and exit codes.

Each runs as ``python -m jobs.<name>`` or ``spark-submit jobs/<name>.py`` from a checkout, as the
console script ``sbdelta-<name>`` once installed, and as a Databricks wheel task of the bundle
(``databricks.yml``).
"""
