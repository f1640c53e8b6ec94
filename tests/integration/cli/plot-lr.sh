#!/bin/bash
# pipelinectl plot draws a train job's learning rate and says nothing of
# gnuplot's own: the metrics a real train job recorded
# (tests/fixtures/cli/train-metrics*.events, written by jobs/train.py with
# the tiny engine), replayed by an exec job into the store, are plotted to
# SVG by Debian's gnuplot, and
#   - nothing reaches standard error (gnuplot warned of an empty range for
#     a job at its first step, whose learning rate is 0 in warmup);
#   - the learning-rate axis has tick labels, at least three, none below 0,
#     and the learning rate is drawn: a line through the 20 steps, a point
#     for the single one; so is the loss.
# Runs against the real daemon and CLI of this tree.
. "$(dirname "$0")/../../lib.sh"
command -v gnuplot >/dev/null || fail "gnuplot is not installed (etc/deps.sh installs it)"
cd "$TEST_TMP"
pl_start
for r in 20 1; do
	f=$TOP/tests/fixtures/cli/train-metrics.events
	[ $r = 1 ] && f=$TOP/tests/fixtures/cli/train-metrics-1.events
	printf '[run]\nname = r%s\n[train]\nstage = exec\ncommand = cat %s >>"$PL_EVENTS"\n' "$r" "$f" >r$r.ini
	pctl submit r$r.ini >/dev/null || fail "submit r$r"
	wait_run r$r succeeded 30
	pctl plot r$r --job train -o "$TEST_TMP/r$r.svg" >plot.out 2>plot.err || fail "plot r$r: $(cat plot.err)"
	[ -s plot.err ] && fail "plot r$r wrote to standard error: $(cat plot.err)"
	grep -q "r$r.svg: loss of r$r over $r steps" plot.out || fail "plot r$r: $(cat plot.out)"
	/usr/bin/python3 - "$TEST_TMP/r$r.svg" "$r" <<'PY' || fail "plot r$r: the learning rate is not drawn (kept in $TEST_TMP/r$r.svg)"
import re, sys
svg, steps = open(sys.argv[1]).read(), int(sys.argv[2])
width = float(re.search(r'<svg[^>]* width="(\d+)', svg).group(1))
# Tick labels: a number in a <text>; the y2 axis's are right of the
# plot, anchored at their start (the x axis's at their middle, y's at
# their end).
labels = re.findall(r'translate\(([\d.]+),[\d.]+\)"[^>]*text-anchor="start">\s*<text>\s*([-0-9.e+]+)</text>', svg)
y2 = sorted({t for x, t in labels if float(x) > width * 0.8})
assert len(y2) >= 3, ("the learning-rate axis has no tick labels", y2)
assert all(float(t) >= 0 for t in y2), ("the learning-rate axis goes below 0", y2)
# Each series: a group gnuplot_plot_N holding its legend's text and what
# is drawn (a path: the legend's sample, then the line; or the points).
groups = re.split(r'<g id="gnuplot_plot_\d+"', svg)[1:]
def drawn(title):
    g = [b for b in groups if re.search(r'<text>' + re.escape(title) + r'</text>', b)]
    assert len(g) == 1, "no series " + title
    if steps > 1:
        ds = re.findall(r" d='([^']*)'", g[0])
        pts = max((len(re.findall(r'L', d.split('M', 2)[2])) + 1 for d in ds if d.count('M') >= 2),
            default=0)
        assert pts >= steps, (title, "a line of", pts, "points")
    else:
        assert re.search(r"<use|<circle|<path", g[0].split('</text>', 1)[1]), (title, "no point")
run = "r" + sys.argv[2]
drawn("loss " + run)
drawn("lr " + run)
PY
done
pl_stop
echo ok
