"""What a user sees when the API keeps failing (issue 51, item 7): the demo API answers every
``/orders`` request with HTTP 500, and ``orders`` is read by 4 workers (one date window each).

Before, stderr held the same traceback once per worker (about 150 lines), and the summary said
``FAILED`` without a reason. Now stderr shows the traceback once, then counts the repeats, and
the summary names the error in one line, without the config's secret; stdout is unchanged:
protocol messages only, with the TRACE error.
"""

from __future__ import annotations

import json
import re
import threading

from integration_tests.conftest import API_KEY, catalog, config_for, run_main, write_json
from source_framework.demo.api import DemoApi


class Down(DemoApi):
    """The demo API whose ``/orders`` answers 500 to every request; the error body quotes the
    API key, as careless APIs do, so the summary's reason must mask it. Each answer waits until
    the 4 workers have all asked (or 3 s have passed): their retries run in step, so they run out
    together, however loaded the machine, and each worker's failure is there to be told."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.together = threading.Barrier(4)

    def respond(self, method, target, headers, body):
        if target.startswith("/orders"):
            try:
                self.together.wait(timeout=3)
            except threading.BrokenBarrierError:
                self.together.reset()
            return 500, {"error": f"database unavailable (key {API_KEY})"}, {}
        return super().respond(method, target, headers, body)


def test_a_persistent_500_prints_one_traceback_and_the_summary_says_why(tmp_path):
    with Down(records=300, api_key=API_KEY, seed=7).start() as api:
        config = write_json(tmp_path / "config.json", config_for(api, tmp_path / "warehouse", concurrency_level=4))
        cat = write_json(tmp_path / "catalog.json", catalog("orders"))
        run = run_main("read", "--config", config, "--catalog", cat, "--destination", "stdout")

    assert run.returncode != 0
    # stdout: protocol messages only, the stream's TRACE error among them, as before
    for line in run.stdout.splitlines():
        assert json.loads(line)["type"] in ("TRACE", "STATE", "LOG", "RECORD"), line
    errors = [m["trace"]["error"] for m in run.of_type("TRACE") if m["trace"]["type"] == "ERROR"]
    assert len(errors) == 1 and "500" in errors[0]["message"], errors
    assert "Traceback" in errors[0]["stack_trace"]

    # stderr: the 4 workers' identical failure shows one traceback, and says how often it happened
    assert run.stderr.count("Traceback (most recent call last)") == 1, run.stderr
    # each other worker's failure is a counted line (those still retrying when the process ends may not log)
    assert re.search(r"\(UserDefinedBackoffException: the same error [1-3] more times?; its traceback is above\)",
                     run.stderr), run.stderr
    assert len(run.stderr.splitlines()) < 80, run.stderr

    # the summary: the failed stream with its reason, short, one line, the secret masked
    summary = run.stderr[run.stderr.index("read finished in"):]
    assert "FAILED" in summary
    (reason,) = [line for line in summary.splitlines() if line.startswith("orders failed: ")]
    assert "500" in reason and len(reason) <= len("orders failed: ") + 100, reason
    assert API_KEY not in run.stderr
