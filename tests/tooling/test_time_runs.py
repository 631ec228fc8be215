"""tools/time_runs.py, the measurement behind the suite's figure in docs/ci-and-previews.md: it times the
command and everything the command waited for, keeps a failed run's output, and runs two trees in turn."""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools import time_runs

# A run's command (sh: a run costs a few milliseconds): counts its runs in ./count, writes where it ran to
# $ORDER, sleeps 0.01 s times that count, has a child burn 0.1 s of CPU when BUSY is set, and fails on the
# run given as FAIL_ON.
SCRIPT = """n=$(( $(cat count 2>/dev/null || echo 0) + 1 )); echo "$n" >count
pwd >>"$ORDER"
sleep "0.$(printf %02d "$n")"
if [ -n "${BUSY:-}" ]; then "$PYTHON" -c 'import time
t = time.process_time()
while time.process_time() - t < 0.1: pass'; fi
echo "run $n says hello"
if [ "$n" = "${FAIL_ON:-}" ]; then exit 3; fi
"""
RUN_LINE = re.compile(r"^\S+ (A|B) run (\d+)/\d+: ([\d.]+) s wall, ([\d.]+) s CPU, (.*)$", re.M)


def _timed(tmp_path: Path, monkeypatch, capsys, *args: str, **env: str) -> tuple[int, str]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORDER", str(tmp_path / "order"))
    monkeypatch.setenv("PYTHON", sys.executable)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    (tmp_path / "run.sh").write_text(SCRIPT)
    code = time_runs.main([*args, "--keep", str(tmp_path), "--", "sh", str(tmp_path / "run.sh")])
    return code, capsys.readouterr().out


def test_the_summary_is_the_median_and_quartiles_of_the_passed_runs():
    runs = [time_runs.Run("A", wall, 2 * wall, 0, None) for wall in (31.0, 20.0, 40.0, 25.0, 22.0)]
    runs += [time_runs.Run("A", 5.0, 9.0, 2, Path("/tmp/run-A-x.log")), time_runs.Run("B", 99.0, 1.0, 0, None)]
    assert time_runs.summary(runs, "A", budget=30) == (
        "A: 5 timed runs, 1 failed (output kept: /tmp/run-A-x.log): wall median 25.0 s (quartiles 22.0, 31.0; "
        "20.0-40.0), CPU median 50.0 s; 3 of 5 under 30 s")


def test_each_run_is_timed_and_summed_up(tmp_path, monkeypatch, capsys):
    code, out = _timed(tmp_path, monkeypatch, capsys, "--runs", "3")
    assert code == 0
    walls = [float(m.group(3)) for m in RUN_LINE.finditer(out)]
    assert len(walls) == 3 and all(w >= 0.01 * (i + 1) for i, w in enumerate(walls)), out  # run i sleeps 0.01 i
    (line,) = [x for x in out.splitlines() if x.startswith("A: ")]
    median = float(re.search(r"wall median ([\d.]+) s", line).group(1))
    assert abs(median - statistics.median(walls)) <= 0.051, out  # run lines to 0.01 s, the summary to 0.1 s


def test_cpu_time_counts_what_the_command_waited_for(tmp_path, monkeypatch, capsys):
    """`make test`'s CPU is in pytest's workers, grandchildren of the timed process."""
    code, out = _timed(tmp_path, monkeypatch, capsys, "--runs", "1", BUSY="1")
    assert code == 0
    (match,) = RUN_LINE.finditer(out)
    assert float(match.group(4)) >= 0.1, out


def test_a_failed_run_is_not_timed_its_output_is_kept_and_the_exit_status_says_so(tmp_path, monkeypatch, capsys):
    code, out = _timed(tmp_path, monkeypatch, capsys, "--runs", "3", FAIL_ON="2")
    assert code == 1
    outcomes = [m.group(5) for m in RUN_LINE.finditer(out)]
    assert outcomes[0] == outcomes[2] == "passed" and outcomes[1].startswith("FAILED (exit 3, output in "), out
    kept = Path(outcomes[1].split("output in ")[1].rstrip(")"))
    assert kept.read_text() == "run 2 says hello\n"
    assert f"A: 2 timed runs, 1 failed (output kept: {kept})" in out
    assert list(tmp_path.glob("run-A-*.log")) == [kept]  # the passed runs' outputs are not kept


def test_against_runs_the_two_trees_in_turn_and_gives_the_pairs_ratio(tmp_path, monkeypatch, capsys):
    other = tmp_path / "other"
    other.mkdir()
    (other / "count").write_text("48")  # B's runs sleep 0.49 and 0.5 s, A's 0.01 and 0.02 s: far apart even
    # on a loaded machine, where starting a shell took 0.06 s (a 0.09 s sleep read 1.6 times a 0.01 s one)
    code, out = _timed(tmp_path, monkeypatch, capsys, "--runs", "2", "--against", str(other))
    assert code == 0
    assert (tmp_path / "order").read_text().split() == [str(tmp_path), str(other)] * 2
    assert [m.group(1) for m in RUN_LINE.finditer(out)] == ["A", "B", "A", "B"]
    ratio = float(re.search(r"B/A wall, median of 2 pairs: ([\d.]+)", out).group(1))
    assert ratio > 2, out


def _ctrl_c_as_a_terminal_delivers_it() -> None:
    """SIGINT back to its default in the tool's process group: a suite started in the background (`make
    test &` from a script) ignores it, and an ignored signal stays ignored across exec."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_with_the_summary_of_the_runs_that_ended(tmp_path):
    """Ctrl-C reaches the whole foreground process group: the tool and the run it waits for."""
    (tmp_path / "run.sh").write_text('n=$(( $(cat count 2>/dev/null || echo 0) + 1 )); echo "$n" >count\n'
                                     'if [ "$n" -gt 1 ]; then sleep 30; fi\n')
    tool = subprocess.Popen([sys.executable, str(Path(time_runs.__file__)), "--runs", "3", "--keep", str(tmp_path),
                             "--", "sh", "run.sh"], cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_ctrl_c_as_a_terminal_delivers_it)
    first = tool.stdout.readline()
    assert " A run 1/3: " in first and first.endswith("passed\n"), first
    deadline = time.monotonic() + 10
    while (tmp_path / "count").read_text().strip() != "2":  # the second run has started
        assert time.monotonic() < deadline, "the second run did not start"
        time.sleep(0.01)
    os.killpg(tool.pid, signal.SIGINT)
    rest = tool.stdout.read()
    assert tool.wait(timeout=10) == 130
    assert rest.startswith("interrupted: the summary of the 1 runs that ended\nA: 1 timed runs: wall median "), rest
    assert not list(tmp_path.glob("run-A-*.log")), "the interrupted run's output is not kept"


@pytest.mark.parametrize(("args", "message"), [
    (["--runs", "0"], "--runs is 0; expected 1 or more"),
    (["--against", "/nonexistent/tree"], "--against is /nonexistent/tree; expected a directory"),
    (["--keep", "/nonexistent/dir"], "--keep is /nonexistent/dir; expected an existing directory"),
])
def test_bad_arguments_are_one_line_naming_the_option(args, message, capsys):
    with pytest.raises(SystemExit) as stop:
        time_runs.main([*args, "--", "true"])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err
