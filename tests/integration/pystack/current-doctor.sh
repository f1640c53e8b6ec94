#!/bin/bash
# pystack/current-doctor: cli/doctor on the current ML stack (PYSTACK=current:
# jobs/requirements-current.lock, torch 2.15, transformers 5.23, PEFT
# 0.21), unchanged: make check's second pass of the fast hf tests, so that
# both stacks the job programs support are held to the same checks.
export PYSTACK=current
exec "$(dirname "$0")/../cli/doctor.sh"
