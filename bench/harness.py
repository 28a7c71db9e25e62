"""The harness: sizes per mode, repetitions, medians, ratios, the table, the JSON and the plot.

Every figure is the median of ``reps`` repetitions measured in this process run, and every
sbdelta figure is measured next to its baseline in the same run (the two alternate within a
repetition, so drift on a shared machine hits both). ``ratio`` is always sbdelta / baseline of
the figure shown; ``slower`` says how many times slower sbdelta is (>1 = slower), whatever the
unit, so the worst ratios can be ranked.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .measure import MODES, ROOT, Row, Timer

RESULTS = ROOT / "bench" / "results"
WORKLOADS = ("send", "receive", "complete", "backlog", "latency", "maintenance", "drain",
             "contention", "memory", "jobs", "topics", "paired", "sessions")


def _command_output(*args: str) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (done.stdout + done.stderr).strip()


def machine_info(spark) -> dict:
    from importlib import metadata

    mem = ""
    try:
        with open("/proc/meminfo") as handle:
            mem = next(line for line in handle if line.startswith("MemTotal")).split()[1]
        mem_gb = round(int(mem) / (1 << 20), 1)
    except (OSError, StopIteration):
        mem_gb = None
    cpu = ""
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle
                        if line.startswith("model name")), "")
    except OSError:
        pass
    rabbit = _command_output("dpkg-query", "-W", "-f=${Version}", "rabbitmq-server")
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu,
        "ram_gb": mem_gb,
        "os": platform.platform(),
        "load_average_at_start": list(os.getloadavg()),
        "python": platform.python_version(),
        "spark": spark.version,
        "pyspark": metadata.version("pyspark"),
        "delta_spark": metadata.version("delta-spark"),
        "java": _command_output("java", "-version").splitlines()[0:1],
        "spark_master": spark.sparkContext.master,
        "driver_memory": spark.conf.get("spark.driver.memory", "default"),
        "rabbitmq_server": rabbit if rabbit and "no packages" not in rabbit else None,
        "pika": _version_or_none("pika"),
    }


def _version_or_none(name: str) -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# -- output ------------------------------------------------------------------------------------
def _fmt(value: Optional[float]) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def table(rows: Sequence[Row]) -> str:
    head = ("workload", "case", "unit", "sbdelta", "baseline", "sbdelta/base", "x slower",
            "baseline is")
    lines = [head]
    for r in rows:
        base = _fmt(r.baseline) if r.baseline is not None else (r.baseline_note or "-")
        lines.append((r.workload, r.case, r.unit, _fmt(r.sbdelta), base, _fmt(r.ratio),
                      _fmt(r.slower), r.baseline_name))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    out = []
    for n, line in enumerate(lines):
        out.append(" | ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip())
        if n == 0:
            out.append("-|-".join("-" * w for w in widths))
    return "\n".join(out)


def worst(rows: Sequence[Row], k: int = 3) -> List[Row]:
    rated = [r for r in rows if r.slower is not None and r.workload != "backlog"]
    return sorted(rated, key=lambda r: r.slower, reverse=True)[:k]


def rows_of(doc: dict) -> List[Row]:
    """The rows of a result document, in workload order."""
    return [Row(**{k: v for k, v in r.items() if k not in ("ratio", "slower")})
            for name in WORKLOADS for r in doc["workloads"].get(name, {}).get("rows", [])]


def plot(rows: Sequence[Row], path: Path, title: str) -> None:
    """Throughput against batch size for send, receive and complete (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("send", "send"), ("receive", "receive (PeekLock)"), ("complete", "complete"))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    for ax, (workload, label) in zip(axes, panels):
        series: Dict[str, List[Tuple[int, float]]] = {}
        for r in rows:
            if r.workload != workload or r.unit != "msgs/s" or "batch" not in r.params:
                continue
            kind = r.params.get("series", r.case.split(" ")[0])
            series.setdefault(f"sbdelta {kind}", []).append((r.params["batch"], r.sbdelta))
            if r.baseline is not None:
                series.setdefault(f"{r.baseline_name}, next to {kind}", []).append(
                    (r.params["batch"], r.baseline))
        for name, points in sorted(series.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points],
                    marker="o", linestyle="--" if not name.startswith("sbdelta") else "-",
                    label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("messages per call (batch size)")
        ax.set_ylabel("messages / s")
        ax.set_title(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- running -----------------------------------------------------------------------------------
def run(mode: str = "quick", *, out_dir: Optional[Path] = None, only: Sequence[str] = (),
        spark=None, rabbitmq: bool = True, work_dir: Optional[Path] = None,
        echo=print, contention_batch: Optional[int] = None,
        contention_prefetch: Optional[int] = None) -> dict:
    """Run the workloads of ``mode``; returns the result document (also written as JSON).
    ``contention_batch``: the contention workers' batch (and RabbitMQ's prefetch) instead of
    the mode's; 1 makes every call a single-message one (issue 16's contention target).
    ``contention_prefetch``: the sbdelta receivers' ``prefetch_count`` and RabbitMQ's prefetch
    (after ``contention_batch``, which sets RabbitMQ's prefetch too)."""
    from . import workloads
    from .rabbit import RabbitUnavailable, rabbit_server

    if mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
    sizes = MODES[mode]
    if contention_batch is not None:
        sizes = dataclasses.replace(sizes, contention_batch=contention_batch,
                                    rabbit_prefetch=contention_batch)
    if contention_prefetch is not None:
        sizes = dataclasses.replace(sizes, contention_prefetch=contention_prefetch,
                                    rabbit_prefetch=max(1, contention_prefetch))
    selected = list(only) or [w for w in WORKLOADS if w not in sizes.skip]
    unknown = sorted(set(selected) - set(WORKLOADS))
    if unknown:
        raise ValueError(f"unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}")
    out_dir = Path(out_dir or RESULTS)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    own_work = work_dir is None
    work = Path(work_dir or tempfile.mkdtemp(prefix=f"sbdelta-bench-{mode}-"))
    started = time.perf_counter()

    if spark is None:
        from sbdelta._spark import get_spark

        spark = get_spark(conf={"spark.app.name": f"sbdelta-bench-{mode}"})
    doc = {
        "mode": mode,
        "started_utc": stamp,
        "command": " ".join(["bash bench/run", "--mode", mode]
                            + (["--only", ",".join(only)] if only else [])),
        "machine": machine_info(spark),
        "parameters": asdict(sizes),
        "workloads": {},
    }
    rows: List[Row] = []
    timings: Dict[str, float] = {}
    try:
        with rabbit_server(enabled=rabbitmq and any(
                w in selected for w in ("drain", "contention", "memory")), echo=echo) as rabbit:
            bench = workloads.Bench(spark, work, sizes, rabbit, echo)
            for name in WORKLOADS:
                if name not in selected:
                    continue
                echo(f"[bench] {name} ...")
                with Timer() as t:
                    got = bench.run(name)
                timings[name] = round(t.seconds, 1)
                echo(f"[bench] {name}: {t.seconds:.0f} s")
                rows += got
                doc["workloads"][name] = {"run_utc": stamp, "seconds": timings[name],
                                          "rows": [r.to_json() for r in got]}
            doc["rabbitmq"] = rabbit.status if isinstance(rabbit, RabbitUnavailable) \
                else {"available": True, "version": rabbit.version}
    finally:
        if own_work:
            shutil.rmtree(work, ignore_errors=True)
    doc["seconds_total"] = round(time.perf_counter() - started, 1)

    latest = out_dir / f"latest-{mode}.json"
    if len(selected) < len(WORKLOADS) and latest.exists():
        # resume (--only) or skipped workloads: keep the others from the last run (each keeps
        # its own run_utc)
        previous = json.loads(latest.read_text())
        for name, value in previous.get("workloads", {}).items():
            doc["workloads"].setdefault(name, value)
    all_rows = rows_of(doc)
    doc["worst_ratios"] = [
        {"workload": r.workload, "case": r.case, "slower": r.slower, "ratio": r.ratio,
         "baseline": r.baseline_name} for r in worst(all_rows)]
    doc["table"] = table(all_rows)
    png = out_dir / f"{mode}-{stamp}.png"
    plot(all_rows, png, f"sbdelta vs baselines, {mode} mode, {doc['machine']['cpu_count']} "
                        f"cores ({stamp})")
    shutil.copyfile(png, out_dir / f"latest-{mode}.png")
    doc["plot"] = str(out_dir / f"latest-{mode}.png")
    text = json.dumps(doc, indent=2, default=str)
    (out_dir / f"{mode}-{stamp}.json").write_text(text)
    latest.write_text(text)
    echo("")
    echo(f"sbdelta benchmarks, mode {mode}, {doc['machine']['cpu_count']} cores, "
         f"{doc['machine']['ram_gb']} GB RAM, Spark {doc['machine']['spark']}, "
         f"delta-spark {doc['machine']['delta_spark']}; medians of {sizes.reps} repetitions "
         f"(latency: {sizes.latency_reps}); ran in {doc['seconds_total']:.0f} s")
    echo(doc["table"])
    echo("")
    echo("worst sbdelta/baseline ratios (x slower): " + "; ".join(
        f"{w['workload']} {w['case']} vs {w['baseline']}: {w['slower']:.1f}x"
        for w in doc["worst_ratios"]))
    echo(f"JSON: {out_dir / f'{mode}-{stamp}.json'} (and {latest.name}); plot: {png}")
    return doc


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--mode", choices=sorted(MODES), default="quick")
    parser.add_argument("--only", default="",
                        help=f"comma-separated subset of: {', '.join(WORKLOADS)}")
    parser.add_argument("--out", default=str(RESULTS), help="results folder")
    parser.add_argument("--no-rabbitmq", action="store_true",
                        help="skip the RabbitMQ baselines (reported as not available)")
    parser.add_argument("--work-dir", default=None,
                        help="where the Delta tables go (default: a temporary folder, removed)")
    parser.add_argument("--contention-batch", type=int, default=None,
                        help="messages per receive, send and complete of the contention "
                             "workers (and RabbitMQ's prefetch); default: the mode's")
    parser.add_argument("--contention-prefetch", type=int, default=None,
                        help="prefetch_count of the contention receivers, and RabbitMQ's "
                             "prefetch (default: none, RabbitMQ's is the batch)")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw latest-<mode>.png from latest-<mode>.json (no Spark)")
    args = parser.parse_args(list(argv))
    if args.contention_batch is not None and args.contention_batch < 1:
        parser.error(f"--contention-batch must be at least 1, got {args.contention_batch}")
    if args.contention_prefetch is not None and args.contention_prefetch < 0:
        parser.error(f"--contention-prefetch must be at least 0, got {args.contention_prefetch}")
    if args.plot_only:
        doc = json.loads((Path(args.out) / f"latest-{args.mode}.json").read_text())
        plot(rows_of(doc), Path(args.out) / f"latest-{args.mode}.png",
             f"sbdelta vs baselines, {args.mode} mode, {doc['machine']['cpu_count']} cores "
             f"({doc['started_utc']})")
        return 0
    only = [w.strip() for w in args.only.split(",") if w.strip()]
    run(args.mode, out_dir=Path(args.out), only=only, rabbitmq=not args.no_rabbitmq,
        work_dir=Path(args.work_dir) if args.work_dir else None,
        echo=lambda *a: print(*a, flush=True), contention_batch=args.contention_batch,
        contention_prefetch=args.contention_prefetch)
    return 0
