"""The RabbitMQ baseline: Debian's rabbitmq-server started on loopback, driven with pika.

Durable queue, persistent messages (delivery_mode 2), publisher confirms, consumers with manual
acks and a prefetch. The drain publishes with confirms handled asynchronously (a window of
unconfirmed messages, RabbitMQ's recommended way to publish fast with confirms); the contention
publisher waits for each confirm (BlockingConnection), batch after batch. The
server runs from a private folder (its own node name, port, Mnesia and log folders) and is
stopped at the end; an epmd it had to start is stopped too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional

QUEUE = "sbdelta-bench"


class RabbitUnavailable:
    available = False

    def __init__(self, reason: str) -> None:
        self.reason = f"not available: {reason}"
        self.status = {"available": False, "reason": self.reason}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _epmd_running() -> bool:
    return subprocess.run(["epmd", "-names"], capture_output=True).returncode == 0


class RabbitServer:
    available = True
    reason = ""

    def __init__(self, folder: Path, echo: Callable) -> None:
        self.folder = folder
        # Debian's wrappers (/usr/sbin/rabbitmq-*) run the server as the rabbitmq user when
        # called by root; its folder must then belong to that user.
        libexec = Path("/usr/lib/rabbitmq/bin")
        if os.geteuid() != 0 and (libexec / "rabbitmq-server").exists():
            self.server_cmd = str(libexec / "rabbitmq-server")
            self.ctl_cmd = str(libexec / "rabbitmqctl")
        else:
            self.server_cmd, self.ctl_cmd = "rabbitmq-server", "rabbitmqctl"
        self.echo = echo
        self.port = _free_port()
        self.node = f"sbdbench{os.getpid()}@localhost"
        self.proc: Optional[subprocess.Popen] = None
        self.version = ""
        self._epmd_was_running = _epmd_running() if shutil.which("epmd") else True

    def _env(self) -> dict:
        return dict(os.environ, RABBITMQ_NODENAME=self.node,
                    RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODE_PORT=str(self.port),
                    RABBITMQ_DIST_PORT=str(_free_port()),
                    RABBITMQ_MNESIA_BASE=str(self.folder / "mnesia"),
                    RABBITMQ_LOG_BASE=str(self.folder / "log"),
                    RABBITMQ_ENABLED_PLUGINS_FILE=str(self.folder / "enabled_plugins"),
                    RABBITMQ_PID_FILE=str(self.folder / "rabbit.pid"))

    def ctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([self.ctl_cmd, "-n", self.node, *args], env=self._env(),
                              capture_output=True, text=True, timeout=timeout)

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "enabled_plugins").write_text("[].\n")
        if os.geteuid() == 0:
            import pwd

            try:
                user = pwd.getpwnam("rabbitmq")
            except KeyError:
                user = None
            if user is not None:
                os.chmod(self.folder, 0o755)
                for path in (self.folder, self.folder / "enabled_plugins"):
                    os.chown(path, user.pw_uid, user.pw_gid)
        log = open(self.folder / "server.out", "w")
        self.proc = subprocess.Popen([self.server_cmd], env=self._env(), stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 120
        while self.proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), timeout=1):
                break
            time.sleep(0.5)
        done = self.ctl("await_startup", "--timeout", "120", timeout=150)
        if done.returncode != 0 or self.proc.poll() is not None:
            tail = (self.folder / "server.out").read_text()[-2000:]
            self.stop()
            raise RuntimeError(f"rabbitmq-server did not start: {done.stderr[-500:]}\n{tail}")
        self.version = self.ctl("version").stdout.strip()
        self.echo(f"[bench] rabbitmq-server {self.version} on 127.0.0.1:{self.port}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.ctl("stop", timeout=120)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        if not self._epmd_was_running and shutil.which("epmd"):
            subprocess.run(["epmd", "-kill"], capture_output=True)

    def broker_rss_mb(self) -> float:
        from .measure import tree_rss

        return tree_rss(self.proc.pid) / (1 << 20) if self.proc else 0.0

    # -- workloads -----------------------------------------------------------------------------
    def drain(self, out: dict, d: int, bodies: List[bytes], prefetch: int) -> None:
        """Publish ``d`` messages with confirms, then consume and ack them all."""
        from .measure import PeakRss, Timer

        with fresh_queue(self.port) as ch:
            with PeakRss(self.proc.pid) as broker, PeakRss() as client:
                with Timer() as send:
                    publish_confirmed(self.port, bodies)
                with Timer() as drain:
                    got = consume(ch, d, prefetch)
            if got != d:
                raise RuntimeError(f"RabbitMQ drain: consumed {got} of {d}")
            ch.queue_delete(QUEUE)
        out["send"].append(send.seconds)
        out["drain"].append(drain.seconds)
        out["total"].append(send.seconds + drain.seconds)
        out["rss"].append(client.mb)
        out["broker_rss"].append(broker.mb)

    def contention(self, seconds: float, prefill: List[bytes], batch: int,
                   prefetch: int) -> dict:
        """1 publisher + 2 consumers (processes) for ``seconds``: acks per second in total."""
        with fresh_queue(self.port) as ch:
            publish(ch, prefill)
        import json
        import sys

        go = time.time() + 5
        root = str(Path(__file__).resolve().parents[1])
        procs = [subprocess.Popen(
            [sys.executable, "-m", "bench.rabbit", role, str(self.port), str(go), str(seconds),
             str(batch), str(prefetch)], cwd=root, stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=root))
            for role in ("publisher", "consumer", "consumer")]
        got = []
        for p in procs:
            out, _ = p.communicate(timeout=seconds + 300)
            if p.returncode != 0:
                raise RuntimeError(f"RabbitMQ contention worker failed ({p.returncode})")
            got.append(json.loads(out.strip().splitlines()[-1]))
        acked = sum(r["acked"] for r in got)
        return {"acked": acked, "published": sum(r["published"] for r in got),
                "seconds": seconds, "acked_per_second": acked / seconds}


def connect(port: int):
    import pika

    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=port, heartbeat=0, blocked_connection_timeout=300))


@contextlib.contextmanager
def fresh_queue(port: int):
    """A channel in confirm mode on the durable bench queue, emptied first."""
    conn = connect(port)
    try:
        ch = conn.channel()
        ch.queue_delete(QUEUE)
        ch.queue_declare(QUEUE, durable=True)
        ch.confirm_delivery()
        yield ch
    finally:
        conn.close()


def publish(ch, bodies: List[bytes]) -> None:
    import pika

    props = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent)
    for body in bodies:
        ch.basic_publish("", QUEUE, body, props)  # returns once the broker confirmed it


def publish_confirmed(port: int, bodies: List[bytes], window: int = 1000) -> None:
    """Publish every body, persistent, keeping up to ``window`` unconfirmed; returns once the
    broker confirmed them all (a nack fails the run)."""
    import collections

    import pika

    props = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent)
    pending: collections.deque = collections.deque()  # delivery tags, in publish order
    state = {"sent": 0, "nacked": 0, "error": None}

    def pump(ch) -> None:
        while state["sent"] < len(bodies) and len(pending) < window:
            ch.basic_publish("", QUEUE, bodies[state["sent"]], props)
            state["sent"] += 1
            pending.append(state["sent"])  # tags count from 1 on a fresh channel
        if state["sent"] == len(bodies) and not pending:
            ch.connection.close()

    def on_confirm(frame) -> None:
        method = frame.method
        if isinstance(method, pika.spec.Basic.Nack):
            state["nacked"] += 1
        if method.multiple:
            while pending and pending[0] <= method.delivery_tag:
                pending.popleft()
        elif method.delivery_tag in pending:
            pending.remove(method.delivery_tag)
        pump(channel[0])

    channel: list = []

    def on_channel(ch) -> None:
        channel.append(ch)
        ch.confirm_delivery(on_confirm)
        pump(ch)

    def on_error(_conn, error) -> None:
        state["error"] = error
        _conn.ioloop.stop()

    conn = pika.SelectConnection(
        pika.ConnectionParameters(host="127.0.0.1", port=port, heartbeat=0),
        on_open_callback=lambda c: c.channel(on_open_callback=on_channel),
        on_open_error_callback=on_error,
        on_close_callback=lambda c, _reason: c.ioloop.stop())
    conn.ioloop.start()
    if state["error"] is not None or state["nacked"] or pending or state["sent"] < len(bodies):
        raise RuntimeError(f"RabbitMQ publish: {state['sent']} sent, {len(pending)} "
                           f"unconfirmed, {state['nacked']} nacked ({state['error']})")


def consume(ch, n: int, prefetch: int) -> int:
    ch.basic_qos(prefetch_count=prefetch)
    got = 0
    for method, _props, _body in ch.consume(QUEUE, inactivity_timeout=30):
        if method is None:
            break
        ch.basic_ack(method.delivery_tag)
        got += 1
        if got >= n:
            break
    ch.cancel()
    return got


def _contention_worker(role: str, port: int, go: float, seconds: float, batch: int,
                       prefetch: int) -> dict:
    """One process of the contention baseline: publish batches, or consume and ack."""
    import pika

    from .measure import body_bytes

    conn = connect(port)
    ch = conn.channel()
    published = acked = 0
    while time.time() < go:
        time.sleep(0.01)
    deadline = go + seconds
    if role == "publisher":
        ch.confirm_delivery()
        bodies = [body_bytes(i, 1024) for i in range(batch)]
        while time.time() < deadline:
            publish(ch, bodies)
            published += batch
    else:
        ch.basic_qos(prefetch_count=prefetch)
        for method, _props, _body in ch.consume(QUEUE, inactivity_timeout=1):
            if time.time() >= deadline:
                break
            if method is None:
                continue
            ch.basic_ack(method.delivery_tag)
            acked += 1
        with contextlib.suppress(pika.exceptions.AMQPError):
            ch.cancel()
    conn.close()
    return {"role": role, "published": published, "acked": acked}


@contextlib.contextmanager
def rabbit_server(*, enabled: bool, echo: Callable) -> Iterator[object]:
    """A started RabbitServer, or a RabbitUnavailable saying why there is none."""
    if not enabled:
        yield RabbitUnavailable("skipped (--no-rabbitmq or no workload needs it)")
        return
    if not shutil.which("rabbitmq-server"):
        yield RabbitUnavailable("rabbitmq-server not installed")
        return
    try:
        import pika  # noqa: F401
    except ImportError:
        yield RabbitUnavailable("the pika client is not installed (pip install -e '.[bench]')")
        return
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="sbdelta-bench-rabbitmq-"))
    server = RabbitServer(folder, echo)
    try:
        server.start()
    except Exception as exc:  # noqa: BLE001 - reported as a missing baseline, not a crash
        echo(f"[bench] RabbitMQ baseline not available: {exc}")
        yield RabbitUnavailable(f"rabbitmq-server failed to start: {str(exc)[:300]}")
        shutil.rmtree(folder, ignore_errors=True)
        return
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    import json
    import sys

    role, port, go, seconds, batch, prefetch = sys.argv[1:7]
    print(json.dumps(_contention_worker(role, int(port), float(go), float(seconds), int(batch),
                                        int(prefetch))))
