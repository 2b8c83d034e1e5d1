#!/usr/bin/env bash
# Quick start, part 2: install what is missing, build, run every test
# (unit suites, stress tests, the install/consumer test) in the dev preset.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --workflow --preset dev
