// The status page of pipelined: read-only, no framework, no build step.
// Everything from the daemon goes into the page as text (textContent,
// SVG text nodes), never as markup. A run is followed live through
// /api/events (Server-Sent Events from the status feed); the browser's
// EventSource reconnects by itself with the last event id it saw, so the
// daemon resumes the stream exactly after it.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const stats = { events: 0, duplicates: 0, lastId: 0, reconnects: 0, opens: 0 };
window.plStats = stats; // read by the browser test

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = String(text);
  return e;
}
// Local time in ISO 8601 order, as pipelinectl prints it: 2026-12-03 20:16:46.
function fmtTime(t) {
  if (!t) return "";
  const d = new Date(t * 1000), p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
function fmtSecs(s) {
  if (s === null || s === undefined || !isFinite(s) || s < 0) return "";
  s = Math.round(s);
  if (s >= 3600) return Math.floor(s / 3600) + "h" + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
  if (s >= 60) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  return s + "s";
}
// Binary units, one word, as pipelinectl artifacts: 5B, 4.0KiB, 12MiB.
function fmtSize(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return i === 0 ? Math.round(n) + u[0] : n.toFixed(n < 10 ? 1 : 0) + u[i];
}
function pct(x) { return x === undefined || x === null ? "" : (x * 100).toFixed(1) + "%"; }
function stateBadge(s) { return el("span", s, "state " + s); }
async function getJSON(url) {
  const r = await fetch(url, { credentials: "same-origin" });
  if (!r.ok) throw new Error(url + ": HTTP " + r.status);
  return r.json();
}
function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }

// ---- the runs --------------------------------------------------------------

// The index is live: every run's events, from the newest the table was
// built from, redraw it (at most twice a second).
let runsEs = null;
let runsPending = false;
function liveIndex(since) {
  if (runsEs) return;
  runsEs = new EventSource("/api/events?since=" + since);
  runsEs.onmessage = (ev) => {
    const id = Number(ev.lastEventId);
    if (id && id <= stats.lastId) { stats.duplicates++; return; }
    if (id) stats.lastId = id;
    stats.events++;
    if (runsPending) return;
    runsPending = true;
    setTimeout(() => { runsPending = false; if (runsEs) drawRuns().catch(() => {}); }, 500);
  };
  runsEs.onopen = liveOn;
  runsEs.onerror = liveOff;
}
function stopIndex() { if (runsEs) { runsEs.close(); runsEs = null; } }
// An open of a stream; a second open of the same one is a reconnect.
function liveOn(ev) {
  stats.opens++;
  if (ev.target.plOpened) stats.reconnects++;
  ev.target.plOpened = true;
  $("live").textContent = "live";
  $("live").className = "live on";
}
function liveOff() { $("live").textContent = "reconnecting"; $("live").className = "live off"; }

async function showRuns() {
  $("run-view").hidden = true;
  $("runs-view").hidden = false;
  const d = await drawRuns();
  if (!runsEs) stats.lastId = d.last_event;
  liveIndex(d.last_event);
}

async function drawRuns() {
  const d = await getJSON("/api/runs");
  const tb = $("runs").tBodies[0];
  clear(tb);
  for (const r of d.runs) {
    const tr = document.createElement("tr");
    const a = el("a", r.name);
    a.href = "#run=" + encodeURIComponent(r.name);
    const td = document.createElement("td");
    td.appendChild(a);
    tr.appendChild(td);
    const ts = document.createElement("td");
    ts.appendChild(stateBadge(r.state));
    tr.appendChild(ts);
    tr.appendChild(el("td", r.previous || ""));
    tr.appendChild(el("td", fmtTime(r.created)));
    tr.appendChild(el("td", fmtSecs((r.finished || Date.now() / 1000) - r.created), "num"));
    tr.appendChild(el("td", r.succeeded + "/" + r.jobs, "num"));
    const v = r.verdict;
    tr.appendChild(el("td", v && v.verdict ? v.verdict + (v.reason ? ": " + v.reason : "") : ""));
    tb.appendChild(tr);
  }
  return d;
}

// ---- one run ---------------------------------------------------------------

let cur = null;   // the run shown: { name, jobs: Map, deps, ... }
let es = null;    // its EventSource
let logTimer = null;

// The DAG's edges from the stored spec text: each job section's after key.
function parseAfter(text) {
  const deps = {};
  let sec = null;
  for (const raw of (text || "").split("\n")) {
    const line = raw.trim();
    const m = line.match(/^\[([^\]]+)\]$/);
    if (m) { sec = m[1]; deps[sec] = deps[sec] || []; continue; }
    const kv = line.match(/^after\s*=\s*(.*)$/);
    if (kv && sec) deps[sec] = kv[1].split(/[\s,]+/).filter(Boolean);
  }
  return deps;
}

function layout(jobs, deps) {
  const depth = {};
  const d = (n, seen) => {
    if (depth[n] !== undefined) return depth[n];
    if (seen.has(n)) return 0;
    seen.add(n);
    let m = 0;
    for (const p of deps[n] || []) if (jobs.has(p)) m = Math.max(m, d(p, seen) + 1);
    return (depth[n] = m);
  };
  const cols = [];
  for (const n of jobs.keys()) {
    const k = d(n, new Set());
    (cols[k] = cols[k] || []).push(n);
  }
  const pos = {};
  cols.forEach((c, x) => c.forEach((n, y) => { pos[n] = { x: 12 + x * 178, y: 12 + y * 76 }; }));
  return { pos, width: 24 + cols.length * 178, height: 24 + Math.max(1, ...cols.map((c) => c.length)) * 76 };
}

function jobRate(j) {
  const s = j.samples;
  if (!s || s.length < 2) return -1;
  const last = s[s.length - 1];
  let first = last;
  for (let i = s.length - 1; i >= 0 && last.t - s[i].t <= 60; i--) first = s[i];
  const dt = last.t - first.t, dd = last.done - first.done;
  return dt > 0 && dd > 0 ? dd / dt : -1;
}

function drawDag() {
  const g = $("dag");
  clear(g);
  const L = layout(cur.jobs, cur.deps);
  g.setAttribute("width", L.width);
  g.setAttribute("height", L.height);
  for (const [n, j] of cur.jobs) {
    for (const p of cur.deps[n] || []) {
      const a = L.pos[p], b = L.pos[n];
      if (!a || !b) continue;
      g.appendChild(svg("path", { class: "edge",
        d: `M${a.x + 150},${a.y + 27} C${a.x + 165},${a.y + 27} ${b.x - 15},${b.y + 27} ${b.x},${b.y + 27}` }));
    }
  }
  for (const [n, j] of cur.jobs) {
    const p = L.pos[n];
    const box = svg("g", { class: "box " + j.state, "data-job": n, transform: `translate(${p.x},${p.y})` });
    box.appendChild(svg("rect", { width: 150, height: 54 }));
    box.appendChild(svg("text", { x: 8, y: 16, "font-weight": 600 }, n));
    box.appendChild(svg("text", { x: 8, y: 31 }, j.stage + (j.variant ? " (" + j.variant + ")" : "") + " · " + j.state + (j.attempts > 1 ? " · try " + j.attempts : "")));
    if (j.total > 0) {
      const f = Math.min(1, j.done / j.total);
      box.appendChild(svg("rect", { class: "barbg", x: 8, y: 38, width: 134, height: 4 }));
      box.appendChild(svg("rect", { class: "bar", x: 8, y: 38, width: 134 * f, height: 4 }));
      const r = jobRate(j);
      const eta = j.state === "running" && r > 0 ? ", " + fmtSecs((j.total - j.done) / r) + " left" : "";
      box.appendChild(svg("text", { x: 8, y: 52, "font-size": 10 }, `${j.done}/${j.total} ${j.unit || ""}${eta}`));
    }
    const t = svg("title", {}, j.message || "");
    box.appendChild(t);
    box.addEventListener("click", () => { $("log-job").value = n; cur.logChosen = true; followLog(true); });
    g.appendChild(box);
  }
}

function drawVerdict(values) {
  const vs = values.filter((v) => v.key === "gate.verdict");
  const box = $("verdict-box");
  if (!vs.length) { box.hidden = true; return; }
  box.hidden = false;
  const v = vs[vs.length - 1].value;
  const p = $("verdict");
  clear(p);
  p.appendChild(stateBadge(v.pass ? "succeeded" : "rejected"));
  p.appendChild(document.createTextNode(" " + v.verdict + (v.reason ? ": " + v.reason : "")));
  // The bakes side by side, the fair slice first (as pipelinectl report).
  const t = $("bakes");
  const head = t.tHead.rows[0];
  clear(head);
  head.appendChild(el("th", ""));
  const sides = [["candidate", v.candidate], ["incumbent", v.incumbent]].filter((s) => s[1]);
  for (const [name, s] of sides) head.appendChild(el("th", name + (s.bake ? " (" + s.bake + ")" : "")));
  const tb = t.tBodies[0];
  clear(tb);
  const row = (label, f, cls) => {
    const tr = el("tr", null, cls);
    tr.appendChild(el("td", label));
    for (const [, s] of sides) tr.appendChild(el("td", f(s), "num"));
    tb.appendChild(tr);
  };
  if (v.fair_slice) {
    const fs = v.fair_slice;
    const tr = el("tr", null, "fair");
    tr.appendChild(el("td", "fair slice (" + fs.cases + " cases neither corpus holds)"));
    tr.appendChild(el("td", fs.candidate ? pct(fs.candidate.acc) : "", "num"));
    if (sides.length > 1) tr.appendChild(el("td", fs.incumbent ? pct(fs.incumbent.acc) : "", "num"));
    tb.appendChild(tr);
  }
  const agg = (s, k) => s[k];
  row("held-out", (s) => { const h = agg(s, "held_out"); return h ? pct(h.acc) : ""; });
  row("overall", (s) => { const o = agg(s, "overall"); return o ? pct(o.acc) : ""; });
  row("guard breaches", (s) => { const b = agg(s, "guard_breaches"); return b === undefined ? "" : String(b); });
  // A sweep's gate: its leaderboard, a row a variant, best first.
  const lt = $("leaderboard");
  const lb = v.sweep && v.sweep.leaderboard;
  lt.hidden = !lb;
  if (!lb) return;
  const lbody = lt.tBodies[0];
  clear(lbody);
  const num = (x, f) => (x === undefined || x === null ? "" : f(x));
  for (const x of lb) {
    const tr = el("tr", null, x.best ? "fair" : null);
    tr.appendChild(el("td", String(x.rank), "num"));
    tr.appendChild(el("td", x.bake));
    tr.appendChild(el("td", x.values || ""));
    tr.appendChild(el("td", pct(x.fair_acc !== undefined ? x.fair_acc : x.held_out_acc), "num"));
    tr.appendChild(el("td", pct(x.overall_acc), "num"));
    tr.appendChild(el("td", num(x.guard_breaches, String), "num"));
    tr.appendChild(el("td", num(x.p_mcnemar, (p) => p.toPrecision(3)), "num"));
    tr.appendChild(el("td", num(x.p_holm, (p) => p.toPrecision(3)), "num"));
    tr.appendChild(el("td", x.verdict + (x.reason ? ": " + x.reason : "")));
    lbody.appendChild(tr);
  }
}

function drawArtifacts(arts) {
  const tb = $("artifacts").tBodies[0];
  clear(tb);
  for (const a of arts) {
    const tr = document.createElement("tr");
    tr.appendChild(el("td", a.job));
    tr.appendChild(el("td", a.name));
    tr.appendChild(el("td", fmtSize(a.size || 0), "num"));
    tr.appendChild(el("td", (a.sha256 || "").slice(0, 16)));
    tr.appendChild(el("td", a.path, "mono"));
    tb.appendChild(tr);
  }
}

// ---- the loss curve ----------------------------------------------------------

function curveOf(rows) {
  const c = { loss: new Map(), lr: new Map(), resumed: new Set() };
  for (const m of rows || []) {
    if (m.name === "loss") c.loss.set(m.step, m.value);
    else if (m.name === "lr") c.lr.set(m.step, m.value);
    else if (m.name === "resumed") c.resumed.add(m.step);
  }
  return c;
}

function drawLoss() {
  const g = $("loss");
  clear(g);
  const c = cur.curve, o = cur.vsCurve;
  const all = [...c.loss.entries(), ...(o ? o.loss.entries() : [])];
  if (!all.length) { $("loss-note").textContent = "no steps yet"; return; }
  const W = 720, H = 280, x0 = 52, y0 = 16, w = W - x0 - 56, h = H - y0 - 34;
  let smax = 1, lmin = Infinity, lmax = -Infinity;
  for (const [s, v] of all) { smax = Math.max(smax, s); lmin = Math.min(lmin, v); lmax = Math.max(lmax, v); }
  if (lmax === lmin) { lmax += 0.5; lmin -= 0.5; }
  const X = (s) => x0 + (s / smax) * w, Y = (v) => y0 + h - ((v - lmin) / (lmax - lmin)) * h;
  for (let i = 0; i <= 4; i++) {
    const v = lmin + (i / 4) * (lmax - lmin);
    g.appendChild(svg("line", { class: "grid", x1: x0, x2: x0 + w, y1: Y(v), y2: Y(v) }));
    g.appendChild(svg("text", { x: 4, y: Y(v) + 4 }, v.toFixed(3)));
  }
  g.appendChild(svg("line", { class: "axis", x1: x0, x2: x0 + w, y1: y0 + h, y2: y0 + h }));
  g.appendChild(svg("text", { x: x0, y: H - 8 }, "0"));
  g.appendChild(svg("text", { x: x0 + w - 30, y: H - 8 }, "step " + smax));
  for (const s of c.resumed) {
    g.appendChild(svg("line", { class: "resume", x1: X(s), x2: X(s), y1: y0, y2: y0 + h }));
    g.appendChild(svg("text", { x: X(s) + 3, y: y0 + 12, "font-size": 10 }, "resume " + s));
  }
  const line = (m, cls) => {
    const pts = [...m.entries()].sort((a, b) => a[0] - b[0]).map(([s, v]) => X(s).toFixed(1) + "," + Y(v).toFixed(1));
    if (pts.length) g.appendChild(svg("polyline", { class: cls, points: pts.join(" "), "data-points": pts.length }));
  };
  if (c.lr.size) {
    let rmax = 0;
    for (const v of c.lr.values()) rmax = Math.max(rmax, v);
    if (rmax > 0) {
      const m = new Map([...c.lr.entries()].map(([s, v]) => [s, lmin + (v / rmax) * (lmax - lmin)]));
      line(m, "lr");
      g.appendChild(svg("text", { x: x0 + w + 4, y: y0 + 10, "font-size": 10 }, "lr " + rmax.toExponential(1)));
    }
  }
  if (o) line(o.loss, "l1");
  line(c.loss, "l0");
  $("loss-note").textContent = `${cur.name}/${cur.trainJob}: ${c.loss.size} steps` +
    (c.resumed.size ? `, ${c.resumed.size} resume(s) marked` : "") +
    (o ? `; dashed: ${cur.vsName}` : "") + "; dotted: learning rate";
}

async function pickVs() {
  const name = $("vs").value;
  cur.vsCurve = null;
  cur.vsName = name;
  if (name) {
    try {
      const d = await getJSON("/api/run?run=" + encodeURIComponent(name));
      const jobs = Object.keys(d.metrics || {});
      if (jobs.length) cur.vsCurve = curveOf(d.metrics[jobs[0]]);
    } catch (e) { /* the other run went away: draw ours alone */ }
  }
  drawLoss();
}

// ---- the log ---------------------------------------------------------------

async function followLog(fresh) {
  if (!cur) return;
  const job = $("log-job").value;
  if (fresh || cur.logJob !== job) { cur.logJob = job; cur.logOffset = null; $("log").textContent = ""; }
  if (!job) return;
  try {
    const q = "/api/log?run=" + encodeURIComponent(cur.name) + "&job=" + encodeURIComponent(job) +
      (cur.logOffset !== null ? "&offset=" + cur.logOffset : "");
    const d = await getJSON(q);
    if (d.text) {
      const pre = $("log");
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.appendChild(document.createTextNode(d.text));
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    }
    cur.logOffset = d.offset;
  } catch (e) { /* the job has no log yet */ }
}

// ---- live ------------------------------------------------------------------

function onEvent(ev) {
  const id = Number(ev.lastEventId);
  if (id && id <= stats.lastId) { stats.duplicates++; return; }
  if (id) stats.lastId = id;
  stats.events++;
  let e;
  try { e = JSON.parse(ev.data); } catch (x) { return; }
  const j = e.job ? cur.jobs.get(e.job) : null;
  switch (e.type) {
  case "job.state":
    if (j) {
      j.state = e.state; j.message = e.message || "";
      if (e.attempt) j.attempts = e.attempt;
    }
    // A job that fails opens its log, unless the reader chose one.
    if (j && e.state === "failed" && !cur.logChosen && $("log-job").value !== e.job) {
      $("log-job").value = e.job;
      followLog(true);
    }
    drawDag();
    break;
  case "job.progress":
    if (j) {
      j.done = e.done; j.total = e.total; j.unit = e.unit;
      j.samples = j.samples || [];
      const last = j.samples[j.samples.length - 1];
      if (last && e.done < last.done) j.samples = [];
      j.samples.push({ t: e.ts, done: e.done });
      if (j.samples.length > 64) j.samples.shift();
    }
    drawDag();
    break;
  case "job.metric":
    if (e.job === cur.trainJob && (e.name === "loss" || e.name === "lr")) {
      cur.curve[e.name].set(e.step, e.value);
      scheduleLoss();
    }
    break;
  case "job.resumed":
    if (e.job === cur.trainJob) { cur.curve.resumed.add(e.step); scheduleLoss(); }
    break;
  case "run.state":
    setRunState(e.state, e.message);
    refreshRun();
    break;
  case "job.verdict":
  case "job.artifact":
    refreshRun();
    break;
  }
}

let lossPending = false;
function scheduleLoss() {
  if (lossPending) return;
  lossPending = true;
  setTimeout(() => { lossPending = false; if (cur) drawLoss(); }, 250);
}
// The corpus_check jobs: result, examples, the checks that found
// something, and the changes since the previous version (as report).
function drawCorpus(values) {
  const sums = values.filter((v) => v.key === "corpus_check.summary");
  const box = $("corpus-box");
  if (!sums.length) { box.hidden = true; return; }
  box.hidden = false;
  const tb = $("corpus").tBodies[0];
  clear(tb);
  const seen = new Set();
  for (const v of sums.slice().reverse()) {
    if (seen.has(v.job)) continue;
    seen.add(v.job);
    const s = v.value;
    const tr = el("tr");
    tr.appendChild(el("td", v.job));
    const r = el("td");
    r.appendChild(stateBadge(s.result === "fail" ? "failed" : s.result === "warn" ? "rejected" : "succeeded"));
    r.appendChild(document.createTextNode(" " + s.result));
    tr.appendChild(r);
    tr.appendChild(el("td", String(s.examples), "num"));
    const found = Object.entries(s.checks || {}).filter(([, c]) => c.count > 0)
      .map(([k, c]) => k + " " + c.count + " (" + c.policy + ")");
    tr.appendChild(el("td", found.join(", ") || "none"));
    const ds = values.filter((x) => x.key === "corpus_check.diff" && x.job === v.job);
    let since = "";
    if (ds.length) {
      const d = ds[ds.length - 1].value;
      if (d.error) since = d.previous + ": " + d.error;
      else {
        const e = d.examples || {};
        since = d.previous + ": +" + e.added + " -" + e.removed + " ~" + e.changed + " examples";
        const caps = Object.entries(d.capabilities || {}).map(([k, c]) => k + " +" + c.added + " -" + c.removed + " ~" + c.changed);
        if (caps.length) since += " (" + caps.join("; ") + ")";
        if (d.cases) since += "; cases +" + d.cases.added + " -" + d.cases.removed + " ~" + d.cases.changed;
      }
    }
    tr.appendChild(el("td", since));
    tb.appendChild(tr);
  }
}

function setRunState(state, msg) {
  const s = $("run-state");
  s.textContent = state;
  s.className = "state " + state;
  $("run-msg").textContent = msg || "";
}

// The parts that events do not carry whole (verdict, artifacts) are read
// again, at most twice a second.
let refreshPending = false;
function refreshRun() {
  if (refreshPending || !cur) return;
  refreshPending = true;
  setTimeout(async () => {
    refreshPending = false;
    if (!cur) return;
    try {
      const d = await getJSON("/api/run?run=" + encodeURIComponent(cur.name));
      drawVerdict(d.values);
      drawCorpus(d.values);
      drawArtifacts(d.artifacts);
    } catch (e) { /* next event */ }
  }, 500);
}

async function showRun(name) {
  $("runs-view").hidden = true;
  $("run-view").hidden = false;
  if (es) { es.close(); es = null; }
  const d = await getJSON("/api/run?run=" + encodeURIComponent(name));
  cur = { name, jobs: new Map(), deps: parseAfter(d.run.spec_text), curve: null, logOffset: null };
  for (const j of d.jobs) {
    cur.jobs.set(j.name, { stage: j.stage, state: j.state, attempts: j.attempts, message: j.message || "",
      done: j.progress_done || 0, total: j.progress_total || 0, unit: j.progress_unit || "",
      variant: j.variant || "" });
    // A sweep's run: the spec text has the sweep unexpanded; each job
    // carries its expanded after list.
    if (j.after !== undefined && j.after !== null) cur.deps[j.name] = j.after.split(" ").filter(Boolean);
  }
  $("run-name").textContent = name;
  $("run-desc").textContent = d.run.description || "";
  setRunState(d.run.state, d.run.message);
  drawDag();
  drawVerdict(d.values);
  drawCorpus(d.values);
  drawArtifacts(d.artifacts);
  const trains = Object.keys(d.metrics || {});
  $("train-box").hidden = !trains.length;
  if (trains.length) {
    cur.trainJob = trains[0];
    cur.curve = curveOf(d.metrics[trains[0]]);
    drawLoss();
    const runs = await getJSON("/api/runs");
    const sel = $("vs");
    while (sel.options.length > 1) sel.remove(1);
    for (const r of runs.runs) if (r.name !== name) sel.add(new Option(r.name, r.name));
  }
  const lj = $("log-job");
  clear(lj);
  for (const n of cur.jobs.keys()) lj.add(new Option(n, n));
  // The log that says most: the first failed job's, else a running one's.
  const pick = (st) => [...cur.jobs].find(([, j]) => j.state === st);
  const shown = pick("failed") || pick("running") || pick("retrying");
  if (shown) lj.value = shown[0];
  followLog(true);
  // Live from the snapshot on: the stream starts after the newest event
  // the page was built from.
  stats.lastId = d.last_event;
  es = new EventSource("/api/events?run=" + encodeURIComponent(name) + "&since=" + d.last_event);
  es.onmessage = onEvent;
  es.addEventListener("feed", () => { /* dropped: the browser reconnects with its last id */ });
  es.onopen = liveOn;
  es.onerror = liveOff;
}

function route() {
  const m = location.hash.match(/^#run=(.+)$/);
  if (m) { stopIndex(); showRun(decodeURIComponent(m[1])).catch((e) => { $("run-msg").textContent = String(e); }); }
  else { if (es) { es.close(); es = null; } cur = null; showRuns().catch(() => {}); }
}

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", () => {
  $("vs").addEventListener("change", pickVs);
  $("log-job").addEventListener("change", () => { if (cur) cur.logChosen = true; followLog(true); });
  logTimer = setInterval(() => followLog(false), 2000);
  route();
});
