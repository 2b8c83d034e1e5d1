#!/usr/bin/env bash
# Quick start, part 1: install what is missing, build, run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target pathways-demo
exec build/release/examples/pathways-demo "$@"
