"""Three processes publishing the same log version at once: only one may be told it won.

This is the failure that loses commits with Delta's LocalLogStore across processes (delta
issue #683): each writer checks "version N is free" and then renames onto it, and rename(2)
replaces the other writer's commit. The control case shows the harness catches that; the
sbdelta case shows the link(2) log store never lets two processes both win a version.

The control (the same race through Delta's LocalLogStore) is timing-dependent on a loaded
2-core machine, so it is not a CI test; run it by hand:

    .venv/bin/python -m tests.multiprocess.test_logstore_race

It prints how many versions two processes both "won" (one commit lost each time). Seen on
this machine: 4 of 150 with LocalLogStore in one run, 0 in the next; 0 with sbdelta's store.
"""

import json
import os
import time
from pathlib import Path

import pytest

from sbdelta._spark import LOGSTORE_CLASS
from tests.conftest import run_python

ROUNDS = 150


def _race(tmp_path: Path, cls: str):
    log_dir, ready = tmp_path / "_delta_log", tmp_path / "ready"
    log_dir.mkdir()
    ready.mkdir()
    procs = [run_python("-m", "tests.workers.logstore_race", str(log_dir), str(w), cls,
                        str(ROUNDS), str(ready)) for w in range(3)]
    deadline = time.time() + 300
    while len(list(ready.glob("ready-*"))) < 3:
        assert time.time() < deadline, "workers did not start"
        assert all(p.poll() is None for p in procs), procs[0].stderr.read()[-2000:]
        time.sleep(0.05)
    (ready / "go.tmp").write_text(str(time.time() + 1.0))
    os.replace(ready / "go.tmp", ready / "go")
    wins = {}
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        report = json.loads(out.strip().splitlines()[-1])
        for v in report["won"]:
            wins.setdefault(v, []).append(report["worker"])
    stored = {v: json.loads((log_dir / f"{v:020d}.json").read_text())["worker"]
              for v in range(ROUNDS)}
    return wins, stored


@pytest.mark.multiprocess
def test_link_log_store_has_exactly_one_winner_per_version(tmp_path):
    wins, stored = _race(tmp_path, LOGSTORE_CLASS)
    assert sorted(wins) == list(range(ROUNDS))
    for v in range(ROUNDS):
        assert wins[v] == [stored[v]], f"version {v}: told {wins[v]} they won, file has {stored[v]}"



if __name__ == "__main__":
    import tempfile

    for cls in ("io.delta.storage.LocalLogStore", LOGSTORE_CLASS):
        with tempfile.TemporaryDirectory() as tmp:
            wins, _ = _race(Path(tmp), cls)
            lost = sum(len(w) - 1 for w in wins.values())
            print(f"{cls}: {lost} of {ROUNDS} versions had more than one 'winner' (lost commits)")
