#!/bin/bash
# e2e/kill-random.sh: the tiny lifecycle, tokenize through gate, with the
# daemon killed -9 at 5 random moments of one run; it must end with the
# undisturbed run's verdict and byte-identical artifacts. The server is the one tests/lib/e2e.sh sets up (the
# Ollama stand-in today). tests/soak/kill-lifecycle.sh does the work; run
# it alone for the 20-kill version.
# run.sh: alone (kill -9 at random moments of a long run).
KILLS=5 RUNS=1 exec "$(dirname "$0")/../../soak/kill-lifecycle.sh"
