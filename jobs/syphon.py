"""spark-submit entry point of :mod:`sbdelta.jobs.syphon` (the job, its flags and its report are
there; ``sbdelta-syphon`` is the same job as a console script and a Databricks
wheel task).

    python -m jobs.syphon --help
    spark-submit $(sbdelta spark-submit-args) jobs/syphon.py --namespace DIR
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # spark-submit: repo not on path

from sbdelta.jobs.common import exit_with  # noqa: E402
from sbdelta.jobs.syphon import main  # noqa: E402

if __name__ == "__main__":
    exit_with(main())
