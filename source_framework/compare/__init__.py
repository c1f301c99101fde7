"""Compare checkpoint intervals, each with a crash and resume, against airbyte-cdk's read: a tool of its own (``compare`` extra)."""
