"""The benchmark's ``dlt-delta`` case: dlt loading the same orders into a Delta table.

dlt runs in a virtual environment of its own, made on first use in ``bench/.dlt-venv`` from
PyPI (``DLT_REQUIREMENTS``), so its dependencies never change ours; ``bench/dlt_load.py`` is what
it runs. The orders' monthly windows come from our demo connector, so both read the same pages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import venv

from bench.cases import BenchEnv, Case, Measurement
from bench.memory import PeakMemory

DLT_REQUIREMENTS = ["dlt[deltalake,filesystem]==1.31.0", "orjson>=3.10"]
HERE = os.path.dirname(os.path.abspath(__file__))
DLT_VENV = os.path.join(HERE, ".dlt-venv")


def dlt_python() -> str:
    """The dlt environment's interpreter, installed (again, when ``DLT_REQUIREMENTS`` change)."""
    python = os.path.join(DLT_VENV, "bin", "python")
    marker = os.path.join(DLT_VENV, "requirements.txt")
    wanted = "\n".join(DLT_REQUIREMENTS)
    if os.path.exists(marker) and open(marker).read() == wanted:
        return python
    sys.stderr.write(f"[bench] installing {', '.join(DLT_REQUIREMENTS)} into {DLT_VENV} (once)\n")
    venv.create(DLT_VENV, with_pip=True, clear=True)
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *DLT_REQUIREMENTS], check=True)
    with open(marker, "w") as handle:
        handle.write(wanted)
    return python


def order_windows(config: dict) -> list[dict[str, str]]:
    """The orders stream's slices, as our sync reads them."""
    from airbyte_cdk.models import SyncMode

    from source_framework.demo import DemoSource

    (orders,) = [stream for stream in DemoSource().streams(config) if stream.name == "orders"]
    return [dict(window) for window in orders.stream_slices(sync_mode=SyncMode.incremental, cursor_field=["updatedAt"], stream_state={})]


class DltDeltaCase(Case):
    name = "dlt-delta"
    label = "(5) dlt filesystem destination, table_format delta (its own venv)"

    def run(self, env: BenchEnv) -> Measurement:
        if env.streams != ["orders"]:
            raise SystemExit("the dlt-delta case reads the orders stream only: run it with --streams orders")
        python = dlt_python()
        warehouse = env.new_warehouse(self.name)
        job_path, result_path = (os.path.join(env.workdir, f"{self.name}-{kind}.json") for kind in ("job", "result"))
        config = env.base_config
        with open(job_path, "w") as handle:
            json.dump({"api_url": config["api_url"], "api_key": config["api_key"], "page_size": config["page_size"],
                       "windows": order_windows(config), "warehouse": warehouse}, handle)
        started = time.perf_counter()
        process = subprocess.Popen([python, os.path.join(HERE, "dlt_load.py"), "--job", job_path, "--result", result_path],
                                   cwd=env.workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        with PeakMemory(process.pid) as peaks:
            _, stderr = process.communicate()
        process_seconds = time.perf_counter() - started
        if process.returncode != 0:
            raise RuntimeError(f"{self.name} failed ({process.returncode}):\n{stderr.decode(errors='replace')[-3000:]}")
        with open(result_path) as handle:
            result = json.load(handle)
        return Measurement(case=self.name, records=result["records"], seconds=result["seconds"],
                           process_seconds=process_seconds, python_peak_mb=peaks.python_mb)
