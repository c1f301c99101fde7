"""``scripts/test_startup/sitecustomize.py`` (loaded by every process of a test run) must leave ``inspect``'s
answers as they are: every class of airbyte-cdk's protocol models and of source_framework is found at the same
line, or not found alike, with and without it."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COMPARE = """
import inspect, sys
import airbyte_cdk, source_framework, source_framework.demo, source_framework.testing

# (the stdlib parses a module per class: the modules serpyco-rs reads at import, and ours, keep this test short)
modules = [m for name, m in list(sys.modules.items()) if m is not None and name.startswith(("airbyte_protocol", "source_framework"))]
classes = list({id(c): c for m in modules for c in list(vars(m).values())
                if inspect.isclass(c) and getattr(c, "__module__", None) == m.__name__}.values())

def answers():
    found = []
    for c in classes:
        try:
            found.append(inspect.findsource(c)[1])
        except Exception as error:
            found.append(type(error).__name__)
    return found

before = answers()
sys.path.insert(0, sys.argv[1])
import sitecustomize  # noqa: F401
after = answers()
assert inspect._ClassFinder.__module__ == "sitecustomize", "the patch was not applied"
differ = [(c, b, a) for c, b, a in zip(classes, before, after) if b != a]
assert not differ, differ[:5]
print(len(classes), sum(isinstance(b, int) for b in before))
"""


def test_the_test_runs_inspect_finds_every_class_where_python_does():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # (this process's own start had it loaded)
    done = subprocess.run([sys.executable, "-c", COMPARE, os.path.join(ROOT, "scripts", "test_startup")], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    classes, found = map(int, done.stdout.split())
    assert classes > 100 and found > 100, done.stdout
