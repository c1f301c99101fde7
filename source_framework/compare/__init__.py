"""Compare checkpoint intervals: ``python -m source_framework.compare --connector main.py ...``.

Runs the same streams once per ``state_checkpoint_interval`` setting, each also killed mid-way and resumed, plus
airbyte-cdk's own read for reference. A tool of its own (the ``compare`` extra), not a command of every connector.
"""
