#!/bin/sh
# sbatch_slow_standin.sh: a stand-in for Slurm's sbatch --parsable that
# takes long to answer (a busy slurmctld; the daemon waits up to 30 s),
# for unit/priv's slurm_slow: it leaves "started" beside itself, reads
# the batch script on its standard input, sleeps 5 s and answers job id
# 4243. Installed as bin_dir/sbatch by the test.
d=$(dirname "$0")
: > "$d/started"
cat > /dev/null
sleep 5
echo 4243
