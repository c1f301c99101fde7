"""The docs' examples still hold against the code: every page in ``docs/`` and the README.

``mkdocs build --strict`` (``scripts/test.sh``) fails on a broken link or anchor; this checks what
the pages show. Without a mark:

- every ``json`` block parses, every ``yaml`` block parses, every ``python`` block compiles;
- every command line in a ``bash`` block that runs one of our programs (a connector script,
  ``python -m source_framework...``, ``bench/run.py``, ``scripts/demo.sh``) is accepted by that
  program's own argument parser.

A page marks a block or a table for a deeper check with an HTML comment on the line just before it
(the site and GitHub show nothing of it):

- ``<!-- checked: config [SCRIPT] -->``: a JSON config ``read`` accepts: the connector's spec (the
  demo connector's, or the ``spec.json`` beside the entry script named), ``concurrency_level``, and
  the ``destination`` section through ``read``'s own parser;
- ``<!-- checked: catalog [SCRIPT CONFIG] -->``: a configured catalog ``read`` loads, whose streams
  and modes the connector (the demo's, or the script's with that config) accepts;
- ``<!-- checked: state -->``: a state file ``--state`` reads;
- ``<!-- checked: acceptance-config -->``: an ``acceptance-test-config.yml`` the runner reads;
- ``<!-- checked: run -->``: the python block runs;
- ``<!-- checked: file PATH -->``: the block is that file of the repository, verbatim;
- ``<!-- checked: flags PROGRAM -->`` before a table: its first column lists exactly the program's
  flags (``main.py read``, ``python -m source_framework.compare``, ...);
- ``<!-- checked: keys WHAT -->`` before a table: its first column lists exactly the config keys
  or stream attributes the code reads (``destination``, ``runtime``, ``demo``, ``stream-attributes``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import re
import shlex
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
MARK = re.compile(r"^<!--\s*checked:\s*(.*?)\s*-->$")
FENCE = re.compile(r"^(\s*)(```+)\s*([\w-]*)\s*$")
logger = logging.getLogger("docs-examples")


# --- reading a page -------------------------------------------------------------------------------


@dataclass
class Block:
    """A fenced code block, or a table, with the marks on the lines just before it."""

    where: str
    kind: str  # the fence's language, or "table"
    text: str
    marks: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)  # a table's body rows, cell by cell


def blocks_of(text: str, page: str) -> tuple[list[Block], list[str]]:
    """The page's blocks and tables, and the problems of its marks (a mark that checks nothing)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    marks: list[tuple[int, str]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        mark = MARK.match(line.strip())
        fence = FENCE.match(line)
        if mark:
            marks.append((index + 1, mark.group(1)))
            index += 1
            continue
        if fence:
            indent, ticks, kind = fence.groups()
            end = index + 1
            while end < len(lines) and lines[end].strip() != ticks:
                end += 1
            body = textwrap.dedent("\n".join(lines[index + 1:end]))
            blocks.append(Block(f"{page}:{index + 1}", kind or "text", body + "\n" if body else "", [m for _, m in marks]))
            marks, index = [], end + 1
            continue
        if line.startswith("|"):
            end = index
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            rows = [_cells(row) for row in lines[index + 2:end]]  # after the header and its rule
            blocks.append(Block(f"{page}:{index + 1}", "table", "\n".join(lines[index:end]), [m for _, m in marks], rows))
            marks, index = [], end
            continue
        problems += [f"{page}:{number}: the mark '{text}' is not just before a code block or a table" for number, text in marks]
        marks = []
        index += 1
    problems += [f"{page}:{number}: the mark '{text}' is not just before a code block or a table" for number, text in marks]
    return blocks, problems


def _cells(row: str) -> list[str]:
    # a cell may hold an escaped pipe (`fail\|resync`)
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


# --- the programs and their parsers ---------------------------------------------------------------


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def captured_parser(main: Callable[[list[str]], Any]) -> argparse.ArgumentParser:
    """The parser a program's ``main`` builds, taken when it parses (nothing else of it runs)."""

    def capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Captured(self)

    with mock.patch.object(argparse.ArgumentParser, "parse_args", capture):
        try:
            main([])
        except _Captured as captured:
            return captured.parser
    raise AssertionError(f"{main} parsed no arguments")


def scaffold_parser() -> argparse.ArgumentParser:
    from source_framework.scaffold import main

    return captured_parser(main)


def connector_parser() -> argparse.ArgumentParser:
    from source_framework.runtime.entrypoint import build_parser

    return build_parser()


def compare_parser() -> argparse.ArgumentParser:
    from source_framework.compare.command import build_parser

    return build_parser()


def acceptance_runner_parser() -> argparse.ArgumentParser:
    from source_framework.testing.__main__ import main

    return captured_parser(main)


def expected_records_parser() -> argparse.ArgumentParser:
    from source_framework.testing.expected_records import main

    return captured_parser(main)


def demo_api_parser() -> argparse.ArgumentParser:
    from source_framework.demo.api.__main__ import main

    return captured_parser(main)


def walkthrough_parser() -> argparse.ArgumentParser:
    from source_framework.demo.walkthrough import main

    return captured_parser(main)


def bench_parser() -> argparse.ArgumentParser:
    from bench.run import parse_args

    return captured_parser(parse_args)


def subcommand(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    for name in names:
        (commands,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
        parser = commands.choices[name]
    return parser


#: a flags table's PROGRAM -> its parser
PROGRAMS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "python -m source_framework.compare": compare_parser,
    "python -m source_framework.testing": acceptance_runner_parser,
    "python -m source_framework.testing.expected_records": expected_records_parser,
    "python -m source_framework.demo.api": demo_api_parser,
    "scripts/demo.sh": walkthrough_parser,
    "bench/run.py": bench_parser,
}


def parser_named(program: str) -> argparse.ArgumentParser:
    words = program.split()
    if words[0] == "main.py":
        return subcommand(connector_parser(), *words[1:])
    return PROGRAMS[program]()


def flags_of(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings if option.startswith("--")} - {"--help"}


@contextlib.contextmanager
def _argparse_errors() -> Iterator[io.StringIO]:
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        yield stderr


def parse(parser: argparse.ArgumentParser, args: list[str]) -> str | None:
    """None if ``parser`` takes ``args``, else what it said."""
    with _argparse_errors() as stderr:
        try:
            parser.parse_args(args)
        except SystemExit as exit_:
            if exit_.code:
                return stderr.getvalue().strip().splitlines()[-1]
    return None


SHELL_OPERATORS = {">", ">>", "2>", "2>&1", "|", "||", "&&", ";", "&"}
NOT_OURS = {"pip", "pytest", "mkdocs", "venv"}


def command_lines(text: str) -> Iterator[list[str]]:
    """Each command of a bash block as words, continuation lines joined, cut at the first shell operator."""
    for line in text.replace("\\\n", " ").splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        cut = next((i for i, word in enumerate(words) if word in SHELL_OPERATORS or word.startswith((">", "2>"))), len(words))
        if words[:cut]:
            yield words[:cut]


def command_problem(words: list[str]) -> str | None:
    """What the program a command runs says of its arguments; None where it takes them (or the
    command is none of ours)."""
    if words[:2] == ["bash", "scripts/demo.sh"]:
        return parse(walkthrough_parser(), words[2:])
    if not words[0].endswith(("python", "python3")) or len(words) < 2:
        return None
    if words[1] == "-m" and len(words) > 2:
        module, args = words[2], words[3:]
        if module.split(".")[0] in NOT_OURS:
            return None
        if module == "source_framework" and args[:1] == ["init"]:
            return parse(scaffold_parser(), args[1:])
        if module == "source_framework":
            return parse(connector_parser(), args[1:]) if len(args) > 1 else "names no connector and no command"
        if module == "source_framework.testing" and "--" in args:
            args = args[: args.index("--")]
        program = "python -m " + module
        if program not in PROGRAMS:
            return f"{program}: this test does not know that program's parser (add it to PROGRAMS)"
        return parse(PROGRAMS[program](), args)
    if words[1] == "bench/run.py":
        return parse(bench_parser(), words[2:])
    if words[1].endswith(".py"):  # a connector's entry script: launch()'s command line
        return parse(connector_parser(), words[2:])
    return None


# --- the deeper checks ----------------------------------------------------------------------------


def source_of(script: str | None) -> tuple[Any, Any]:
    """The source object and its spec: the demo connector's, or the one the entry script hands to
    ``launch`` with the ``spec.json`` beside the script."""
    from airbyte_cdk.models import ConnectorSpecificationSerializer

    if script is None:
        from source_framework.demo.source import DemoSource

        source = DemoSource()
        return source, source.spec(logger)
    from source_framework.runtime.entrypoint import run_script

    found: list[Any] = []
    run_script(str(ROOT / script), ["spec"], lambda source, args: found.append(source))
    spec = json.loads((ROOT / script).with_name("spec.json").read_text())
    return found[0], ConnectorSpecificationSerializer.load(spec)


def check_config(config: Any, script: str | None, folder: Path) -> None:
    from source_framework.runtime import inputs
    from source_framework.runtime.destination_setup import make_destination
    from source_framework.runtime.entrypoint import build_parser
    from source_framework.runtime.output import ProtocolOutput
    from source_framework.runtime.read_command import concurrency_of

    path = folder / "config.json"
    path.write_text(json.dumps(config))
    config = inputs.load_config(str(path))
    source, spec = source_of(script)
    inputs.check_config(source, config, spec, str(path))
    parsed = build_parser().parse_args(["read", "--config", str(path), "--catalog", str(folder / "catalog.json")])
    concurrency_of(parsed, config)
    make_destination(source, config, parsed, ProtocolOutput(io.BytesIO())).close()


def check_catalog(catalog: Any, script: str | None, config_path: str | None, folder: Path) -> None:
    from source_framework.runtime.entrypoint import build_parser
    from source_framework.runtime.inputs import load_catalog
    from source_framework.runtime.read_command import prepare_streams

    path = folder / "catalog.json"
    path.write_text(json.dumps(catalog))
    loaded = load_catalog(str(path))
    source, _ = source_of(script)
    config = json.loads((ROOT / config_path).read_text()) if config_path else {"api_key": "docs"}
    parsed = build_parser().parse_args(["read", "--config", "config.json", "--catalog", str(path)])
    prepare_streams(source, config, loaded, {}, parsed, set())


def check_state(state: Any, folder: Path) -> None:
    from source_framework.runtime.inputs import load_state

    path = folder / "state.json"
    path.write_text(json.dumps(state))
    if not load_state(str(path)):
        raise AssertionError("the state file holds no state")


def check_acceptance_config(text: str, folder: Path) -> None:
    from source_framework.testing.acceptance_config import AcceptanceConfig

    path = folder / "acceptance-test-config.yml"
    path.write_text(text)
    AcceptanceConfig.load(str(path))


def documented_names(rows: list[list[str]]) -> set[str]:
    """The names a reference table's first column lists: in backticks, the words before any space."""
    return {name.split()[0] for row in rows for name in re.findall(r"`([^`]+)`", row[0])}


def _source(*parts: str) -> str:
    return "\n".join(path.read_text() for part in parts for path in sorted(ROOT.joinpath("source_framework").glob(part)))


def keys_read(what: str) -> set[str]:
    """What the code reads: config keys of the destination section, the runtime's and the demo
    connector's top-level keys, or the attributes the stream bases read."""
    if what == "destination":
        code = _source("runtime/*.py", "destinations/**/*.py")
        return set(re.findall(r"\bsettings\.get\(\s*\"(\w+)\"", code)) | set(re.findall(r"\bsettings\[\s*\"(\w+)\"\s*\]", code))
    if what == "runtime":
        return set(re.findall(r"\bconfig\.get\(\s*\"(\w+)\"", _source("runtime/*.py")))
    if what == "demo":
        spec = json.loads((ROOT / "source_framework" / "demo" / "spec.json").read_text())
        read = re.findall(r"\bconfig(?:\.get\(|\[)\s*\"(\w+)\"", _source("demo/source.py"))
        return set(spec["connectionSpecification"]["properties"]) | set(read)
    if what == "stream-attributes":
        from source_framework.streams.incremental import IncrementalHttpStream

        return set(IncrementalHttpStream.FRAMEWORK_ATTRIBUTES)
    raise AssertionError(f"no keys named '{what}'")


def _json(block: Block) -> Any:
    return json.loads(block.text)


def run_block(block: Block) -> None:
    exec(compile(block.text, block.where, "exec"), {"__name__": "docs_example"})


def problems_in(text: str, page: str, folder: Path) -> tuple[list[str], list[str]]:
    """What is wrong with the page's examples, and the marks it checked."""
    blocks, problems = blocks_of(text, page)
    checked: list[str] = []
    for block in blocks:
        for mark in block.marks:
            checked.append(mark.split()[0])
        try:
            _check_block(block, folder)
        except Exception as error:  # each problem is reported, the others still checked
            problems.append(f"{block.where}: {type(error).__name__}: {error}")
    return problems, checked


def _check_block(block: Block, folder: Path) -> None:
    if block.kind == "json":
        _json(block)
    elif block.kind == "yaml":
        yaml.safe_load(block.text)
    elif block.kind == "python":
        compile(block.text, block.where, "exec")
    elif block.kind == "bash":
        problems = [f"`{' '.join(words)}`: {problem}" for words in command_lines(block.text) if (problem := command_problem(words))]
        if problems:
            raise ValueError("; ".join(problems))
    for mark in block.marks:
        kind, *args = mark.split()
        if kind == "config":
            check_config(_json(block), args[0] if args else None, folder)
        elif kind == "catalog":
            check_catalog(_json(block), args[0] if args else None, args[1] if len(args) > 1 else None, folder)
        elif kind == "state":
            check_state(_json(block), folder)
        elif kind == "acceptance-config":
            check_acceptance_config(block.text, folder)
        elif kind == "run":
            run_block(block)
        elif kind == "file":
            if block.text != (ROOT / args[0]).read_text():
                raise AssertionError(f"the block is not {args[0]} as it is")
        elif kind == "flags":
            program = " ".join(args)
            documented, actual = documented_names(block.rows), flags_of(parser_named(program))
            if documented != actual:
                raise AssertionError(f"{program}: flags missing from the table: {sorted(actual - documented)}; "
                                     f"in the table but not taken: {sorted(documented - actual)}")
        elif kind == "keys":
            documented, actual = documented_names(block.rows), keys_read(args[0])
            if documented != actual:
                raise AssertionError(f"{args[0]} keys read by the code but missing from the table: {sorted(actual - documented)}; "
                                     f"in the table but not read: {sorted(documented - actual)}")
        else:
            raise AssertionError(f"unknown mark '{mark}'")


# --- the tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_the_examples_of_each_page_hold(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # relative warehouses of the examples resolve here
    problems, _ = problems_in(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)), tmp_path)
    assert not problems, "\n".join(problems)


def test_every_kind_of_check_is_used() -> None:
    """A mark that no longer matches (a changed comment, a renamed kind) must not leave the examples
    unchecked: each kind is found on some page."""
    marks: set[str] = set()
    for page in PAGES:
        blocks, _ = blocks_of(page.read_text(encoding="utf-8"), page.name)
        marks |= {mark.split()[0] for block in blocks for mark in block.marks}
    assert marks == {"config", "catalog", "state", "acceptance-config", "run", "file", "flags", "keys"}


def commands_of(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[str]:
    """``main.py read``, ``main.py state show``, ...: every command of the connector's command line."""
    subparsers = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not subparsers:
        yield " ".join(("main.py", *prefix))
    for action in subparsers:
        for name, child in action.choices.items():
            yield from commands_of(child, (*prefix, name))


def test_every_command_of_the_connector_has_a_flags_table() -> None:
    """A new command (or subcommand) of ``main.py`` gets its table in the configuration reference."""
    blocks, _ = blocks_of((ROOT / "docs" / "configuration.md").read_text(encoding="utf-8"), "configuration.md")
    documented = {" ".join(mark.split()[1:]) for block in blocks for mark in block.marks if mark.startswith("flags main.py")}
    assert set(commands_of(connector_parser())) == documented


def test_the_readmes_links_lead_somewhere() -> None:
    """mkdocs checks the links between pages; the README's links into docs/ are checked here."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [link for link in re.findall(r"\]\(([^)\s]+)\)", readme) if not re.match(r"\w+:|#", link)]
    assert links
    missing = [link for link in links if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, missing


BROKEN = '''
<!-- checked: config -->
```json
{"api_key": "secret", "destination": {"retention_hours": "a while"}}
```

<!-- checked: catalog -->
```json
{"streams": [{"stream": {"name": "user", "json_schema": {}, "supported_sync_modes": ["incremental"]},
  "sync_mode": "incremental", "destination_sync_mode": "append"}]}
```

<!-- checked: state -->
```json
{"bookmarks": ["users"]}
```

```json
{"api_key": "secret",}
```

```bash
python main.py read --config c.json --catalog k.json --state-flie s.json
python -m source_framework.compare --config c.json --catalog k.json --intervalls 100
```

<!-- checked: flags main.py state show -->
| flag | what |
|---|---|
| `--state-file FILE` | the file |
| `--stream NAME` | not a flag of state show |

<!-- checked: keys destination -->
| key | what |
|---|---|
| `warehouse` | only one of them |

<!-- checked: file examples/orders_connector/main.py -->
```python
print("not the tutorial's connector")
```

<!-- checked: run -->
```python
from source_framework import NoSuchThing
```

<!-- checked: config -->
'''


def test_a_broken_example_of_each_kind_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    problems, _ = problems_in(BROKEN, "broken.md", tmp_path)
    text = "\n".join(problems)
    for expected in (
        "the destination section is not valid",
        "names stream 'user', which the source does not have",
        "'bookmarks' must be an object",
        "JSONDecodeError",
        "--state-flie",
        "--intervalls",
        "in the table but not taken: ['--stream']",
        "missing from the table: ['connect_retry_seconds'",
        "is not examples/orders_connector/main.py as it is",
        "cannot import name 'NoSuchThing'",
        "the mark 'config' is not just before a code block or a table",
    ):
        assert expected in text, f"{expected!r} not among:\n{text}"
    assert len(problems) == 10, text  # the two commands of one bash block are one problem


def test_the_destination_keys_a_config_may_hold_are_those_the_code_reads():
    """A key outside ``DESTINATION_KEYS`` is refused as misspelt: a key the code reads must be in it."""
    from source_framework.runtime.destination_setup import DESTINATION_KEYS

    assert set(DESTINATION_KEYS) == keys_read("destination")
