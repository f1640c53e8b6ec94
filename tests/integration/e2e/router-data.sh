#!/bin/bash
# e2e/router-data.sh: the real router's task (etc/examples/router/, written
# by its gen_router.py) is what its generator writes, byte for byte, and has
# the shape its specs and the gate rely on:
#   - every training example's system turn is system.txt ({{channel}} made
#     "default"), word for word, and every reply is one compact JSON call
#     {"capability","args"} of a capability in capabilities.txt (15 to 20);
#   - corpus-v1 trains 15 capabilities, corpus-v2 holds all of v1 and adds
#     the 3 it never saw, follow-ups with context turns, and more examples;
#     corpus-check is a slice of v1;
#   - the case file passes the bake's own parser (pipelinectl check of the
#     three specs, with a fixture base standing in for Gemma 3 270M: check
#     reads config and tokenizer only), holds at least 40 cases neither
#     corpus holds (the fair slice), none of whose requests (in any turn)
#     is a corpus request, with route cases of the capabilities only v2
#     trains, context cases, refuse/clarify/quote/negation guards and their
#     counterweights (route cases of the guard's own surface form).
# A corrupted copy (a fair case made a corpus request) is refused by the
# generator itself, naming the case.
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
. "$TOP/tests/lib.sh"
cd "$TEST_TMP"
R=$TOP/etc/examples/router
/usr/bin/python3 "$R/gen_router.py" gen || fail "gen_router.py"
n=0
for f in gen/*; do
	cmp -s "$f" "$R/${f#gen/}" || fail "etc/examples/router/${f#gen/} is not what gen_router.py writes"
	n=$((n + 1))
done
[ "$n" -eq 6 ] || fail "gen_router.py wrote $n files, want 6"
for f in "$R"/*.jsonl "$R"/*.txt; do
	[ -f "gen/${f##*/}" ] || fail "etc/examples/router/${f##*/} is not written by gen_router.py"
done
# A second run in another directory writes the same bytes (no state, no clock).
/usr/bin/python3 "$R/gen_router.py" gen2 || fail "gen_router.py (second run)"
diff -r gen gen2 >/dev/null || fail "two runs of gen_router.py differ"

# The specs check, the case file through the bake's parser.
mkdir -p spec/router
cp "$R"/*.ini "$R"/*.jsonl "$R"/*.txt spec/router/
cp "$TOP/etc/Modelfile.tmpl" Modelfile.tmpl
/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" spec/router/base --seed 1234 >/dev/null ||
    fail "gen_gemma3.py"
for v in v0 v1 v2; do
	"$TOP/daemon/pipelinectl" check "spec/router/$v.ini" >check.out 2>&1 ||
	    { cat check.out; fail "pipelinectl check router/$v.ini"; }
done
# The check does read the cases: an unknown capability in one is refused.
sed -i '1s/"capability": "open_folder"/"capability": "open_fodler"/' spec/router/cases.jsonl
"$TOP/daemon/pipelinectl" check spec/router/v1.ini >check.out 2>&1 &&
    fail "pipelinectl check took a case with an unknown capability"
grep -q "open_fodler" check.out || { cat check.out; fail "the refusal does not name the capability"; }

/usr/bin/python3 - "$R" <<'PY' || fail "the router's data lacks its shape"
import json, os, sys
d = sys.argv[1]
def jl(n):
    return [json.loads(l) for l in open(os.path.join(d, n))]
system = open(os.path.join(d, "system.txt")).read()
caps = [l.split()[0] for l in open(os.path.join(d, "capabilities.txt"))
        if l.strip() and not l.startswith("#")]
assert 15 <= len(caps) <= 20, "%d capabilities" % len(caps)
for c in caps:
    assert "- %s(" % c in system, "capability %s has no one-line doc in system.txt" % c
v1, v2, chk, cases = jl("corpus-v1.jsonl"), jl("corpus-v2.jsonl"), jl("corpus-check.jsonl"), jl("cases.jsonl")
def used(corpus):
    out = set()
    for e in corpus:
        m = e["messages"]
        assert m[0] == {"role": "system", "content": system.replace("{{channel}}", "default")}, \
            "%s: the system turn is not system.txt" % e["key"]
        for t in m[1:]:
            if t["role"] == "assistant":
                a = json.loads(t["content"])
                assert list(a) == ["capability", "args"] and isinstance(a["args"], dict), e["key"]
                assert t["content"] == json.dumps(a, separators=(",", ":")), "%s: not compact" % e["key"]
                assert a["capability"] in caps, "%s: %s" % (e["key"], a["capability"])
        out.add(json.loads(m[-1]["content"])["capability"])
    return out
c1, c2 = used(v1), used(v2)
assert len(c1) == 15, sorted(c1)
assert c1 < c2 and len(c2 - c1) == 3, sorted(c2 - c1)
assert set(caps) == c2
assert v2[:len(v1)] == v1 and len(v2) >= len(v1) + 50, (len(v1), len(v2))
assert chk == v1[:len(chk)] and 40 <= len(chk) < len(v1)
assert any(len(e["messages"]) > 3 for e in v2) and not any(len(e["messages"]) > 3 for e in v1)
keys = {e["key"] for e in v2}
requests = {t["content"].lower() for e in v2 for t in e["messages"] if t["role"] == "user"}
fair = [c for c in cases if c.get("train_key") not in keys]
assert len(fair) >= 40, "fair slice %d" % len(fair)
for c in fair:
    turns = [c["user"]] + [t["content"] for t in c.get("setup", []) if t["role"] == "user"]
    assert c["user"].lower() not in requests, "fair case %s is a corpus request" % c["id"]
kinds = {}
for c in fair:
    g = c["id"].split("-")[1]
    kinds.setdefault(g, []).append(c)
new = c2 - c1
assert sum(c["expect"]["capability"] in new for c in fair) >= 5, "too few cases of v2's new capabilities"
assert sum("setup" in c for c in fair) >= 5, "too few context cases"
for g, cap in (("refuse", "refuse"), ("clarify", "clarify"), ("quote", None), ("negation", "reply")):
    gs = [c for c in kinds.get(g, []) if c["kind"] == "guard"]
    assert len(gs) >= 3, "fewer than 3 %s guards" % g
    for c in gs:
        assert c["forbid"] and (cap is None or c["expect"]["capability"] == cap), c["id"]
assert len(kinds.get("counter", [])) >= 6, "too few counterweights"
assert all(c["kind"] == "route" for c in kinds["counter"])
trained = [c for c in cases if c.get("train_key") in keys]
assert any(c["train_key"] in {e["key"] for e in v1} for c in trained)
assert any(c["train_key"] not in {e["key"] for e in v1} for c in trained)
print("router data: %d capabilities, v1 %d examples, v2 %d, check %d, %d cases (%d fair)"
      % (len(caps), len(v1), len(v2), len(chk), len(cases), len(fair)))
PY

# The generator refuses a fair case that a corpus holds, naming it.
sed 's/"could you pull up my Taxes directory?"/"open the docs folder"/' "$R/gen_router.py" >bad_gen.py
/usr/bin/python3 bad_gen.py bad >bad.out 2>&1 && fail "gen_router.py wrote a fair case a corpus holds"
grep -q "fair case 'open the docs folder' is corpus example r1-" bad.out || { cat bad.out; fail "refusal: $(cat bad.out)"; }
echo "PASS: router data regenerates byte for byte; shape, fair slice and specs checked"
