#!/bin/bash
# With --json, pipelinectl's own answers are JSON too, not only the
# daemon's: --version ({"ok":true,"verb":"version","version","protocol"}),
# --help and help ({"ok":true,"verb":"help","verbs":[...]}: every verb of
# the usage with its synopsis, help and options), help VERB and VERB --help
# (that verb alone, the same object either way), stage STAGE --help (the
# stage's keys), wherever --json stands; one line on standard output,
# nothing on standard error. Without --json the text stays.
. "$(dirname "$0")/../../lib.sh"
cd "$TEST_TMP"
pl_conf
# one CMD...: the command prints one JSON object and nothing else.
one() {
	pctl "$@" >j.out 2>j.err || fail "$*: exit $?"
	[ -s j.err ] && fail "$*: wrote to standard error: $(cat j.err)"
	[ "$(wc -l <j.out)" = 1 ] || fail "$*: not one line: $(cat j.out)"
	/usr/bin/python3 -c 'import json,sys; json.loads(open("j.out").read())' || fail "$*: not JSON: $(cat j.out)"
}
# is PYEXPR: the last object satisfies PYEXPR (o).
is() {
	/usr/bin/python3 -c 'import json,sys; o=json.load(open("j.out")); sys.exit(0 if eval(sys.argv[1]) else 1)' "$1" ||
	    fail "not $1: $(cat j.out)"
}
for a in "--json --version" "--version --json"; do
	one $a
	is "o == {'ok': True, 'verb': 'version', 'version': o['version'], 'protocol': o['protocol']} and o['version'] and isinstance(o['protocol'], int)"
done
pctl --version | grep -Eq '^pipelinectl [0-9]+\.[0-9]+.* \(protocol [0-9]+\)$' || fail "--version without --json: $(pctl --version)"
verbs=$(pctl _complete | sort | tr '\n' ' ')
for a in "--json help" "help --json" "--json --help" "--help --json" "--json -h"; do
	one $a
	is "o['ok'] is True and o['verb'] == 'help' and ' '.join(sorted(v['name'] for v in o['verbs'])) + ' ' == '$verbs'"
	is "all(v['synopsis'].startswith(v['name']) and v['help'] and isinstance(v['options'], list) for v in o['verbs'])"
	cp j.out all.json
done
# Each verb alone, as in the whole list, by help VERB and VERB --help.
for v in $verbs; do
	one --json help "$v"
	cp j.out help.json
	/usr/bin/python3 -c 'import json,sys; a=json.load(open("all.json")); h=json.load(open("help.json")); sys.exit(0 if h["verbs"] == [v for v in a["verbs"] if v["name"] == sys.argv[1]] else 1)' "$v" ||
	    fail "--json help $v is not its entry of --json help: $(cat help.json)"
	one "$v" --help --json
	cmp -s j.out help.json || fail "$v --help --json differs from help $v: $(cat j.out)"
done
one --json help plot
is "[(x['name'], x.get('arg'), x['required']) for x in o['verbs'][0]['options']][:2] == [('-o', 'FILE', True), ('--vs', 'RUN', False)]"
one --json stage exec --help
is "o['ok'] is True and o['stage'] == 'exec' and [k['name'] for k in o['keys']] == ['command', 'cwd', 'env', 'input'] and o['keys'][0]['required'] is True"
# Without --json, text.
pctl help watch | head -1 | grep -q '^usage: pipelinectl ' || fail "help watch without --json: $(pctl help watch)"
pctl stage exec --help | head -1 | grep -q '^stage exec: ' || fail "stage exec --help without --json"
echo ok
