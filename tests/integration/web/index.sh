#!/bin/bash
# web/index.sh: the status page's index in a real browser (Debian's
# Chromium driven by playwright-core, as web/page.sh), against a real daemon:
# the index says live (not "connecting" for ever) and follows every run
# without a reload (a run submitted while it is open appears, then turns
# failed), its dates are ISO 8601 as pipelinectl prints them, and a failed
# run's page opens its log panel on the failed job. Light: exec jobs only.
# Screenshots go to tests/out/web-index.png and web-failed-run.png.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
command -v /usr/bin/chromium >/dev/null || fail "chromium is not installed (etc/deps.sh installs it)"
NODE_MODULES=$("$TOP/tests/tools/playwright.sh") || fail "playwright-core could not be installed"
SHOTS=$TOP/tests/out
mkdir -p "$SHOTS" "$TEST_TMP/web/node_modules"
ln -sfn "$NODE_MODULES/playwright-core" "$TEST_TMP/web/node_modules/playwright-core"
cp "$TOP/tests/helpers/page-test.mjs" "$TEST_TMP/web/"

PORT=$(free_port)
# Every request needs a credential: the page test sends PL_TOKEN as a
# bearer token (pipelined(8) SECURITY).
export PL_TOKEN=index-token-0123456789
pl_conf "http_listen = 127.0.0.1:$PORT" "http_token = $PL_TOKEN"
pl_start
U=http://127.0.0.1:$PORT
pctl submit "$TOP/etc/examples/hello.ini" >/dev/null || fail "submit hello"
wait_run hello succeeded 30
# The run the page sees submitted: a job that works, one that fails with
# a line in its log, one after it.
cat >"$TEST_TMP/idx.ini" <<'INI'
[run]
name = idx
[first]
stage = exec
command = sleep 1
[broken]
stage = exec
after = first
command = echo "the disk is on fire"; sleep 1; exit 4
[after-broken]
stage = exec
after = broken
command = true
INI
out=$(node "$TEST_TMP/web/page-test.mjs" index "$U" idx "$SHOTS" \
    "'$PIPELINECTL' -f '$PL_CONF' submit '$TEST_TMP/idx.ini'") || { echo "$out"; fail "the index page test failed"; }
note "index: $out"
[ "$(run_state idx)" = failed ] || fail "idx is $(run_state idx), not failed"
pl_stop
echo ok
