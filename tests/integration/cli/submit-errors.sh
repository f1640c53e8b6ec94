#!/bin/bash
# pipelinectl prints a spec's errors as check does, whole:
#   - submit prints the daemon's refusal one error a line, as check prints
#     the same spec's errors (no "\x0a" in a line, no code after the list),
#     and with --json one line of "errors" per error;
#   - an unknown key's message lists the stage's keys to the end, or says
#     in words how many it leaves out ("and N more"), in text and in JSON:
#     the train stage's keys (`pipelinectl stage train --help`) with a
#     misspelt key, whose did-you-mean made the list too long for an error.
# Runs against the real daemon and CLI of this tree.
. "$(dirname "$0")/../../lib.sh"
cd "$TEST_TMP"
pl_start
cat >"$TEST_TMP/bad.ini" <<INI
[run]
name = bad
[t]
stage = train
base = $TEST_TMP
lerning_rate = 1
[e]
stage = exec
command = true
retries = many
bogus = 2
[x]
stage = exec
after = nosuch
INI
pctl check "$TEST_TMP/bad.ini" >check.out 2>check.err && fail "check passed a bad spec"
pctl submit "$TEST_TMP/bad.ini" >submit.out 2>submit.err && fail "submit took a bad spec"
n=$(grep -c . check.err)
[ "$n" -ge 5 ] || fail "check printed $n lines: $(cat check.err)"
grep -q 'x0a' submit.err && fail "submit printed the errors on one line: $(head -c 300 submit.err)"
# The same lines, but for the verb named on the first.
sed '1s/^pipelinectl: check: /pipelinectl: submit: /' check.err | diff -u - submit.err ||
    fail "submit does not print the errors as check does"
pctl --json submit "$TEST_TMP/bad.ini" >submit.json
pctl --json check "$TEST_TMP/bad.ini" >check.json
/usr/bin/python3 - check.json submit.json "$n" <<'EOF' || fail "the JSON errors differ: $(cat submit.json)"
import json, sys
c, s = (json.loads(open(f).readline()) for f in sys.argv[1:3])
assert s["ok"] is False and s["code"] == "EINVAL" and s["exit"] == 1, s
assert c["errors"] == s["errors"], (c["errors"], s["errors"])
assert len(s["errors"]) == int(sys.argv[3]), s["errors"]
EOF

# The unknown key's list: every key of the stage, or "and N more" for
# those left out, ended with the keys of every job.
pctl stage train --help | sed -n 's/^  \([a-z0-9_]*\) .*/\1/p' >keys.txt
[ "$(wc -l <keys.txt)" -ge 40 ] || fail "stage train --help lists few keys: $(cat keys.txt)"
cat >listed.py <<'EOF'
import json, re, sys
keys = open("keys.txt").read().split()
src = sys.argv[1]
if src.endswith(".json"):
    lines = json.loads(open(src).readline())["errors"]
else:
    lines = open(src).read().splitlines()
line = [l for l in lines if "lerning_rate: unknown key for stage train" in l]
assert len(line) == 1, "no unknown-key error"
line = line[0]
assert 'did you mean "learning_rate"?' in line, line
m = re.search(r"\(known: (.*); every job: ([a-z_, ]*)\)$", line)
assert m, "no whole (known: ...; every job: ...) at the end"
listed = m.group(1)
more = re.search(r", and (\d+) more \(`pipelinectl stage train --help` lists them\)$", listed)
names = (listed[:more.start()] if more else listed).split(", ")
assert all(n in keys for n in names), [n for n in names if n not in keys]
left = len(keys) - len(names)
assert left == (int(more.group(1)) if more else 0), (left, more and more.group(0))
assert m.group(2).split(", ")[-1] == "sbatch_options", m.group(2)
EOF
for f in check.err submit.err check.json submit.json; do
	/usr/bin/python3 listed.py "$f" ||
	    fail "$f: the known list is cut or wrong: $(grep -o 'lerning_rate: unknown.*' "$f" | head -c 1500)"
done
pl_stop
echo ok
