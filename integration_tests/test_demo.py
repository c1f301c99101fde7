"""The README's demo (``bash scripts/demo.sh``, i.e. ``python -m source_framework.demo.walkthrough``)
as a newcomer runs it: two syncs as real processes, then the tables read by three readers."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from integration_tests.conftest import ROOT

pytestmark = pytest.mark.slow  # two real syncs and a Spark application


def test_the_demo_runs_two_syncs_and_three_readers_see_the_same_rows(tmp_path):
    done = subprocess.run([sys.executable, "-m", "source_framework.demo.walkthrough", "--records", "2000",
                           "--warehouse", str(tmp_path / "warehouse"), "--workdir", str(tmp_path / "run")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "== full sync" in out and "== incremental sync" in out and "main job finished" in out, out
    assert "log4j" not in out and "WARN" not in out, "Spark's banner and logs stay out of the demo's output"
    rows = re.findall(r"^   (\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)  (append|overwrite|append_dedup)$", out, re.MULTILINE)
    assert len(rows) >= 4, out
    for stream, by_rs, by_polars, by_spark, ids, mode in rows:
        assert by_rs == by_polars == by_spark, f"{stream}: the readers disagree\n{out}"
        if mode == "overwrite":
            assert by_rs == ids, f"{stream}: an overwrite table holds one row per record\n{out}"
        else:
            assert int(by_rs) >= int(ids) > 0, f"{stream}\n{out}"
    assert any(int(r[1]) > int(r[4]) for r in rows if r[5] == "append"), "the incremental sync appended updates"
    assert "rows minus distinct ids are those updates" in out
