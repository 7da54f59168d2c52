"""A reader whose streams change again and again, quickly, keeps its process and its records.

A node reassigns its reader at every claim and every drop (a rebalance, a fenced
stream, a ZooKeeper session lost and back). Chaos with `--balance load` found a
node killed by SIGABRT in librdkafka 2.12 (`rd_kafka_assignment_partition_stopped:
Assertion rktp->rktp_started failed`, confluentinc/librdkafka#5573, fixed in
2.16.0): a new assignment removed a partition whose previous removal was still
pending. The churn runs in a child process, since such a failure aborts it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from framework.kernel.config import ConnectionConfig
from framework.progress import end_offsets
from framework.provision import provision_streams
from framework.testing.traffic import produce
from router.generator import generate_fragments
from router.naming import stream_name

pytestmark = pytest.mark.integration

STREAMS = 24
ROUNDS = 300

# Reassigns the reader ROUNDS times (alternating overlapping subsets, a short poll
# between), then reads every stream from offset 0 to the given ends; prints the counts.
CHURN = """
import json, sys
from framework.kafka import open_reader
client, bootstrap, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
ends = json.loads(sys.argv[4])
streams = sorted(ends)
reader = open_reader(client, bootstrap, client_id="churn")
for number in range(rounds):
    cut = number % len(streams) + 1
    chosen = streams[:cut] if number % 2 else streams[number % len(streams):]
    reader.assign({s: 0 for s in chosen})
    reader.poll(0.001 * (number % 3), 100)
reader.assign({s: 0 for s in streams})
seen = {s: 0 for s in streams}
for _ in range(2000):
    fetch = reader.poll(0.1, 1000)
    for stream, records in fetch.records.items():
        seen[stream] += len(records)
    if seen == ends:
        break
print(json.dumps(seen))
"""


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_a_reader_reassigned_many_times_quickly_survives_and_reads_every_record(
    zk_hosts: str, kafka_bootstrap: str, app: str, client: str
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, STREAMS)
    produce(connection, STREAMS, list(generate_fragments(1500, seed=5))[:3000])
    streams = [stream_name(app, i) for i in range(STREAMS)]
    ends = end_offsets(kafka_bootstrap, streams)
    assert all(ends[s] > 0 for s in streams), ends  # every stream has records to read

    done = subprocess.run(
        [sys.executable, "-c", CHURN, client, kafka_bootstrap, str(ROUNDS), json.dumps(ends)],
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, f"the reader's process exited {done.returncode}:\n" + "\n".join(
        done.stderr.splitlines()[-5:]
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ends
