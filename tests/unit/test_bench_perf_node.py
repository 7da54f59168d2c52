"""`benchmarks.perf_node` reads `perf report`'s rows as they are printed."""

from __future__ import annotations

from benchmarks.perf_node import fault_shares, parse_report

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


# Three samples of `perf script` with call chains, as perf 6 prints them.
SCRIPT = """rdk:broker1  3556   270.659961:     500250 cpu-clock:ppp:
\tffffffff822563a7 clear_page_erms+0x7 ([kernel.kallsyms])
\tffffffff8226065d exc_page_fault+0x20d ([kernel.kallsyms])
\t          10aae7 __libc_recvmsg+0x57 (/usr/lib/x86_64-linux-gnu/libc.so.6)

rdk:broker1  3556   270.660626:     500250 cpu-clock:ppp:
\t          1a2b3c LZ4_decompress_safe+0x5c7 (/lib/librdkafka.so.1)

sessionizer  3550   270.661130:     500250 cpu-clock:ppp:
\t          4d5e6f _PyEval_EvalFrameDefault+0x10 (/lib/libpython3.11.so.1.0)
"""


def test_page_faults_are_shares_of_every_sample_by_thread() -> None:
    assert fault_shares(SCRIPT) == [(100.0 / 3, "rdk:broker1")]
    assert fault_shares("") == []
