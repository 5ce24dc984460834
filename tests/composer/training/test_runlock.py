"""One writer per run directory (issue 13): a live owner refuses a second process; a dead one's lock is taken."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from composer.errors import ConfigError
from composer.training.runlock import LOCK_NAME, run_lock


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def write_lock(directory, pid, host=None):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / LOCK_NAME).write_text(json.dumps({"pid": pid, "host": host or socket.gethostname(),
                                                   "command": "composer train", "started": 0}))


def test_the_lock_is_held_inside_and_released_after(tmp_path):
    with run_lock(tmp_path / "run"):
        held = json.loads((tmp_path / "run" / LOCK_NAME).read_text())
        assert held["pid"] == os.getpid()
        with run_lock(tmp_path / "run"):  # the same process again (a pipeline training into its tree)
            pass
        assert (tmp_path / "run" / LOCK_NAME).exists(), "the inner holder must not release the outer's lock"
    assert not (tmp_path / "run" / LOCK_NAME).exists()


def test_a_live_process_on_this_host_refuses_a_second_one(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_lock(tmp_path, sleeper.pid)
        with pytest.raises(ConfigError, match=f"in use by composer train \\(pid {sleeper.pid} on "):
            with run_lock(tmp_path):
                pass
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_dead_owners_lock_is_taken_over(tmp_path):
    write_lock(tmp_path, dead_pid())
    with run_lock(tmp_path):
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_another_hosts_lock_is_trusted_and_the_message_says_how_to_clear_it(tmp_path):
    write_lock(tmp_path, dead_pid(), host="some-other-node")
    with pytest.raises(ConfigError, match="if that process is gone, delete"):
        with run_lock(tmp_path):
            pass


def test_other_ranks_pass_through(tmp_path, monkeypatch):
    write_lock(tmp_path, os.getppid())  # held by a live process
    monkeypatch.setenv("LOCAL_RANK", "1")
    with run_lock(tmp_path):
        pass


def test_an_output_directory_that_cannot_be_created_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="cannot create output directory"):
        with run_lock(blocker / "run"):
            pass


def test_a_second_composer_train_on_the_same_out_exits_2(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_lock(tmp_path / "run", sleeper.pid)
        result = subprocess.run([sys.executable, "-m", "composer", "train", "--preset", "tiny", "--tokens", "4096",
                                 "--wandb", "off", "--out", str(tmp_path / "run")],
                                capture_output=True, text=True, timeout=120)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert result.returncode == 2
    assert "is in use by composer train" in result.stderr and "Traceback" not in result.stderr
