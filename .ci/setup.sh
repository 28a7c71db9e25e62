#!/usr/bin/env bash
# Set-up shared by the README's two commands: a .venv with the pinned pair, then the Delta
# jars and the multi-process-safe log store in the cache (fetched once, offline afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[test,bench]"
.venv/bin/sbdelta setup >/dev/null
