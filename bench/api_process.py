"""The demo API in its own process, so serving pages never shares a GIL with what is measured.

Usage::

    with DemoApiProcess(records=200_000, api_key="bench-key") as api:
        api.url        # http://127.0.0.1:<free port>
"""

from __future__ import annotations

import os
import subprocess
import sys

from bench.cpu import process_cpu_seconds

READY_PREFIX = "demo API listening on "


class DemoApiProcess:
    def __init__(
        self, records: int, api_key: str, seed: int = 42, python: str = sys.executable, delay_ms: int = 0,
        cache_pages: bool = False,
    ) -> None:
        self.records, self.api_key, self.seed, self.python = records, api_key, seed, python
        self.delay_ms = delay_ms  # latency added to each data request (a slow API)
        self.cache_pages = cache_pages  # pages served from memory once seen (the warm-up pass sees them all)
        self.url = ""
        self._process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        return [self.python, "-m", "source_framework.demo.api", "--port", "0", "--records", str(self.records),
                "--seed", str(self.seed), "--api-key", self.api_key, "--delay-ms", str(self.delay_ms),
                *(["--cache-pages"] if self.cache_pages else [])]

    def start(self) -> DemoApiProcess:
        self._process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         text=True, env=_env())
        assert self._process.stderr is not None
        for line in self._process.stderr:  # the server announces its URL once, on stderr
            if line.startswith(READY_PREFIX):
                self.url = line[len(READY_PREFIX):].strip()
                break
        if not self.url:
            self.stop()
            raise RuntimeError("the demo API did not start")
        return self

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=10)
        if self._process is not None and self._process.stderr is not None:
            self._process.stderr.close()
        self._process = None

    def cpu_seconds(self) -> float | None:
        """CPU seconds the API process has used so far (None when it is not running)."""
        return process_cpu_seconds(self._process.pid) if self._process is not None else None

    def __enter__(self) -> DemoApiProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _env() -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env
