"""Compare checkpoint intervals: ``python -m source_framework.compare --connector main.py ...``.

Runs the same streams once per ``state_checkpoint_interval`` setting, each also killed mid-way
and resumed, plus airbyte-cdk's own read for reference, and reports STATEs, Spark commits, data
files, wall time, records per second, records at risk, records read again, duplicates and
missing rows, as a table, JSON and a PNG chart. A tool of its own (the ``compare`` extra), not a
command of every connector: it drives the connector's script through the entrypoint's
``run_script`` seam.

Modules, one job each:

* ``command``    - the command: arguments, the run, the outputs (``__main__`` calls it).
* ``settings``   - ``--intervals`` parsing; applying a setting to a config.
* ``experiment`` - per setting: clean run, crash and resume, CDK reference; the table check.
* ``runner``     - one child process: follow its stdout, kill it after N records.
* ``probe``      - the child side: ``read`` with the records counted (``python -m ...probe``).
* ``counters``   - the shared, crash-proof per-stream record counters.
* ``cdk_read``   - a connector script under airbyte-cdk's entrypoint (``python -m ...cdk_read``).
* ``risk``       - STATEs, repeated STATEs and records at risk of one run.
* ``commits``    - commits, files and rows from the tables' checkpoint records (no Spark).
* ``table_diff`` - rows, duplicates and missing rows of a crashed-and-resumed table, with Spark.
* ``report``, ``plot`` - text, Markdown, JSON; the PNG chart.
"""
