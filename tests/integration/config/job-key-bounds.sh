#!/bin/bash
# config/job-key-bounds: a key's bounds and choices are defined once, in
# the C key table of its stage, and the job programs refuse a value
# outside them as pipelinectl check refuses it in a spec, in the same
# words naming the key.  For every key with a bound or choices of every
# stage whose work is a job program (jobs/pljob/keys.py: train, probe,
# tokenize), a value outside them goes into a spec for pipelinectl check
# and into a CONFIG.json read through pljob.Config: the check's line
# "FILE:LINE: KEY: WHY" and the job's "CONFIG: key KEY: WHY" must give the
# same WHY.  Then tokenize_corpus.py itself, run as the stage runs it, with
# max_seq_length = 1 (its minimum, 2, is the C table's): it exits 2 with
# the check's words.
set -eu
. "$(dirname "$0")/../../lib.sh"
PY=/usr/bin/python3
CTL=$TOP/daemon/pipelinectl
cd "$TEST_TMP"

mkdir -p base
echo '{"architectures": ["Gemma3ForCausalLM"]}' >base/config.json
: >tokens.npz
printf '{"key": "k%d", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}\n' \
    1 2 3 4 5 >corpus.jsonl

# The out-of-range values, one section per stage: a spec for check and a
# CONFIG.json per stage for the job side.
$PY - "$TOP/jobs" "$TEST_TMP" <<'PY' || fail "writing the spec"
import json, sys
sys.path.insert(0, sys.argv[1])
from pljob import keys
tmp = sys.argv[2]
need = {"base": tmp + "/base", "tokens": tmp + "/tokens.npz", "corpus": tmp + "/corpus.jsonl"}
spec = ["[run]", "name = bounds"]
cases = []
for stage, table in sorted(keys.STAGES.items()):
    spec += ["", "[%s]" % stage, "stage = %s" % stage]
    spec += ["%s = %s" % (k, v) for k, v in need.items() if k in table]
    cfg = {k: v for k, v in need.items() if k in table}
    for key, ent in sorted(table.items()):
        # (type, default, min, max, choices, ...): pljob.keys.K
        lo, hi, choices = ent[2], ent[3], ent[4] if len(ent) > 4 else None
        if choices:
            bad = "bogus"
        elif lo is not None:
            bad = lo - 1
        elif hi is not None:
            bad = hi + 1
        else:
            continue
        spec.append("%s = %s" % (key, bad))
        # As the plugin writes it: numbers as JSON numbers (pyjob.c).
        cfg[key] = bad
        cases.append((stage, key))
    with open("%s/%s.json" % (tmp, stage), "w") as f:
        json.dump(cfg, f)
open(tmp + "/bounds.ini", "w").write("\n".join(spec) + "\n")
json.dump(cases, open(tmp + "/cases.json", "w"))
PY

out=$("$CTL" check bounds.ini 2>&1) && fail "check accepted the out-of-range values"
echo "$out" >check.out

$PY - "$TOP/jobs" "$TEST_TMP" <<'PY' || fail "the job side's refusals differ from check's"
import json, re, sys
sys.path.insert(0, sys.argv[1])
import pljob
tmp = sys.argv[2]
cases = json.load(open(tmp + "/cases.json"))
# check's lines, by section: "bounds.ini:LINE: KEY: WHY", the section
# known from the line (the spec is written one section after another).
lines = open(tmp + "/bounds.ini").read().splitlines()
section = {}
cur = None
for n, l in enumerate(lines, 1):
    if l.startswith("["):
        cur = l.strip("[]")
    section[n] = cur
said = {}
for l in open(tmp + "/check.out").read().splitlines():
    m = re.match(r".*bounds\.ini:(\d+): ([a-z_0-9]+): (.*)$", l)
    if m:
        said.setdefault((section[int(m.group(1))], m.group(2)), []).append(m.group(3))
bad, seen = [], set()
for stage, key in cases:
    seen.add((stage, key))
    c = pljob.Config(json.load(open("%s/%s.json" % (tmp, stage))), "%s.json" % stage)
    c.use_keys(stage)
    try:
        c.value(key)
    except pljob.BadInput as e:
        msg = str(e)
    except Exception as e:
        bad.append("%s.%s: the job side cannot read it: %r" % (stage, key, e))
        continue
    else:
        bad.append("%s.%s: the job side accepted %r" % (stage, key, c.data[key]))
        continue
    prefix = "%s.json: key %s: " % (stage, key)
    if not msg.startswith(prefix):
        bad.append("%s.%s: the job's message does not name the key: %s" % (stage, key, msg))
        continue
    why = msg[len(prefix):]
    if why not in said.get((stage, key), []):
        bad.append("%s.%s: the job says %r, check says %r" % (stage, key, why, said.get((stage, key))))
# The cases must hold what the C tables bound, or this proves nothing.
for want in (("tokenize", "max_seq_length"), ("tokenize", "tokenizer"), ("train", "lora_r"),
             ("train", "dtype"), ("probe", "lora_dropout"), ("train", "per_device_train_batch_size")):
    if want not in seen:
        bad.append("no case for %s.%s: its bound is not in the table" % want)
if bad:
    sys.exit("\n".join(bad))
print("%d bounded keys refused alike by check and the job side" % len(cases))
PY

# The job program itself, as the stage runs it: its refusal is an error
# event and exit status 2, in check's words.
grep -q 'bounds.ini:[0-9]*: max_seq_length: 1 is out of range: must be 2 or more$' check.out ||
    fail "check: max_seq_length = 1: $(grep max_seq_length check.out)"
printf '{"base": "%s/base", "corpus": "%s/corpus.jsonl", "max_seq_length": 1}\n' "$TEST_TMP" "$TEST_TMP" >tok.json
rc=0
PL_WORKDIR=$TEST_TMP $PY "$TOP/jobs/tokenize_corpus.py" --config tok.json --events tok.events || rc=$?
[ $rc = 2 ] || fail "tokenize_corpus.py with max_seq_length 1 exited $rc, not 2: $(cat tok.events)"
grep -qF '"message":"tok.json: key max_seq_length: 1 is out of range: must be 2 or more"' tok.events ||
    fail "tokenize_corpus.py's refusal: $(cat tok.events)"
# The help lists a key's choices with its default.
"$CTL" stage tokenize --help | grep -q '^  tokenizer .*(auto|sentencepiece|hf) (default: auto)$' ||
    fail "stage tokenize --help does not list the tokenizer's choices: $("$CTL" stage tokenize --help)"
"$CTL" --json stage tokenize --help | $PY -c '
import json, sys
keys = {k["name"]: k for k in json.load(sys.stdin)["keys"]}
assert keys["tokenizer"]["choices"] == "auto|sentencepiece|hf", keys["tokenizer"]
assert "choices" not in keys["threads"], keys["threads"]' || fail "stage tokenize --help --json: the choices"
echo "config/job-key-bounds: ok"
