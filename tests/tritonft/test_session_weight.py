"""How a process's session weight (Linux autogroup nice) is read: the number the kernel prints, or nothing where a CPU
cgroup, not the session, shares the CPU (CI's machine: every 2.33 start there read an empty file)."""

from __future__ import annotations

import subprocess

from tritonft.local_triton import autogroup_nice, session_weight, set_session_weight


def test_the_nice_is_the_last_field_the_kernel_prints() -> None:
    assert autogroup_nice("/autogroup-1811 nice -10\n") == -10


def test_an_empty_autogroup_file_means_autogroup_does_not_schedule_the_process() -> None:
    assert autogroup_nice("") is None


def test_a_process_that_is_gone_has_no_session_weight_and_none_is_set() -> None:
    done = subprocess.Popen(["true"])
    done.wait()
    assert session_weight(done.pid) is None
    assert not set_session_weight(done.pid, -10)
