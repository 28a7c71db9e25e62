"""spark-submit entry point of :mod:`sbdelta.jobs.expire_messages` (the job, its flags and its report are
there; ``sbdelta-expire-messages`` is the same job as a console script and a Databricks
wheel task).

    python -m jobs.expire_messages --help
    spark-submit $(sbdelta spark-submit-args) jobs/expire_messages.py --namespace DIR
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # spark-submit: repo not on path

from sbdelta.jobs.common import exit_with  # noqa: E402
from sbdelta.jobs.expire_messages import main  # noqa: E402

if __name__ == "__main__":
    exit_with(main())
