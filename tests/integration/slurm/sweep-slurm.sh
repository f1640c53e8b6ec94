#!/bin/bash
# A sweep on the slurm executor, on a real single-node Slurm
# (tests/tools/slurm-cluster.sh): each variant's training is a Slurm job
# of its own (three sbatch submissions, three Slurm job ids, each the one
# its job ran in), and the cluster runs them side by side: each variant
# waits until another has started too before it ends, so a cluster that
# ran them one at a time would fail them, and their recorded times
# overlap. The trainings ask for the gpu resource, which a slurm job
# does not hold locally (slurm/jobs), so the one gpu of the daemon's
# table does not make them take turns. The shared job before them runs
# once, each variant's bake after its own training.
# run.sh: alone (one Slurm cluster for all the slurm tests).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/slurm.sh"
trap 'pl_kill9 2>/dev/null; slurm_stop' EXIT
pl_conf "max_jobs = 8"
printf '[slurm]\npartition = debug\n' >> "$PL_CONF"
pl_start
S=$TEST_TMP/specs; mkdir -p "$S"; O=$TEST_TMP/out; mkdir -p "$O"
cat > "$S/sw.ini" <<INI
[run]
name = sw

[prep]
stage = exec
command = echo prep >> $O/prep

[train]
stage = exec
executor = slurm
after = prep
resources = gpu
env = R=4
sweep = env: R=8 R=16 R=32
command = echo "\$SLURM_JOB_ID \$(date +%s.%N)" > $O/start-\$R; for i in \$(seq 1 600); do [ \$(ls $O | grep -c '^start-') -ge 2 ] && break; sleep 0.1; done; [ \$(ls $O | grep -c '^start-') -ge 2 ] || { echo "alone after 60 s"; exit 3; }; sleep 2; echo "\$SLURM_JOB_ID \$(date +%s.%N)" > $O/end-\$R

[bake]
stage = exec
after = train
command = echo "\$PL_JOB" >> $O/bake
INI
out=$(pctl check "$S/sw.ini") || fail "check: $out"
echo "$out" | grep -qF "OK (run sw, 7 jobs)" || fail "check: $out"
pctl submit "$S/sw.ini" >/dev/null || fail "submit sw"
wait_run sw succeeded 180
[ "$(wc -l < "$O/prep")" = 1 ] || fail "prep ran $(wc -l < "$O/prep") times"
[ "$(sort "$O/bake" | tr "\n" " ")" = "bake-1 bake-2 bake-3 " ] || fail "the bakes: $(cat "$O/bake")"
ids=""
for v in 1 2 3; do
	id=$(ext_ids sw "train-$v")
	[ -n "$id" ] && [ "$(echo "$id" | wc -l)" = 1 ] || fail "train-$v: Slurm job ids '$id'"
	[ "$(slurm_state "$id")" = COMPLETED ] || fail "train-$v: Slurm says $(slurm_state "$id")"
	ids="$ids $id"
done
set -- $ids
[ "$1" != "$2" ] && [ "$2" != "$3" ] && [ "$1" != "$3" ] || fail "the variants share a Slurm job: $ids"
for r in 8 16 32; do
	read -r sid _ < "$O/start-$r"
	echo " $ids " | grep -q " $sid " || fail "variant R=$r ran in Slurm job $sid, not one stored ($ids)"
done
# Side by side: the most variants running at one time, from their
# recorded starts and ends.
most=$(for r in 8 16 32; do
	read -r _ a < "$O/start-$r"; read -r _ b < "$O/end-$r"
	echo "$a 1"; echo "$b -1"
done | sort -n | awk '{ n += $2; if (n > m) m = n } END { print m }')
note "variants as Slurm jobs$ids, at most $most at once"
[ "$most" -ge 2 ] || fail "the variants ran one at a time"
integrity_ok
events_gapless
pl_stop
echo "slurm/sweep-slurm: ok"
