"""The ``python_values`` style with ``Decimal`` prices: airbyte-cdk's serializer cannot write a
``Decimal`` and its sync fails on that stream; ours fails the same stream, with the field named,
and never stores a null price. The other stream lands as airbyte-cdk prints it, either way."""

from __future__ import annotations

import conformance_harness as harness


def test_a_decimal_fails_its_stream_under_both_entrypoints_and_the_other_lands(spark, tmp_path):
    api = harness.start_api()
    try:
        config = {**harness.source_config(api), "decimal_prices": True}
        catalog = harness.configured_catalog("python_values", config)
        cdk = harness.cdk_read("python_values", config, catalog)
        warehouse = str(tmp_path / "warehouse")
        ours = harness.ours_read("python_values", {**harness.ours_config(api, warehouse), "decimal_prices": True}, catalog)
    finally:
        api.stop()
    assert any("serialized to JSON" in error for error in cdk.errors()), cdk.describe()
    assert not cdk.records("products"), "airbyte-cdk printed a record it cannot serialize"
    assert ours.returncode != 0
    (error,) = [e for e in ours.errors() if "products" in e or "price" in e]
    assert "field 'price'" in error and "Decimal" in error, ours.describe()
    ended = dict(harness.stream_ends(ours))
    assert ended == {"users": "COMPLETE", "products": "INCOMPLETE"}, ended
    tables = harness.read_tables(spark, warehouse, "python_values", {"streams": [
        s for s in catalog["streams"] if s["stream"]["name"] == "users"]})
    harness.check_tables_equal_records(tables, cdk, harness.infos({"streams": [
        s for s in catalog["streams"] if s["stream"]["name"] == "users"]}))
