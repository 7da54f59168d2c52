#!/bin/sh
# The image's smoke test: the CLI starts, says its version, and every command
# builds its help. deploy/Dockerfile runs it right after `pip install`, and
# tests/integration/test_plain_install.py runs it against a plain, extras-free
# install in a fresh virtualenv, so a command that needs a test-only or optional
# package fails both. tests/unit/test_deploy_cli_drift.py checks that the list
# below is every command `sessionizer` has (one per line, as it reads them).
set -eu

sessionizer --version
python -m sessionizer --version
sessionizer --help > /dev/null
for command in \
    "cluster" \
    "cluster up" \
    "cluster down" \
    "streams" \
    "streams create" \
    "streams resize" \
    "streams reset" \
    "produce" \
    "generate" \
    "status" \
    "node" \
    "sessions" \
    "aggregate" \
    "demo" \
    "deadletters" \
    ; do
    # $command unquoted: "cluster up" is two words.
    # shellcheck disable=SC2086
    sessionizer $command --help > /dev/null || {
        echo "smoke test: \`sessionizer $command --help\` failed" >&2
        exit 1
    }
done
echo "smoke test: sessionizer starts and every command has its help"
