#!/usr/bin/env bash
# The hostile-store suite (docs/hostile-stores.md): generates crafted stores (decompression
# bombs, wrong-size chunks, huge metadata, lying shard indexes, special files, traversal
# keys, overlapping copies, two writers, unwritable output) and runs every zarrbuf command
# on them with the release binary under a memory cap and a timeout, then prints one row
# per class: cases, peak memory (max RSS), outcomes.
#
#   scripts/hostile-suite.sh                  # strict: exit 1 on any case that fails
#   scripts/hostile-suite.sh --report         # print the table and failing cases, exit 0
#   scripts/hostile-suite.sh --class bombs -v # one class, a line per case
#   scripts/hostile-suite.sh --list           # the cases and what each must do
#
# ZARRBUF_BIN names the binary to test (default: target/release/zarrbuf, built here first).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ZARRBUF_BIN:-}" ]; then
    cargo build --release --bin zarrbuf --quiet
    ZARRBUF_BIN=$PWD/target/release/zarrbuf
fi
python=.venv/bin/python
if [ ! -x "$python" ]; then
    echo "hostile suite: $python is missing; run scripts/setup-python-env.sh (numpy, numcodecs, crc32c)" >&2
    exit 2
fi
exec "$python" tests/hostile/suite.py --bin "$ZARRBUF_BIN" "$@"
