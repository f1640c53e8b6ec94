#!/bin/bash
# tests/tools/demo.sh: `make demo`. Starts a private pipelined on a
# temporary state directory, submits the example spec, shows the watch
# live, prints the final status, and stops the daemon.
#   DEMO_SPEC=etc/examples/other.ini make demo    runs another spec
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
SPEC=${DEMO_SPEC:-$TOP/etc/examples/hello.ini}
DIR=$(mktemp -d /tmp/pipelined-demo.XXXXXX)
mkdir -p "$DIR/state" "$DIR/run"
cat > "$DIR/pipelined.conf" <<CONF
[daemon]
state_dir = $DIR/state
control_socket = $DIR/run/control.sock
feed_socket = $DIR/run/feed.sock
plugin_dir = $TOP/plugins
shim = $TOP/daemon/pipeline-shim
jobs_dir = $TOP/jobs
log_file = $DIR/pipelined.log
max_jobs = 2
[resources]
gpu = 1
CONF
echo "== starting a private pipelined (state in $DIR)"
"$TOP/daemon/pipelined" -f "$DIR/pipelined.conf"
trap 'kill -TERM $(pgrep -f "pipelined -f $DIR/pipelined.conf") 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do [ -S "$DIR/run/control.sock" ] && break; sleep 0.1; done
ctl() { "$TOP/daemon/pipelinectl" -f "$DIR/pipelined.conf" "$@"; }
ctl check "$SPEC"
run=$(ctl submit "$SPEC")
echo "== submitted run $run; watching it"
rc=0
ctl watch "$run" || rc=$?
echo "== final status"
ctl status "$run"
ctl artifacts "$run"
if [ "$rc" -eq 0 ]; then echo "== run $run succeeded"; else echo "== run $run did not succeed"; fi
echo "== stopping the daemon (its log: $DIR/pipelined.log)"
exit $rc
