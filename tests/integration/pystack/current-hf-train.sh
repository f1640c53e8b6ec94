#!/bin/bash
# pystack/current-hf-train: train/hf-train on the current ML stack (PYSTACK=current:
# jobs/requirements-current.lock, torch 2.15, transformers 5.23, PEFT
# 0.21), unchanged: make check's second pass of the fast hf tests, so that
# both stacks the job programs support are held to the same checks.
# run.sh: alone (as train/hf-train: the hf engine on every core, killed and resumed).
export PYSTACK=current
exec "$(dirname "$0")/../train/hf-train.sh"
