#!/usr/bin/env bash
# Set-up shared by the README's two commands: a .venv with the pinned pair, then the Delta
# jars and the multi-process-safe log store in the cache (fetched once, offline afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[test,bench,docs]"
.venv/bin/sbdelta setup --connect >/dev/null
# The hung-commit test (tests/store/test_storage_faults.py) holds a commit's system call with
# strace; install it where it is missing and apt can (otherwise that test says it is skipped).
if ! command -v strace >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
    && [ "$(id -u)" = 0 ]; then
  apt-get install -y -qq --no-install-recommends strace >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 \
         && apt-get install -y -qq --no-install-recommends strace >/dev/null 2>&1; } \
    || echo "setup: strace could not be installed; the hung-commit test will be skipped" >&2
fi
