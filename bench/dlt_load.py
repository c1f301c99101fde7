"""dlt's load of the demo API's orders into a Delta table, for the benchmark's ``dlt-delta`` case.

Runs in a virtual environment of its own (``bench/dlt_case.py`` makes it), so dlt's dependencies
never meet ours; it imports nothing of this repository. dlt's ``filesystem`` destination with
``table_format="delta"``, append, the same pages our sync reads (the monthly windows the parent
computed from the demo connector), each page's records handed to dlt as one list.

    python bench/dlt_load.py --job job.json --result result.json

``job.json``: ``{"api_url", "api_key", "page_size", "windows": [{"start", "end"}], "warehouse"}``.
``result.json``: ``{"records", "seconds"}``, ``seconds`` from the first request to the loaded table.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/dlt_load.py")
    parser.add_argument("--job", required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args()
    with open(args.job) as handle:
        job = json.load(handle)

    import dlt
    import orjson
    import requests
    from deltalake import DeltaTable

    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {job['api_key']}"

    @dlt.resource(name="orders", write_disposition="append", table_format="delta")
    def orders() -> Iterator[list[dict[str, Any]]]:
        for window in job["windows"]:
            page = 1
            while True:
                params = {"start": window["start"], "end": window["end"], "per_page": job["page_size"], "page": page}
                response = session.get(f"{job['api_url'].rstrip('/')}/orders", params=params, timeout=60)
                response.raise_for_status()
                body = orjson.loads(response.content)
                yield body["data"]
                if body["page"] >= body["total_pages"]:
                    break
                page += 1

    pipeline = dlt.pipeline(pipeline_name="bench_dlt", pipelines_dir=f"{job['warehouse']}/.dlt",
                            destination=dlt.destinations.filesystem(bucket_url=job["warehouse"]), dataset_name="demo")
    started = time.perf_counter()
    pipeline.run(orders())
    seconds = time.perf_counter() - started
    records = DeltaTable(f"{job['warehouse']}/demo/orders").to_pyarrow_dataset().count_rows()
    with open(args.result, "w") as handle:
        json.dump({"records": records, "seconds": seconds}, handle)


if __name__ == "__main__":
    main()
