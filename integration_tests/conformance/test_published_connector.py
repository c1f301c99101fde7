"""A connector other people wrote, as published on PyPI: airbyte-source-hardcoded-records
(Airbyte's own, for performance tests; it needs no network), run unchanged. Its three
full-refresh streams have no primary key and yield the very same dict object ``count`` times,
with nested objects, nulls and zone offsets in the records.

Under our ``read`` its records must be airbyte-cdk's own ``read``'s: printed with
``--destination stdout``, and in the Spark tables, one row per record (identical rows kept
apart), a second sync replacing the tables; the final STATEs must be airbyte-cdk's.
"""

from __future__ import annotations

import logging

import conformance_harness as harness
from airbyte_cdk.models import AirbyteMessageSerializer, ConfiguredAirbyteCatalogSerializer
from airbyte_cdk.models.airbyte_protocol_serializers import AirbyteStreamSerializer
from airbyte_cdk.test.entrypoint_wrapper import read as entrypoint_read
from source_hardcoded_records import SourceHardcodedRecords

from source_framework.destinations.spark.destination import SparkDestination
from source_framework.testing import read, table_checks

CONFIG = {"count": 1500}


def full_refresh_catalog():
    streams = SourceHardcodedRecords().discover(logging.getLogger("conformance"), CONFIG).streams
    return {"streams": [{"stream": AirbyteStreamSerializer.dump(stream), "sync_mode": "full_refresh",
                         "destination_sync_mode": "overwrite"} for stream in streams]}


def cdk_read(catalog):
    output = entrypoint_read(SourceHardcodedRecords(), dict(CONFIG), ConfiguredAirbyteCatalogSerializer.load(catalog))
    messages = [AirbyteMessageSerializer.dump(m) for m in output.get_message_iterator()]
    return harness.Run("airbyte-cdk read (source-hardcoded-records)", harness._json_roundtrip(messages))


def ours_read(catalog, config, args=()):
    output = read(SourceHardcodedRecords(), config, catalog, args=list(args))
    return harness.Run("source_framework read (source-hardcoded-records)", output.messages, returncode=output.returncode)


def test_a_published_connector_lands_exactly_the_records_of_airbyte_cdk(tmp_path, spark):
    catalog = full_refresh_catalog()
    assert [entry["stream"]["name"] for entry in catalog["streams"]] == ["products", "customers", "dummy_fields"]
    cdk = cdk_read(catalog)
    assert cdk.ok() and len(cdk.records()) == 3 * CONFIG["count"], cdk.describe()

    stdout = ours_read(catalog, CONFIG, ["--destination", "stdout"])
    assert stdout.ok(), stdout.describe()
    assert sorted(harness.stream_ends(stdout)) == sorted(harness.stream_ends(cdk))
    problems = harness.multiset_diff(harness.record_multisets(cdk, catalog), harness.record_multisets(stdout, catalog))
    assert not problems, "RECORD messages of ours (--destination stdout) vs airbyte-cdk's:\n" + "\n".join(problems)

    warehouse = str(tmp_path / "warehouse")
    config = {**CONFIG, "destination": {"type": "spark", "warehouse": warehouse, "spark_master": "local[1]"}}
    destination = SparkDestination(warehouse, default_namespace=SourceHardcodedRecords().name)
    infos = harness.infos(catalog)
    for _ in range(2):  # the second sync replaces each table: still every record once
        ours = ours_read(catalog, config)
        assert ours.ok(), ours.describe()
        assert ours.final_states() == cdk.final_states()
        harness.check_tables_equal_records(table_checks.read_tables(spark, destination, infos), cdk, infos)
