#!/bin/bash
# train/job-keys: one definition of every job program's key.  The train,
# probe and tokenize plugins' C key tables (trainkeys.h and their own keys)
# are the source; jobs/pljob/keys.py is generated from the built plugins
# (tests/tools/gen-jobkeys.sh, make jobkeys) and this test fails when it is
# stale, or when a changed default would go unnoticed by the check.  The
# job programs (train.py, probe.py, the engines, tokenize_corpus.py) read
# every key through that table: a key the table lacks, a default, bound or
# choice written in Python, or a read of another type fails here,
# statically for every call and at run time (config/job-key-bounds: the
# bounds and choices refused in check's words).
# lora_r's default is the table's 112 for both engines (tiny.py had 16).
# The model's dtype is a key of its own (dtype), apart from what the 4-bit
# layers compute in (bnb_4bit_compute_dtype): check refuses an unknown
# value of either, and a bnb_4bit_compute_dtype other than dtype without
# load_in_4bit (it once set the model's dtype, and would now be ignored);
# train/hf-dtype loads the model in each.
set -eu
. "$(dirname "$0")/../../lib.sh"
PY=/usr/bin/python3
cd "$TEST_TMP"

"$TOP/tests/tools/gen-jobkeys.sh" --check || fail "jobs/pljob/keys.py is stale"
# The check must be able to fail: a default changed in the file.
sed 's/"lora_r": K("int", "112"/"lora_r": K("int", "16"/' "$TOP/jobs/pljob/keys.py" >stale.py
cmp -s stale.py "$TOP/jobs/pljob/keys.py" && fail "the lora_r entry was not found to change"
"$TOP/tests/tools/gen-jobkeys.sh" --check stale.py 2>stale.err && fail "a stale keys.py passed the check"
grep -q 'is stale' stale.err || fail "the stale check does not say so: $(cat stale.err)"

# Every key the programs read, and no default written in Python for a key
# the table gives one, nor a bound or choices (they are the table's).
$PY - "$TOP/jobs" <<'PY' || fail "static key check"
import ast, os, sys
jobs = sys.argv[1]
sys.path.insert(0, jobs)
from pljob import keys

ACCESSORS = {"str", "int", "float", "bool", "choice", "path_in", "has"}
# choice takes the choices second; the others the default.
DEFAULT_AT = {"str": 1, "int": 1, "float": 1, "bool": 1, "choice": 2}


def reads(path):
    """(line, accessor, key, explicit default or None) of every cfg read."""
    out = []
    for n in ast.walk(ast.parse(open(path).read(), path)):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in ACCESSORS):
            continue
        v = n.func.value
        if not ((isinstance(v, ast.Name) and v.id == "cfg") or
                (isinstance(v, ast.Attribute) and v.attr == "cfg")):
            continue
        if not n.args or not isinstance(n.args[0], ast.Constant):
            sys.exit("%s:%d: a key read whose key is not a literal" % (path, n.lineno))
        d = None
        i = DEFAULT_AT.get(n.func.attr)
        if i is not None and len(n.args) > i:
            d = n.args[i]
        for kw in n.keywords:
            if kw.arg == "default":
                d = kw.value
        own = [kw.arg for kw in n.keywords if kw.arg in ("min", "max", "choices")]
        if n.func.attr == "choice" and len(n.args) > 1:
            own.append("choices")
        out.append((n.lineno, n.func.attr, n.args[0].value, d, own))
    return out


engines = [os.path.join(jobs, "engines", f) for f in ("tiny.py", "hf.py", "prefix.py", "base.py")]
programs = {"train": [os.path.join(jobs, "train.py")] + engines,
            "probe": [os.path.join(jobs, "probe.py")] + engines,
            "tokenize": [os.path.join(jobs, "tokenize_corpus.py")]}
bad, seen = [], set()
for stage, files in programs.items():
    table = keys.STAGES[stage]
    for f in files:
        for line, acc, key, d, own in reads(f):
            seen.add(key)
            where = "%s:%d" % (os.path.relpath(f, jobs), line)
            if key not in table:
                bad.append("%s: reads key %s, which the %s stage's table lacks" % (where, key, stage))
            elif d is not None and table[key][1] is not None:
                bad.append("%s: key %s: a default (%s) written beside the table's %r"
                           % (where, key, ast.unparse(d), table[key][1]))
            if own:
                bad.append("%s: key %s: %s written beside the table's" % (where, key, ", ".join(own)))
# The scan must see the programs' reads, or it proves nothing.
for k in ("lora_r", "learning_rate", "save_steps", "example_key", "bnb_4bit_quant_type", "gpu_capacity_mb",
          "max_seq_length", "tokenizer"):
    if k not in seen:
        bad.append("the scan did not find the read of %s" % k)
if bad:
    sys.exit("\n".join(sorted(set(bad))))
# The engines and the shared-prefix modes the programs know are the
# table's choices.
import engines
from engines import prefix
for stage in ("train", "probe"):
    if tuple(engines.ENGINES) != keys.STAGES[stage]["engine"].choices:
        bad.append("engines.ENGINES %s, the %s table's engine choices %s"
                   % (engines.ENGINES, stage, keys.STAGES[stage]["engine"].choices))
    if tuple(prefix.MODES) != keys.STAGES[stage]["shared_prefix"].choices:
        bad.append("engines.prefix.MODES %s, the %s table's choices %s"
                   % (prefix.MODES, stage, keys.STAGES[stage]["shared_prefix"].choices))
if bad:
    sys.exit("\n".join(sorted(set(bad))))
print("5f: %d keys read by train.py, probe.py, the engines and tokenize_corpus.py, all in the tables"
      % len(seen))
PY

# At run time: the table's defaults, and refusals of what it lacks.
$PY "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null
$PY - "$TOP/jobs" "$TEST_TMP/base" <<'PY' || fail "run-time key checks"
import sys
sys.path.insert(0, sys.argv[1])
import pljob
from engines import tiny

c = pljob.Config({"engine": "tiny", "lora_r": ""}, "t.json")
c.use_keys("train")
assert c.int("lora_r") == 112, c.int("lora_r")
assert c.float("learning_rate") == 2e-4 and c.bool("use_rslora") is False
assert c.float("lora_alpha", 5.0) == 5.0     # no default in the table: the program's
assert c.int("save_steps") == 25
p = pljob.Config({}, "p.json")
p.use_keys("probe")
b = pljob.Config({"lora_r": 0}, "b.json")
b.use_keys("train")
for call, exc, want in (
        (lambda: c.int("lora_rank"), pljob.JobError, "t.json: key lora_rank is not in the train stage's key table"),
        (lambda: c.int("lora_r", 16), pljob.JobError, "differs from the train stage's key table's '112'"),
        (lambda: c.float("lora_r"), pljob.JobError, "read as float, the train stage's key table declares it int"),
        (lambda: c.bool("engine"), pljob.JobError, "t.json: key engine is read as bool"),
        (lambda: p.int("save_steps"), pljob.JobError, "p.json: key save_steps is not in the probe stage's"),
        # Bounds and choices come from the table too (lora_r: PL_KEY_MIN 1),
        # and a program giving its own is refused.
        (lambda: b.int("lora_r"), pljob.BadInput, "b.json: key lora_r: 0 is out of range: must be 1 or more"),
        (lambda: c.int("lora_r", min=2), pljob.JobError, "key lora_r: bounds given beside the train stage's"),
        (lambda: c.choice("engine", ("tiny",)), pljob.JobError, "key engine: choices given beside")):
    try:
        call()
    except exc as e:
        assert want in str(e), str(e)
    else:
        raise AssertionError("no refusal: " + want)
# Both engines take lora_r's default from the table: the tiny engine run by
# hand without the key trains rank 112, as the stage (and hf) do.
e = tiny.TinyEngine(pljob.Config({"engine": "tiny", "base": sys.argv[2]}), None)
assert e.r == 112 and e.alpha == 112.0 and e.threads == 1, (e.r, e.alpha)
print("5f: defaults and refusals ok")

# train.py's configuration digest is derived from the table's
# PL_KEY_CHECKPOINT keys; it must stay what the hand-made list of keys it
# replaced gave for the same configuration, or every checkpoint made before
# would be refused on resume.  The two digests were computed by that list.
import train
stack = {"stack": "recipe", "lock": "x", "lock_sha256": "ab", "torch": "2.1", "transformers": None,
         "peft": None, "bitsandbytes": None, "accelerate": None, "python": "3.11"}
for data, want in (
        ({"engine": "tiny"}, "d3c88115ddc9136914582553d98075a52dc5139d975067de3c9c29e30edb46fe"),
        ({"engine": "hf", "lora_r": "8", "learning_rate": "0.001", "threads": 4, "use_rslora": "yes",
          "dtype": "float32", "load_in_4bit": False, "lora_alpha": "16"},
         "d9b375a59c94a6ceaf67a455815677d5103628577430811ffd5fa6c335dae6ff")):
    c = pljob.Config(data, "d.json")
    c.use_keys("train")
    got, keys_ = train.config_digest(c, "0" * 64, stack)
    assert got == want, "config digest of %s changed: %s, was %s (keys %s)" % (data, got, want, sorted(keys_))
# A key the checkpoint does not record leaves the digest alone; one it
# records changes it.
c = pljob.Config({"engine": "tiny", "shared_prefix": "no", "save_steps": 3}, "d.json")
c.use_keys("train")
assert train.config_digest(c, "0" * 64, stack)[0] == "d3c88115ddc9136914582553d98075a52dc5139d975067de3c9c29e30edb46fe"
c = pljob.Config({"engine": "tiny", "seed": 1}, "d.json")
c.use_keys("train")
assert train.config_digest(c, "0" * 64, stack)[0] != "d3c88115ddc9136914582553d98075a52dc5139d975067de3c9c29e30edb46fe"
print("5f: the configuration digest is the hand-made list's")
PY

# The dtype keys, through check (train's and probe's tables alike).
mkdir -p dbase
echo '{"architectures": ["Gemma3ForCausalLM"]}' >dbase/config.json
: >tokens.npz
dspec() {	# dspec FILE KEY=VALUE...: a train and a probe job with these keys
	{
		printf '[run]\nname = d\n'
		for s in probe train; do
			printf '[%s]\nstage = %s\nengine = hf\nbase = %s/dbase\ntokens = %s/tokens.npz\n' \
			    "$s" "$s" "$TEST_TMP" "$TEST_TMP"
			[ "$s" = probe ] && printf 'budget_mb = 100000\n'
			for kv in "${@:2}"; do printf '%s\n' "${kv/=/ = }"; done
		done
	} >"$1"
}
CTL=$TOP/daemon/pipelinectl
dspec ok.ini load_in_4bit=no dtype=float32
"$CTL" check ok.ini >/dev/null || fail "check refused dtype = float32: $("$CTL" check ok.ini 2>&1)"
dspec ok4.ini dtype=float32 bnb_4bit_compute_dtype=float16
"$CTL" check ok4.ini >/dev/null || fail "check refused 4-bit with its own compute dtype"
dspec auto.ini dtype=auto load_in_4bit=no bnb_4bit_compute_dtype=bfloat16
"$CTL" check auto.ini >/dev/null || fail "check refused dtype = auto"
dspec bad.ini dtype=double bnb_4bit_compute_dtype=int8
out=$("$CTL" check bad.ini 2>&1) && fail "check accepted dtype = double"
echo "$out" | grep -q 'bad.ini:[0-9]*: dtype: "double" is not auto, float32, bfloat16 or float16' ||
    fail "dtype = double: $out"
echo "$out" | grep -q 'bad.ini:[0-9]*: bnb_4bit_compute_dtype: "int8" is not bfloat16, float16 or float32' ||
    fail "bnb_4bit_compute_dtype = int8: $out"
dspec old.ini load_in_4bit=no bnb_4bit_compute_dtype=float32
out=$("$CTL" check old.ini 2>&1) && fail "check accepted bnb_4bit_compute_dtype = float32 without 4-bit"
[ "$(echo "$out" | grep -c 'old.ini:[0-9]*: bnb_4bit_compute_dtype: float32 has no effect with load_in_4bit = no: the model.s dtype is the dtype key (bfloat16); set dtype = float32')" = 2 ] ||
    fail "the old way of asking for a float32 model: $out"
echo "train/job-keys: ok"
