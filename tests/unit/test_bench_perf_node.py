"""`benchmarks.perf_node` reads `perf report`'s rows as they are printed."""

from __future__ import annotations

from benchmarks.perf_node import parse_report

# Rows of `perf report --stdio -q -g none --no-children` as perf 6 prints them.
SAMPLE = """
    63.96%  libpython3.11.so.1.0
     8.87%  eeef9aaa8e5bcea19a77__mypyc.cpython-311-x86_64-linux-gnu.so
    10.87%  libpython3.11.so.1.0                [.] _PyEval_EvalFrameDefault
     1.75%  [kernel.kallsyms]                   [k] irqentry_exit_to_user_mode
    91.90%  sessionizer
"""


def test_each_row_gives_its_share_and_what_it_names() -> None:
    rows = parse_report(SAMPLE)
    assert rows == [
        (63.96, "libpython3.11.so.1.0"),
        (8.87, "eeef9aaa8e5bcea19a77__mypyc.cpython-311-x86_64-linux-gnu.so"),
        (10.87, "libpython3.11.so.1.0 [.] _PyEval_EvalFrameDefault"),
        (1.75, "[kernel.kallsyms] [k] irqentry_exit_to_user_mode"),
        (91.90, "sessionizer"),
    ]


def test_headers_and_blank_lines_are_not_rows() -> None:
    assert parse_report("# Samples: 49K of event 'cpu-clock'\n\n#\n") == []
