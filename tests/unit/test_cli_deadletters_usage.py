"""`sessionizer deadletters`: a usage error is one line and exit 2, before any server is asked."""

from __future__ import annotations

import pytest

from framework.commands.client_lines import first_line
from framework.kafka.errors import ClientError
from framework.testing.cli import cli

NOWHERE = {"zk": "127.0.0.1:1", "bootstrap": "127.0.0.1:1", "app": "web"}
"""Nothing listens there: a command that asked the cluster would fail differently."""


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["show"], "deadletters show needs the dead letter's offset (see the list)"),
        (["list", "5"], "deadletters list takes no position (did you mean `show 5`?)"),
        (["replay", "7"], "deadletters replay takes no position"),
        (["replay"], "deadletters replay needs --processor MODULE:CLASS (the fixed one)"),
        (["--processor", "fixed:Sessions"], "--processor is for `deadletters replay`, not `list`"),
        (["replay", "--processor", "no_such_module_here:Fixed"], "no_such_module_here"),
    ],
)
def test_a_misused_action_is_refused_in_one_line_without_asking_the_cluster(
    argv: list[str], says: str
) -> None:
    code, out, err = cli("deadletters", *argv, **NOWHERE)
    assert code == 2 and out == ""
    assert err.startswith("sessionizer deadletters: error: ") and says in err, err
    assert "did not answer" not in err and len(err.strip().splitlines()) == 1, err


def test_a_client_error_that_names_its_class_is_not_named_twice() -> None:
    error = ClientError(
        "KafkaTimeoutError: Unable to bootstrap from 127.0.0.1:1", client_class="KafkaTimeoutError"
    )
    assert first_line(error) == "KafkaTimeoutError: Unable to bootstrap from 127.0.0.1:1"
    other = ClientError("Unable to bootstrap", client_class="KafkaTimeoutError")
    assert first_line(other) == "KafkaTimeoutError: Unable to bootstrap"
