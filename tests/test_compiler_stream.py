"""The build log shows the compiler's output as it is printed (issue 21, item 7): torch's ninja step run
by the builder streams each line into the log, stamped with seconds, bounded and stripped of control
characters, since it is the compiler's text on the candidate's sources. Real ninja, real subprocesses."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import threading
import time

import pytest

from kevin_tui.evaluator.worker import compiler_stream
from kevin_tui.evaluator.worker.compiler_stream import MAX_LINE, MAX_LOG_LINES, run_ninja_streamed, stream_output

STAMPED = re.compile(r"^\[\s*\d+\.\d s\] \| ")

BUILD_NINJA = """rule first
  command = printf '%s-%s\\n' first compiler-line && touch first.o
rule waits
  command = while [ ! -f go ]; do sleep 0.02; done; printf '%s-%s\\n' second compiler-line; touch second.o
build first.o: first
build second.o: waits || first.o
"""


def test_ninja_output_reaches_the_log_while_the_build_still_runs(tmp_path, monkeypatch):
    """The second step waits for a file the test writes only once the first step's line is in the log:
    before, the output was captured until ninja ended, so this never finished (the timeout fails it)."""
    (tmp_path / "build.ninja").write_text(BUILD_NINJA)
    log = tmp_path / "builder.log"
    failure: list[BaseException] = []
    with log.open("w") as stream:
        monkeypatch.setattr(sys, "stderr", stream)

        def build() -> None:
            try:
                run_ninja_streamed(str(tmp_path), False, "Error building extension 'x'")
            except BaseException as exc:
                failure.append(exc)

        builder = threading.Thread(target=build)
        builder.start()
        deadline = time.monotonic() + 30
        while "first-compiler-line" not in log.read_text():
            assert time.monotonic() < deadline and builder.is_alive(), "the first line never reached the log"
            time.sleep(0.02)
        assert builder.is_alive()  # the build is still running: the line came as it was printed
        (tmp_path / "go").write_text("")
        builder.join(30)
    assert not failure and not builder.is_alive()
    lines = [line for line in log.read_text().splitlines() if line.endswith("| first-compiler-line")
             or line.endswith("| second-compiler-line")]  # fmt: skip
    assert [line.split("| ")[-1] for line in lines] == ["first-compiler-line", "second-compiler-line"]
    assert all(STAMPED.match(line) for line in lines)


def test_a_failed_ninja_step_raises_with_its_output_as_torch_does(tmp_path, monkeypatch):
    (tmp_path / "build.ninja").write_text("rule bad\n  command = echo 'main.cpp:3:1: error: nope' && false\n"
                                          "build out.o: bad\n")  # fmt: skip
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with pytest.raises(RuntimeError, match=r"^Error building extension 'x': .*main.cpp:3:1: error: nope"):
        run_ninja_streamed(str(tmp_path), False, "Error building extension 'x'")
    assert "| main.cpp:3:1: error: nope" in sys.stderr.getvalue()


def test_compiler_output_in_the_log_is_bounded_and_printable(monkeypatch):
    """Escapes, markup, a huge line without an end and more lines than the log keeps: the log gets
    printable, bounded lines and a count of the rest; what is kept for the error is bounded too."""
    monkeypatch.setattr(compiler_stream, "MAX_KEPT", 100_000)
    script = (
        "import sys\n"
        "print('main.cpp:1:2: warning: \\x1b[2J\\x1b]0;owned\\x07[bold red]x[/bold red]')\n"
        "sys.stdout.write('y' * 300_000 + '\\n')\n"
        "for i in range(2000): print(f'line {i}')\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    log = io.StringIO()
    assert process.stdout is not None
    kept = stream_output(process.stdout, log)
    process.wait()
    lines = log.getvalue().splitlines()
    assert len(lines) == MAX_LOG_LINES + 1 and lines[-1].endswith("more lines of compiler output not shown here")
    assert "\x1b" not in log.getvalue() and "\x07" not in log.getvalue()
    assert lines[0].endswith("warning: [2J]0;owned[bold red]x[/bold red]")  # markup stays text; the app never parses it
    assert all(len(STAMPED.sub("", line)) <= MAX_LINE for line in lines)
    assert len(kept) == 100_000 and kept.startswith(b"main.cpp:1:2: warning:")
