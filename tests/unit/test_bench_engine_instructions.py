"""`benchmarks.engine_instructions` counts the compiled engine, and only the compiled one."""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks.engine_instructions import ROOT, child_command, child_env
from framework.kernel import compiled
from framework.testing.hot_path_runs import require_compiled


def _child(env: dict[str, str], stage: str = "engine") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        child_command(60, "noop", stage),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _counted(stage: str) -> subprocess.CompletedProcess[str]:
    """The stage's counted run in this tree, which must succeed on the compiled build."""
    run = _child(child_env(ROOT), stage)
    if "no usable compiled build" in run.stderr:
        require_compiled(run.stderr.strip())
    assert run.returncode == 0, run.stderr
    return run


def test_the_counted_run_passes_the_plan_through_the_compiled_engine() -> None:
    # The script runs in other checkouts too: it must keep to engine_throughput's plan.
    _counted("engine")


def test_the_sink_stage_encodes_the_sessions_of_the_pass_and_says_how_many() -> None:
    run = _counted("sink")
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("sessions=")]
    assert int(line.removeprefix("sessions=")) > 0


def test_a_tree_without_a_compiled_build_is_refused_not_counted_on_python(
    tmp_path: Path,
) -> None:
    env = {**child_env(ROOT), compiled.DIR_ENV: str(tmp_path / "no-build")}
    run = _child(env)
    assert run.returncode != 0
    assert "no usable compiled build" in run.stderr


def test_the_producer_stages_send_every_fragment_without_a_broker() -> None:
    run = _counted("producer")
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("sent=")]
    assert line.split()[0] == "sent=60"
    _counted("encoding")


def test_the_task_stage_handles_the_plan_as_wire_records() -> None:
    _counted("task")
