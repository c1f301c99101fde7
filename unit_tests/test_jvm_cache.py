"""The Spark class-data archive is used when it exists for this Java and pyspark, and only then."""

from __future__ import annotations

import os
import sys

from source_framework.destinations.spark import jvm_cache


def test_the_archive_is_named_after_java_and_pyspark_and_used_only_when_present(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    path = jvm_cache.archive_path()
    assert path is not None and path.startswith(str(tmp_path)) and path.endswith(".jsa")
    assert jvm_cache.java_options() == ""
    os.makedirs(os.path.dirname(path))
    open(path, "wb").close()
    assert jvm_cache.java_options() == f"-XX:SharedArchiveFile={path}"


def test_without_java_there_is_no_archive(monkeypatch):
    monkeypatch.setenv("JAVA_HOME", "/nonexistent-java-home")
    assert jvm_cache.archive_path() is None and jvm_cache.java_options() == "" and jvm_cache.build() is None
