#!/bin/bash
# tests/bench/run.sh: `make bench`: every benchmark script, figures only.
cd "$(dirname "$0")"
for b in *-bench.sh; do echo "== $b"; ./"$b" || echo "($b failed)"; done
