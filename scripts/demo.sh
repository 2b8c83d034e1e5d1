#!/usr/bin/env bash
# Quick start, part 1: install what is missing, build, run the demo.
#   scripts/demo.sh [--trace FILE]      the training demo (pathways-demo)
#   scripts/demo.sh --elastic [ARGS]    elastic training: a slice lost and
#                                       regained (pathways-elastic)
#   scripts/demo.sh --remote [ARGS]     the elastic training across 4
#                                       pathways-worker processes, a worker
#                                       killed and restarted
#                                       (pathways-elastic-remote)
set -euo pipefail
cd "$(dirname "$0")/.."
demo=pathways-demo
if [ "${1:-}" = "--elastic" ]; then
  demo=pathways-elastic
  shift
elif [ "${1:-}" = "--remote" ]; then
  demo=pathways-elastic-remote
  shift
fi
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target "$demo"
exec "build/release/examples/$demo" "$@"
