#!/bin/bash
# merge/peft.sh: the merge stage against real PEFT (from the ML stack
# PYSTACK names, tests/tools/pyenv.sh: peft 0.20 on the recipe's, 0.21 on
# the current one; the log names it), on the tiny
# conditional fixture. PEFT itself makes each adapter (get_peft_model on
# the base loaded with real transformers, seeded random LoRA weights,
# save_pretrained: PEFT's own key layout), then PeftModel.from_pretrained
# and merge_and_unload merge it; `pipelinectl stage merge` merges the same
# adapter, and every tensor of ours must be within one bf16 ulp of PEFT's
# (the largest difference per tensor printed). Kinds: plain (the seven
# targets by name, which PEFT also finds in the vision tower's q/k/v),
# rsLoRA with BF16 LoRA weights, rank_pattern and alpha_pattern,
# modules_to_save (embed_tokens), and a regex targeting the vision tower's
# attention (out_proj included).
. "$(dirname "$0")/../../lib.sh"
trap - EXIT
PY=$("$TOP/tests/tools/pyenv.sh" --python) || fail "tests/tools/pyenv.sh failed"
stack_note "$PY"
O=$TOP/tests/fixtures/peft_oracle.py
cd "$TEST_TMP" || exit 1
/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" base >gen.log 2>&1 || { cat gen.log; fail "fixture"; }
kinds="plain rslora patterns modules_to_save vision"
# shellcheck disable=SC2086
"$PY" "$O" make base po $kinds >make.log 2>&1 || { tail -20 make.log; fail "PEFT: making the adapters"; }
for k in $kinds; do
	"$PIPELINECTL" stage merge -w "$TEST_TMP/w-$k" base=base adapter=po/$k/adapter \
	    output="$TEST_TMP/ours-$k" >merge-$k.out 2>&1 || { cat merge-$k.out; fail "$k: merge failed"; }
	"$PY" "$O" compare ours-$k po/$k/peft/model.safetensors base >cmp-$k.out ||
	    { grep -v ' [01] ulp$' cmp-$k.out; fail "$k: more than 1 ulp from PEFT's merge_and_unload"; }
	# What each adapter must have changed, so that agreement is not vacuous.
	case $k in
	plain|rslora|patterns) want=34 ;;	# 4 layers x 7, and 2 vision layers x q/k/v
	modules_to_save) want=13 ;;		# 4 x q/v, 2 x vision q/v, embed_tokens
	vision) want=36 ;;			# 4 x 7, 2 x vision q/k/v/out_proj
	esac
	grep -q "^compare: 93 tensors, $want merged, " cmp-$k.out ||
	    { tail -1 cmp-$k.out; fail "$k: not $want tensors merged"; }
	grep -q 'vision_tower.*self_attn.q_proj.weight: BF16 .*, largest difference [01] ulp$' cmp-$k.out ||
	    fail "$k: no vision-tower tensor compared"
	note "$k: $(tail -1 cmp-$k.out | sed 's/^compare: //')"
	awk -F': ' '/ ulp$/ && $NF !~ / 0 ulp$/ {print "#   " $0}' cmp-$k.out | head -5
done
grep -q '^lm_head.weight: only in PEFT.s output, the base.s model.language_model.embed_tokens.weight (untied)' \
    cmp-modules_to_save.out || fail "modules_to_save: lm_head not as described"
note "modules_to_save: PEFT leaves lm_head on the original embedding; the stage keeps the tie"
