// page-test.mjs: the status page in a real browser (Debian's Chromium,
// driven by playwright-core), for tests/integration/web/page.sh.
//
//   node page-test.mjs live URL RUN SHOTDIR
//     during RUN: jobs change state without a reload, the loss curve gains
//     points, the verdict appears at the end, and markup from the store
//     (the run's description, a job's log) is shown as text;
//   node page-test.mjs reconnect URL RUN SHOTDIR KILLCMD RESTARTCMD
//     the daemon is killed -9 while the page follows RUN and started again:
//     the page reconnects and resumes without a duplicate event.
//   node page-test.mjs index URL RUN SHOTDIR SUBMITCMD
//     the runs index is live (says so, not "connecting"), its dates are
//     ISO 8601; SUBMITCMD submits RUN, whose job "broken" fails: its row
//     appears and turns failed without a reload, and RUN's page opens its
//     log panel on the failed job. (tests/integration/web/index.sh)
// Prints one JSON line of figures; exits non-zero on a failed check.
import { chromium } from "playwright-core";
import { execSync } from "node:child_process";

const [mode, url, run, shots, killCmd, restartCmd] = process.argv.slice(2);
const submitCmd = killCmd;
const fail = (m) => { console.error("FAIL: " + m); process.exit(1); };
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
// Every request needs a credential: the bearer token in PL_TOKEN (it
// outlives the daemon, which the reconnect test kills; a session does not).
const page = await browser.newPage({ viewport: { width: 1280, height: 1100 },
  extraHTTPHeaders: process.env.PL_TOKEN ? { Authorization: "Bearer " + process.env.PL_TOKEN } : {} });
let loads = 0, dialogs = 0;
const consoleErrors = [];
page.on("load", () => { loads++; });
page.on("dialog", async (d) => { dialogs++; await d.dismiss(); });
page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
page.on("pageerror", (e) => consoleErrors.push(String(e)));

const stateOf = (job) => page.evaluate((j) => {
  const g = document.querySelector(`#dag g.box[data-job="${j}"]`);
  return g ? g.getAttribute("class").replace("box ", "") : null;
}, job);
const waitState = async (job, states, ms) => {
  const t0 = Date.now();
  for (;;) {
    const s = await stateOf(job);
    if (states.includes(s)) return s;
    if (Date.now() - t0 > ms) fail(`job ${job} not ${states} after ${ms} ms (is ${s})`);
    await page.waitForTimeout(100);
  }
};
const points = () => page.evaluate(() => {
  const p = document.querySelector("#loss polyline.l0");
  return p ? Number(p.getAttribute("data-points")) : 0;
});

await page.goto(url + (mode === "index" ? "/#" : "/#run=" + encodeURIComponent(run)));
const out = { mode };
const rowState = (r) => page.evaluate((name) => {
  for (const tr of document.querySelectorAll("#runs tbody tr"))
    if (tr.cells[0].textContent === name) return tr.cells[1].textContent;
  return null;
}, r);
if (mode === "index") {
  await page.waitForFunction(() => document.getElementById("live").textContent === "live", null,
    { timeout: 10000 }).catch(() => fail("the index does not say live: " +
      "it says " + JSON.stringify(document.getElementById("live").textContent)));
  await page.waitForSelector("#runs tbody tr", { timeout: 10000 });
  const dates = await page.evaluate(() => [...document.querySelectorAll("#runs tbody tr")].map((tr) => tr.cells[3].textContent));
  for (const d of dates)
    if (!/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/.test(d)) fail("a date not in ISO 8601: " + d);
  out.dates = dates;
  if (await rowState(run) !== null) fail(run + " is listed before it was submitted");
  execSync(submitCmd);
  const t0 = Date.now();
  let s = null;
  while ((s = await rowState(run)) === null && Date.now() - t0 < 15000) await page.waitForTimeout(100);
  if (s === null) fail("the submitted run did not appear in the index without a reload");
  out.first_state = s;
  while ((s = await rowState(run)) !== "failed" && Date.now() - t0 < 30000) await page.waitForTimeout(100);
  if (s !== "failed") fail("the index did not show the run failed (is " + s + ")");
  await page.screenshot({ path: shots + "/web-index.png", fullPage: true });
  if (loads !== 1) fail("the index was reloaded: " + loads + " loads");
  // The run's page: the log panel on the failed job.
  await page.click(`#runs a[href="#run=${encodeURIComponent(run)}"]`);
  await page.waitForFunction(() => document.getElementById("run-state").textContent === "failed", null,
    { timeout: 10000 });
  const lj = await page.evaluate(() => document.getElementById("log-job").value);
  if (lj !== "broken") fail("the log panel opened on " + lj + ", not the failed job broken");
  await page.waitForFunction(() => document.getElementById("log").textContent.includes("the disk is on fire"),
    null, { timeout: 10000 }).catch(() => fail("the failed job's log is not shown"));
  out.log_job = lj;
  await page.screenshot({ path: shots + "/web-failed-run.png", fullPage: true });
} else if (mode === "live") {
  const seen = new Set();
  await waitState("prep", ["running", "succeeded"], 30000);
  seen.add(await stateOf("train"));
  await waitState("train", ["running"], 60000);
  seen.add("running");
  // The curve gains points while the job runs, without a reload.
  const t0 = Date.now();
  let p1 = 0;
  while ((p1 = await points()) < 2 && Date.now() - t0 < 60000) await page.waitForTimeout(100);
  if (p1 < 2) fail("the loss curve has no points while train runs");
  let p2 = p1;
  while ((p2 = await points()) <= p1 && Date.now() - t0 < 90000) await page.waitForTimeout(100);
  if (p2 <= p1) fail(`the loss curve did not grow (${p1} points)`);
  out.points_while_running = [p1, p2];
  await page.screenshot({ path: shots + "/web-running.png", fullPage: true });
  await waitState("train", ["succeeded"], 120000);
  await waitState("gate", ["rejected", "succeeded"], 60000);
  await page.waitForFunction(() => document.getElementById("run-state").textContent === "rejected",
    null, { timeout: 30000 });
  await page.waitForFunction(() => !document.getElementById("verdict-box").hidden &&
    document.getElementById("verdict").textContent.length > 10, null, { timeout: 30000 });
  out.verdict = await page.textContent("#verdict");
  out.points_final = await points();
  out.train_states = [...seen];
  // Markup from the store is text.
  const desc = await page.textContent("#run-desc");
  if (!desc.includes("<img src=x onerror=alert(1)>")) fail("the description is not shown as text: " + desc);
  await page.selectOption("#log-job", "prep");
  await page.waitForFunction(() => document.getElementById("log").textContent.includes("<img src=x onerror=alert(1)>"),
    null, { timeout: 10000 });
  const imgs = await page.evaluate(() => document.querySelectorAll("img").length);
  if (imgs !== 0) fail(imgs + " img elements in the page: markup was rendered");
  if (dialogs !== 0) fail("an alert ran");
  await page.screenshot({ path: shots + "/web-verdict.png", fullPage: true });
  out.loads_until_verdict = loads;
  if (loads !== 1) fail("the page was reloaded: " + loads + " loads");
  // The runs list.
  await page.goto(url + "/#");
  await page.waitForSelector("#runs tbody tr", { timeout: 10000 });
  await page.screenshot({ path: shots + "/web-runs.png", fullPage: true });
} else if (mode === "reconnect") {
  await waitState("a", ["running"], 30000);
  await page.waitForFunction(() => window.plStats.opens >= 1, null, { timeout: 10000 });
  execSync(killCmd);
  await page.waitForTimeout(1500);
  execSync(restartCmd);
  await page.waitForFunction(() => document.getElementById("run-state").textContent === "succeeded",
    null, { timeout: 90000 });
  await page.waitForTimeout(500);
}
const st = await page.evaluate(() => window.plStats);
Object.assign(out, st, { loads, dialogs, console_errors: consoleErrors });
if (st.duplicates !== 0) fail("duplicate events: " + JSON.stringify(st));
if (mode === "reconnect" && st.reconnects < 1) fail("the page did not reconnect: " + JSON.stringify(st));
if (mode === "reconnect" && loads !== 1) fail("the page was reloaded: " + loads + " loads");
if (consoleErrors.some((e) => /Content Security Policy|Refused to/.test(e))) fail("CSP violations: " + consoleErrors);
console.log(JSON.stringify(out));
await browser.close();
