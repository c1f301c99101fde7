"""Our command line takes everything airbyte-cdk's entrypoint takes (issue: any airbyte-cdk
connector runs on our ``launch`` unchanged, called the way the Airbyte platform calls it)."""

from __future__ import annotations

import argparse

import pytest
from airbyte_cdk.entrypoint import AirbyteEntrypoint

from source_framework.runtime.entrypoint import build_parser


def cdk_commands():
    """Each airbyte-cdk entrypoint command with an argv naming every one of its options."""
    build_cdk = AirbyteEntrypoint.parse_args  # airbyte-cdk builds its parser inside parse_args
    captured = {}
    original = argparse.ArgumentParser.parse_args

    def capture(self, args=None, namespace=None):
        captured["parser"] = self
        return original(self, args, namespace)

    argparse.ArgumentParser.parse_args = capture
    try:
        build_cdk(["spec"])
    finally:
        argparse.ArgumentParser.parse_args = original
    main = captured["parser"]
    subparsers = next(a for a in main._actions if isinstance(a, argparse._SubParsersAction))
    for command, sub in subparsers.choices.items():
        argv = [command]
        for action in sub._actions:
            if not action.option_strings or action.dest == "help":
                continue
            flag = max(action.option_strings, key=len)
            argv += [flag] if action.nargs == 0 else [flag, f"{action.dest}.json"]
        yield command, argv


@pytest.mark.parametrize("command, argv", list(cdk_commands()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_cdk_entrypoint_flag_is_accepted(command, argv):
    cdk = AirbyteEntrypoint.parse_args(argv)
    ours = build_parser().parse_args(argv)
    assert ours.command == cdk.command == command
    for name, value in vars(cdk).items():
        assert getattr(ours, name) == value, name


def test_the_cdk_flags_are_really_covered():
    commands = dict(cdk_commands())
    assert {"spec", "check", "discover", "read"} <= set(commands)
    assert "--debug" in commands["read"] and "--manifest-path" in commands["read"]
