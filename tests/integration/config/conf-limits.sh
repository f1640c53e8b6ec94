#!/bin/bash
# config/conf-limits.sh: every limit pipelined.conf(5) and pipelined(8)
# document, checked against the tool, the documented figure read from the
# page itself (so the page and the code cannot drift apart again):
#  - each integer key's "from N to M": N-1 and M+1 refused by -n naming
#    file:line: key, N and M accepted; the resources' capacities likewise;
#  - feed_queue_max "at least 4K, less than 2G";
#  - http_token "16 characters or more" with http_listen, and required off
#    loopback; http_max_streams below http_max_connections;
#  - the duration units and the size suffixes the page lists;
#  - lines of any length: a 230-byte path is read whole (the page once
#    said a line over 198 bytes was an error);
#  - the sockets' paths: at most 107 bytes;
#  - the modes pipelined(8) gives state_dir, the sockets' directory and
#    the sockets at start.
. "$(dirname "$0")/../../lib.sh"
C5=$TOP/man/pipelined.conf.5
M8=$TOP/man/pipelined.8
mkdir -p "$TEST_TMP/s" "$TEST_TMP/r"
base() {	# the lines every configuration here starts with
	printf '[daemon]\nstate_dir = %s/s\ncontrol_socket = %s/r/c.sock\nfeed_socket = %s/r/f.sock\n' \
	    "$TEST_TMP" "$TEST_TMP" "$TEST_TMP"
}
# ok LINES...: -n accepts a configuration of base plus these lines.
ok() {
	{ base; printf '%s\n' "$@"; } >"$TEST_TMP/t.conf"
	out=$("$PIPELINED" -n -f "$TEST_TMP/t.conf" 2>&1) || fail "-n refused $*: $out"
}
# refused KEY LINES...: -n refuses it, naming t.conf:LINE: KEY.
refused() {
	local key=$1
	shift
	{ base; printf '%s\n' "$@"; } >"$TEST_TMP/t.conf"
	out=$("$PIPELINED" -n -f "$TEST_TMP/t.conf" 2>&1) && fail "-n accepted $*"
	echo "$out" | grep -q "t.conf:\([0-9]*:\)\? $key: " || fail "-n refused $* without naming $key: $out"
}

# ---- "from N to M", read from the page -------------------------------------
ranges=$(/usr/bin/python3 - "$C5" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
# Each entry: ".It Ic KEY" up to the next ".It" at the same list level (the
# entries of the key lists hold no nested lists that state ranges).
for m in re.finditer(r'^\.It Ic (\w+)[^\n]*\n(.*?)(?=^\.It |^\.El|^\.Sh )', text, re.M | re.S):
    body = " ".join(l for l in m.group(2).splitlines() if not l.startswith(".") or l.startswith(".Pq"))
    r = re.search(r'from (\d+)(?: \(no limit\))? to (\d+)', body)
    if r:
        print(m.group(1), r.group(1), r.group(2))
# The resources' capacities are described in prose.
r = re.search(r'an integer from (\d+) to (\d+), is its\s+capacity', text)
print("resources", r.group(1), r.group(2))
EOF
) || fail "reading the ranges from pipelined.conf.5"
echo "$ranges"
n=0
while read -r key lo hi; do
	n=$((n + 1))
	case $key in
	resources)
		refused gpu "[resources]" "gpu = $((lo - 1))"; ok "[resources]" "gpu = $lo"
		ok "[resources]" "gpu = $hi"; refused gpu "[resources]" "gpu = $((hi + 1))" ;;
	retries)
		sec=("[notify]")
		refused "$key" "${sec[@]}" "$key = $((lo - 1))"; ok "${sec[@]}" "$key = $lo"
		ok "${sec[@]}" "$key = $hi"; refused "$key" "${sec[@]}" "$key = $((hi + 1))" ;;
	http_max_streams)	# below http_max_connections, whose own bound is the same
		refused "$key" "$key = $((lo - 1))"; ok "$key = $lo"
		ok "$key = $((hi - 1))" "http_max_connections = $hi"
		refused "$key" "$key = $((hi + 1))" "http_max_connections = $hi" ;;
	http_max_connections)
		refused "$key" "$key = $((lo - 1))" "http_max_streams = 1"
		ok "$key = $((lo + 1))" "http_max_streams = $lo"
		ok "$key = $hi"; refused "$key" "$key = $((hi + 1))" ;;
	*)
		refused "$key" "$key = $((lo - 1))"; ok "$key = $lo"
		ok "$key = $hi"; refused "$key" "$key = $((hi + 1))" ;;
	esac
done <<<"$ranges"
# Every integer key of the page states its range.
for k in max_jobs control_max_clients feed_max_watchers http_max_connections http_max_per_ip \
    http_max_streams retries resources; do
	echo "$ranges" | grep -q "^$k " || fail "pipelined.conf.5 states no range for $k"
done

# ---- feed_queue_max: "at least 4K, less than 2G" ----------------------------
grep -q "at least 4K, less than 2G" "$C5" || fail "the page no longer says feed_queue_max's bounds as tested here"
refused feed_queue_max "feed_queue_max = 4095"; ok "feed_queue_max = 4K"
ok "feed_queue_max = 2147483647"; refused feed_queue_max "feed_queue_max = 2G"

# ---- http_token and http_max_streams ----------------------------------------
grep -q "The bearer token, 16 characters or more" "$C5" || fail "the page no longer says the token's length"
refused http_token "http_listen = 127.0.0.1:1" "http_token = 0123456789abcde"
ok "http_listen = 127.0.0.1:1" "http_token = 0123456789abcdef"
ok "http_listen = 127.0.0.1:1"
refused http_token "http_listen = 0.0.0.0:1"
refused http_max_streams "http_max_streams = 64" "http_max_connections = 64"
ok "http_max_streams = 63" "http_max_connections = 64"

# ---- units: durations and sizes ---------------------------------------------
units=$(sed -n '/^Durations take an optional unit/{n;p}' "$C5" | sed 's/^\.Pq Li //; s/ ;$//; s/,//g')
[ -n "$units" ] || fail "no duration units read from the page"
for u in $units; do ok "kill_grace = 3$u"; done
refused kill_grace "kill_grace = 3w"
ok "kill_grace = 3"
for u in K M; do ok "feed_queue_max = 8$u"; done
ok "feed_queue_max = 1G"
{ base; echo "feed_queue_max = 1M"; echo "kill_grace = 2min"; } >"$TEST_TMP/t.conf"
"$PIPELINED" -nv -f "$TEST_TMP/t.conf" >"$TEST_TMP/nv" || fail "-nv"
grep -qx "feed_queue_max = 1048576" "$TEST_TMP/nv" || fail "1M is not 1048576: $(grep feed_queue_max "$TEST_TMP/nv")"
grep -qx "kill_grace = 120s" "$TEST_TMP/nv" || fail "2min is not 120s: $(grep kill_grace "$TEST_TMP/nv")"

# ---- lines of any length ----------------------------------------------------
grep -qi "longer than 198 bytes" "$C5" && fail "the page still says a line over 198 bytes is an error"
grep -q "of any length" "$C5" || fail "the page does not say lines are of any length"
long=$TEST_TMP/$(printf 'p%.0s' $(seq 1 200))
line="log_file = $long/x.log"
mkdir -p "$long"
[ "${#line}" -ge 230 ] || fail "the line is ${#line} bytes"
ok "$line"
{ base; echo "$line"; } >"$TEST_TMP/t.conf"
"$PIPELINED" -nv -f "$TEST_TMP/t.conf" | grep -qxF "$line" || fail "the long log_file was not read whole"

# ---- the sockets' paths ------------------------------------------------------
grep -q "at most 107 bytes" "$C5" || fail "the page does not give the sockets' length"
d=$TEST_TMP/r
pad() { printf "%s/%s" "$d" "$(printf 'c%.0s' $(seq 1 $(($1 - ${#d} - 1))))"; }
ok "control_socket = $(pad 107)"
refused control_socket "control_socket = $(pad 108)"
refused feed_socket "feed_socket = $(pad 108)"

# ---- the modes of state_dir, the sockets' directory and the sockets ---------
# pipelined(8): "creates state_dir (mode 0NNN", "control socket (mode
# 0NNN)", "feed socket (mode 0NNN)", "each in a directory of mode 0NNN".
doc_mode() { tr '\n' ' ' <"$M8" | grep -o "$1" | head -1 | grep -o '0[0-7]*' | tail -1 | sed 's/^0//'; }
m_state=$(doc_mode "creates \.Ic state_dir (mode 0[0-7]*")
m_ctl=$(doc_mode "control socket (mode 0[0-7]*")
m_feed=$(doc_mode "feed socket (mode 0[0-7]*")
m_dir=$(doc_mode "each in a directory of mode 0[0-7]*")
[ -n "$m_state" ] && [ -n "$m_ctl" ] && [ -n "$m_feed" ] && [ -n "$m_dir" ] ||
    fail "modes not read from pipelined.8: state_dir '$m_state', control '$m_ctl', feed '$m_feed', dir '$m_dir'"
PL_CONF=$TEST_TMP/modes.conf
printf '[daemon]\nstate_dir = %s/new/state\ncontrol_socket = %s/new/run/control.sock\nfeed_socket = %s/new/run/feed.sock\nplugin_dir = %s/plugins\nshim = %s/daemon/pipeline-shim\njobs_dir = %s/jobs\n' \
    "$TEST_TMP" "$TEST_TMP" "$TEST_TMP" "$TOP" "$TOP" "$TOP" >"$PL_CONF"
mkdir -p "$TEST_TMP/run"
(umask 022; "$PIPELINED" -f "$PL_CONF") || fail "the daemon did not start"
pid=$(cat "$TEST_TMP/new/state/pipelined.pid")
trap 'kill "$pid" 2>/dev/null' EXIT
[ "$(stat -c %a "$TEST_TMP/new/state")" = "$m_state" ] ||
    fail "state_dir is mode $(stat -c %a "$TEST_TMP/new/state"), pipelined.8 says 0$m_state"
[ "$(stat -c %a "$TEST_TMP/new/run")" = "$m_dir" ] ||
    fail "the sockets' directory is mode $(stat -c %a "$TEST_TMP/new/run"), pipelined.8 says 0$m_dir"
[ "$(stat -c %a "$TEST_TMP/new/run/control.sock")" = "$m_ctl" ] ||
    fail "the control socket is mode $(stat -c %a "$TEST_TMP/new/run/control.sock"), pipelined.8 says 0$m_ctl"
[ "$(stat -c %a "$TEST_TMP/new/run/feed.sock")" = "$m_feed" ] ||
    fail "the feed socket is mode $(stat -c %a "$TEST_TMP/new/run/feed.sock"), pipelined.8 says 0$m_feed"
kill "$pid"
echo "$n ranges, units, lengths and modes agree"
echo ok
