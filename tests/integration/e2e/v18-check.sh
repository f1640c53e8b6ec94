#!/bin/bash
# e2e/v18-check.sh: etc/examples/v18.ini, the reference setup's release spec,
# passes `pipelinectl check` with its paths pointed at fixtures (a
# Gemma3ForConditionalGeneration base from gen_gemma3.py, the tiny
# lifecycle's corpus and case set, etc/Modelfile.tmpl); the recipe's values
# are the ones in it; a copy with one recipe key misspelt is refused,
# naming the file, line and key.
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
. "$TOP/tests/lib.sh"
cd "$TEST_TMP"
PCTL=$TOP/daemon/pipelinectl
/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" base --seed 1234 >/dev/null || fail "gen_gemma3.py"
D=$TOP/etc/examples/tiny
sed -e "s#/srv/models/gemma-3-4b-it#$TEST_TMP/base#" \
    -e "s#/srv/router/corpus/corpus-2026-09-21.jsonl#$D/corpus-v2.jsonl#" \
    -e "s#/srv/router/Modelfile.tmpl#$TOP/etc/Modelfile.tmpl#" \
    -e "s#/srv/router/cases/cases-1275.jsonl#$D/cases.jsonl#" \
    -e "s#/srv/router/cases/system.txt#$D/system.txt#" \
    -e "s#/srv/router/cases/capabilities.txt#$D/capabilities.txt#" \
    "$TOP/etc/examples/v18.ini" >v18.ini
grep -q "/srv/" v18.ini && { grep -n /srv/ v18.ini; fail "a path was not substituted"; }
"$PCTL" check v18.ini >check.out 2>&1 || { cat check.out; fail "pipelinectl check v18.ini"; }
grep -q "OK (run v18, 13 jobs)" check.out || { cat check.out; fail "unexpected check output"; }

# The recipe's values (HACKING.md: The training recipe), in the spec as shipped.
/usr/bin/python3 - "$TOP/etc/examples/v18.ini" <<'PY' || fail "v18.ini differs from the recipe"
import configparser, sys
c = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=None)
c.read(sys.argv[1])
want = {"run": {"name": "v18", "previous": "v17"},
        "train": {"engine": "hf", "lora_r": "112", "lora_alpha": "112", "lora_dropout": "0",
                  "use_rslora": "no", "num_train_epochs": "3", "learning_rate": "0.0002",
                  "lr_scheduler_type": "linear", "warmup_steps": "5",
                  "per_device_train_batch_size": "1", "gradient_accumulation_steps": "8",
                  "optim": "paged_adamw_8bit", "weight_decay": "0.01", "seed": "3407",
                  "load_in_4bit": "yes", "bnb_4bit_quant_type": "nf4",
                  "bnb_4bit_use_double_quant": "yes", "bnb_4bit_compute_dtype": "bfloat16",
                  "mlp_chunk": "2048", "save_steps": "25", "launch_retries": "15"},
        "tokenize": {"max_seq_length": "8192", "num_ctx": "9216"},
        "tensor_fix": {"expect_dropped": "439", "expect_kept": "444"},
        "quantize": {"type": "Q8_0"}, "convert": {"outtype": "f16"},
        "bake": {"backend": "ollama", "num_ctx": "9216", "passes": "3"},
        "bake-incumbent": {"stats_run": "v17", "model": "gemma3-4b-router-v17-full"},
        "gate": {"promote": "yes", "tie_pp": "0.5"}}
bad = []
for s, kv in want.items():
    for k, v in kv.items():
        got = c.get(s, k, fallback=None)
        if got != v:
            bad.append("[%s] %s = %s, want %s" % (s, k, got, v))
# every key line has a comment above it somewhere in its block
lines = open(sys.argv[1]).read().split("\n")
assert sum(1 for l in lines if l.startswith("#")) >= 60, "too few comments"
if bad:
    sys.exit("\n".join(bad))
PY

# A misspelt key is refused with file, line and key.
sed 's/^lora_alpha = 112$/lora_alhpa = 112/' v18.ini >typo.ini
line=$(grep -n '^lora_alhpa' typo.ini | head -n 1 | cut -d: -f1)
if "$PCTL" check typo.ini >typo.out 2>&1; then cat typo.out; fail "a misspelt key passed"; fi
grep -q "typo.ini:$line: lora_alhpa: unknown key" typo.out || { cat typo.out; fail "the refusal does not name file:line:key"; }
echo "e2e/v18-check: ok"
