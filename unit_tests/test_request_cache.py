"""The HTTP cache folder of a command: removed when it ends, and by the next command when it was killed."""

import multiprocessing
import os
import signal
import tempfile

from airbyte_cdk.utils.constants import ENV_REQUEST_CACHE_PATH

from source_framework.runtime.request_cache import PREFIX, request_cache_folder


def _hold_then(report, die: bool) -> None:
    with request_cache_folder() as folder:
        with open(os.path.join(folder, "responses.sqlite"), "w") as handle:
            handle.write("an API response")
        report.send(folder)  # a pipe's send is written before it returns; a queue's is not
        if die:
            os.kill(os.getpid(), signal.SIGKILL)  # as a crash or an orchestrator's timeout does
        signal.pause()


def _start(tmp_path, die):
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_hold_then, args=(sender, die))
    process.start()
    assert receiver.poll(30)
    return process, receiver.recv()


def test_a_killed_commands_cache_folder_is_removed_by_the_next_command_and_a_live_ones_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = os.environ.get(ENV_REQUEST_CACHE_PATH)  # airbyte-cdk's entrypoint sets it for good
    killed, abandoned = _start(tmp_path, die=True)
    killed.join(10)
    assert killed.exitcode == -signal.SIGKILL and os.path.isdir(abandoned)  # SIGKILL: no clean-up of its own
    running, in_use = _start(tmp_path, die=False)
    try:
        with request_cache_folder() as folder:
            assert os.environ[ENV_REQUEST_CACHE_PATH] == folder and os.path.basename(folder).startswith(PREFIX)
            assert not os.path.exists(abandoned)
            assert os.path.isfile(os.path.join(in_use, "responses.sqlite"))  # its command still runs
    finally:
        running.kill()
        running.join(10)
    assert not os.path.exists(folder) and os.environ.get(ENV_REQUEST_CACHE_PATH) == before
    with request_cache_folder():
        assert not os.path.exists(in_use)
