"""The benchmark (not a test): ``python bench/run.py --records 200000``. See ``bench/README.md``."""
