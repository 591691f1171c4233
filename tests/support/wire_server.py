"""The wire server as a child process (used by conftest.py's fixtures) (``python -m offsetlog serve``), for tests whose oracle
is a real Kafka client. Short timeouts everywhere, so the suite stays fast."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

#: settings every test server starts with: no initial rebalance delay, short sessions allowed
FAST = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=500"]


class Server:
    def __init__(self, directory: str, *, topics=("orders:4",), config=(), env=None) -> None:
        self.directory = directory
        self.env = env  #: the child's environment (None: this process's)
        self.topics = list(topics)
        self.config = FAST + list(config)
        self.proc: subprocess.Popen | None = None
        self.port = 0
        #: with ``listeners=...`` in ``config``: listener name -> its port (the first one's is
        #: ``port``); a restart keeps the ports
        self.ports: dict[str, int] = {}
        self.listeners = next((c.split("=", 1)[1] for c in self.config
                               if c.startswith("listeners=")), None)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "Server":
        cmd = [sys.executable, "-m", "offsetlog", "serve", self.directory]
        if self.listeners is None:
            cmd += ["--listen", f"127.0.0.1:{self.port}"]
        for t in self.topics:
            cmd += ["--topic", t]
        for c in self.config:
            if c.startswith("listeners=") and self.ports:  # a restart: the same ports
                c = "listeners=" + ",".join(
                    f"{item.split('://')[0]}://{item.split('://')[1].rsplit(':', 1)[0]}:"
                    f"{self.ports[item.split('://')[0].upper()]}"
                    for item in self.listeners.split(","))
            cmd += ["--config", c]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=self.env)
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if line.startswith("listening on ") and "://" in line:
                name = line.split()[2].split("://")[0]
                self.ports[name] = int(line.rsplit(":", 1)[1])
                if len(self.ports) == len(self.listeners.split(",")):
                    self.port = self.ports[self.listeners.split("://")[0].upper()]
                    break
            elif line.startswith("listening on "):
                self.port = int(line.rsplit(":", 1)[1])
                break
            if not line and self.proc.poll() is not None:
                break
        else:
            raise AssertionError("server did not start")
        if not self.port:
            raise AssertionError(f"server did not start: {line!r}")
        # keep draining stderr so the child never blocks on a full pipe
        import threading
        self.log: list[str] = []
        threading.Thread(target=lambda p=self.proc: self.log.extend(p.stderr), daemon=True
                         ).start()
        return self

    def stop(self, sig=signal.SIGTERM, timeout: float = 20) -> int:
        if self.proc is None:
            return 0
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self.proc = None
        return rc

    def kill9(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self) -> "Server":
        self.stop()
        return self.start()


def raw_socket(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


def wait_until(predicate, timeout: float = 20, interval: float = 0.05, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what or predicate}")
