// The dashboard in a real browser (docs/dashboard.md): Debian's chromium, headless,
// driven by playwright-core, against `inac serve --demo` (fat-tree k=4, 20 emulated P4Runtime
// switches, 3 jobs) started with a viewer, an operator and an admin token, then against a
// controller holding a fat-tree k=16 (320 switches). Screenshots of every view go to
// $INAC_BROWSER_OUT; figures are printed as one JSON line (`dashboard_figures`).
//
// Run through run.sh (CTest `browser_dashboard`), which skips when chromium or node_modules are
// missing. Environment: INAC_BIN (the inac binary), INAC_BROWSER_OUT, INAC_CHROMIUM.

import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chromium } from 'playwright-core';

const INAC = process.env.INAC_BIN;
const OUT = process.env.INAC_BROWSER_OUT;
const CHROMIUM = process.env.INAC_CHROMIUM || '/usr/bin/chromium';
assert.ok(INAC && OUT, 'INAC_BIN and INAC_BROWSER_OUT must be set (run.sh sets them)');

const TOKENS = {
  viewer: 'viewer-browser-test-0123456789',
  operator: 'operator-browser-test-0123456789',
  admin: 'admin-browser-test-0123456789',
};
const figures = {};
// Errors the pages logged (script errors, content-policy violations); answers the API refused on
// purpose ("Failed to load resource": the 403s below, a 404 before the first plan) do not count.
const pageErrors = [];

// Starts `inac serve` (extra args) with the three tokens on 127.0.0.1 port 0; resolves with
// {base, proc, dir} once it prints its `listening on` line.
async function startServer(name, args) {
  const dir = mkdtempSync(join(tmpdir(), `inac-browser-${name}-`));
  const config = {
    tokens: Object.entries(TOKENS).map(([role, token]) => ({ name: `${role}-test`, token, role })),
  };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  const proc = spawn(INAC, ['serve', '--config', join(dir, 'config.json'), '--db',
    join(dir, 'inac.db'), '--listen', '127.0.0.1:0', '--log-level', 'warn', ...args],
  { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4000); });
  const base = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${name}: no "listening on" line in 60 s\n${stderr}`)), 60000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on ([\d.]+):(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(`http://${m[1]}:${m[2]}`);
      }
    });
    proc.on('exit', (code) => reject(new Error(`${name}: inac serve exited ${code}\n${stderr}`)));
  });
  return { base, proc, dir };
}

async function stopServer(server) {
  if (!server) return;
  const exited = new Promise((r) => server.proc.on('exit', r));
  server.proc.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 15000))]);
  if (server.proc.exitCode === null) server.proc.kill('SIGKILL');
  rmSync(server.dir, { recursive: true, force: true });
}

async function api(server, method, path, token, body) {
  const res = await fetch(`${server.base}/api/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

// A page signed in with `token` (typed into the form, as a user would).
async function signIn(browser, server, token) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) pageErrors.push(m.text());
  });
  await page.goto(`${server.base}/`);
  await page.fill('#token', token);
  await page.click('#login-form button[type=submit]');
  await page.waitForFunction(() => (window.inac.refreshes.fabric || 0) >= 1, null, { timeout: 30000 });
  return { context, page };
}

async function show(page, hash, view) {
  const before = await page.evaluate((v) => window.inac.refreshes[v] || 0, view);
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForFunction(([v, n]) => (window.inac.refreshes[v] || 0) > n, [view, before],
    { timeout: 30000 });
}

describe('dashboard on the demo fabric (fat-tree k=4)', () => {
  let browser;
  let server;
  let viewer;
  let operator;
  let jobId;

  before(async () => {
    server = await startServer('demo', ['--demo']);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  });

  after(async () => {
    if (browser) await browser.close();
    await stopServer(server);
  });

  test('the page and its libraries are served without a token; the data is not', async () => {
    const index = await fetch(`${server.base}/`);
    assert.equal(index.status, 200);
    assert.match(index.headers.get('content-type'), /text\/html/);
    assert.equal((await fetch(`${server.base}/ui/vendor/cytoscape.min.js`)).status, 200);
    assert.equal((await fetch(`${server.base}/api/v1/switches`)).status, 401);
  });

  test('every switch of the fabric is drawn', async () => {
    viewer = await signIn(browser, server, TOKENS.viewer);
    const { page } = viewer;
    const switches = (await api(server, 'GET', '/switches', TOKENS.viewer)).json.switches;
    assert.equal(switches.length, 20);
    const drawn = await page.evaluate(() => window.inac.fabric.cy.nodes('.switch').map((n) => n.id()).sort());
    assert.deepEqual(drawn, switches.map((s) => s.id).sort());
    // The token is never shown nor put in the URL.
    const text = await page.evaluate(() => document.body.innerText);
    assert.ok(!text.includes(TOKENS.viewer));
    assert.ok(!page.url().includes(TOKENS.viewer));
    assert.equal(await page.textContent('#who'), 'viewer-test (viewer)');
    // A switch's panel: connection, primary, versions, table occupancy.
    await page.evaluate(() => window.inac.fabric.select({ kind: 'switch', id: 'e0_0' }));
    await page.waitForSelector('#fabric-panel h3:has-text("Table occupancy")');
    const panel = await page.textContent('#fabric-panel');
    assert.match(panel, /Connected/);
    assert.match(panel, /Primary/);
    assert.match(panel, /Applied version/);
    assert.match(panel, /ina_worker/);
    await page.screenshot({ path: join(OUT, 'fabric.png') });
    await page.evaluate(() => window.inac.fabric.select(null));
  });

  test('a job submitted through the API appears in the jobs view within 2 s, its tree in the job view', async () => {
    operator = await signIn(browser, server, TOKENS.operator);
    const { page } = operator;
    await show(page, '#/jobs', 'jobs');
    const submitted = await api(server, 'POST', '/jobs', TOKENS.operator, {
      name: 'browser-test', tenant: 'browser', workers: ['h1_0_0', 'h1_0_1', 'h2_0_0'],
      parameter_servers: ['h3_0_0'], model: 'ResNet50', iterations: 100, batch_size: 32,
    });
    assert.equal(submitted.status, 201, JSON.stringify(submitted.json));
    jobId = submitted.json.id;
    const t0 = Date.now();
    await page.waitForSelector(`#jobs-table tr[data-job="${jobId}"]`, { timeout: 2000 });
    figures.job_in_jobs_view_ms = Date.now() - t0;
    const row = await page.textContent(`#jobs-table tr[data-job="${jobId}"]`);
    assert.match(row, /browser-test/);
    await page.screenshot({ path: join(OUT, 'jobs.png') });

    await show(page, `#/jobs/${jobId}`, 'job');
    await page.waitForFunction((id) => window.inac.job.jobId === id &&
      window.inac.job.cy && window.inac.job.cy.edges('.tree').length > 0, jobId, { timeout: 15000 });
    const drawn = await page.evaluate(() => ({
      nodes: window.inac.job.cy.nodes().map((n) => n.id()),
      tree: window.inac.job.cy.edges('.tree').length,
      up: window.inac.job.cy.edges('.up').length,
    }));
    for (const h of ['h1_0_0', 'h1_0_1', 'h2_0_0', 'h3_0_0']) assert.ok(drawn.nodes.includes(h), h);
    assert.ok(drawn.tree >= 3, JSON.stringify(drawn));
    // An operator may cancel it (the viewer test below checks the opposite).
    assert.equal(await page.isVisible('#job-cancel'), true);
    await page.screenshot({ path: join(OUT, 'job.png') });
  });

  test('the job view shows the data path its workers report', async () => {
    const { page } = operator;
    await show(page, `#/jobs/${jobId}`, 'job');
    assert.equal(await page.$('#job-data-path'), null);  // no report yet
    const report = (worker, path, allreduces, fallbacks, reason) => api(server, 'POST',
      `/jobs/${jobId}/data-path`, TOKENS.operator, { worker, path, allreduces, fallbacks, reason });
    assert.equal((await report('h1_0_0', 'ina', 12, 0)).status, 200);
    const mixed = await report('h1_0_1', 'fallback', 12, 2, 'no aggregator grant');
    assert.equal(mixed.status, 200, JSON.stringify(mixed.json));
    assert.equal(mixed.json.state, 'mixed');
    await page.waitForFunction(() => /fallback: no aggregator grant/.test(
      (document.getElementById('job-data-path') || {}).textContent || ''), null, { timeout: 15000 });
    assert.match(await page.textContent('#job-data-path'), /24 all-reduces, 2 fallbacks/);
    await page.screenshot({ path: join(OUT, 'job-data-path.png') });
    assert.equal((await report('h1_0_1', 'ina', 13, 2)).status, 200);
    assert.equal((await report('h2_0_0', 'ina', 13, 0)).status, 200);
    await page.waitForFunction(() => /INA active/.test(
      (document.getElementById('job-data-path') || {}).textContent || ''), null, { timeout: 15000 });
  });

  test('a link set down shows as down', async () => {
    const { page } = viewer;
    const topology = (await api(server, 'GET', '/topology', TOKENS.viewer)).json;
    const link = topology.links.find((l) => l.a.startsWith('a') || l.b.startsWith('a'));
    const edge = `link:${link.id}`;
    assert.equal(await page.evaluate((id) => window.inac.fabric.cy.getElementById(id).hasClass('down'), edge), false);
    const patched = await api(server, 'PATCH', `/links/${encodeURIComponent(link.id)}`, TOKENS.admin, { status: 'down' });
    assert.equal(patched.status, 200, JSON.stringify(patched.json));
    const t0 = Date.now();
    await page.waitForFunction((id) => window.inac.fabric.cy.getElementById(id).hasClass('down'), edge, { timeout: 15000 });
    figures.link_down_shown_ms = Date.now() - t0;
    assert.match(await page.textContent('#fabric-summary'), /\(1 down\)/);
    await page.screenshot({ path: join(OUT, 'fabric-link-down.png') });
  });

  test('a viewer token cannot reach a write action', async () => {
    const { page } = viewer;
    await show(page, `#/jobs/${jobId}`, 'job');
    assert.equal(await page.isVisible('#job-cancel'), false);
    await show(page, '#/fabric', 'fabric');
    const link = (await api(server, 'GET', '/links', TOKENS.viewer)).json.links[0];
    await page.evaluate((id) => window.inac.fabric.select({ kind: 'link', id }), link.id);
    await page.waitForSelector('#fabric-panel h3:has-text("Link")');
    assert.equal(await page.$('[data-action="link-status"]'), null);
    // And the API refuses the writes with the viewer's token, sent from the page itself.
    const statuses = await page.evaluate(async ([id, lk]) => {
      const token = sessionStorage.getItem('inac.token');
      const h = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' };
      const del = await fetch(`/api/v1/jobs/${id}`, { method: 'DELETE', headers: h });
      const patch = await fetch(`/api/v1/links/${encodeURIComponent(lk)}`,
        { method: 'PATCH', headers: h, body: JSON.stringify({ status: 'down' }) });
      const submit = await fetch('/api/v1/jobs', { method: 'POST', headers: h, body: '{}' });
      return [del.status, patch.status, submit.status];
    }, [jobId, link.id]);
    assert.deepEqual(statuses, [403, 403, 403]);
    assert.equal((await api(server, 'GET', `/jobs/${jobId}`, TOKENS.viewer)).json.state !== 'cancelled', true);
    // An admin sees the link action (so the check above can fail).
    const admin = await signIn(browser, server, TOKENS.admin);
    await admin.page.evaluate((id) => window.inac.fabric.select({ kind: 'link', id }), link.id);
    await admin.page.waitForSelector('[data-action="link-status"]');
    await admin.context.close();
  });

  test('plan and events views, live from the event stream', async () => {
    const { page } = operator;
    await show(page, '#/plan', 'plan');
    const planRows = await page.$$eval('#plan-table tbody tr', (rows) => rows.length);
    assert.ok(planRows >= 4, `plan rows ${planRows}`);
    await page.screenshot({ path: join(OUT, 'plan.png') });
    await show(page, '#/events', 'events');
    // The link change above arrived over the stream (the page was open before it).
    await page.waitForFunction(() => [...document.querySelectorAll('#events-table tbody tr')]
      .some((tr) => /link/.test(tr.textContent)), null, { timeout: 10000 });
    const live = await page.getAttribute('#live', 'class');
    assert.match(live, /on/);
    await page.screenshot({ path: join(OUT, 'events.png') });
  });

  test('no script error or content-policy violation in any page', () => {
    assert.deepEqual(pageErrors, []);
  });
});

describe('dashboard on a fat-tree k=16 (320 switches)', () => {
  let browser;
  let server;

  before(async () => {
    server = await startServer('k16', []);
    const topology = JSON.parse(execFileSync(INAC, ['topo', 'generate', 'fat-tree', '--k', '16'],
      { maxBuffer: 64 << 20 }).toString());
    const put = await api(server, 'PUT', '/topology', TOKENS.admin, topology);
    assert.equal(put.status, 200, JSON.stringify(put.json));
    const jobs = [];
    for (let p = 0; p < 8; p++) {
      jobs.push(api(server, 'POST', '/jobs', TOKENS.operator, {
        name: `k16-${p}`, workers: [`h${p}_0_0`, `h${p}_1_0`, `h${p + 8}_0_0`],
        parameter_servers: [`h${p}_2_0`], model: 'ResNet50', iterations: 1000, batch_size: 32,
      }));
    }
    for (const r of await Promise.all(jobs)) assert.equal(r.status, 201, JSON.stringify(r.json));
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  });

  after(async () => {
    if (browser) await browser.close();
    await stopServer(server);
  });

  test('renders all 320 switches without freezing the page', async () => {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await context.newPage();
    await page.addInitScript(() => {
      window.__longTasks = [];
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) window.__longTasks.push(e.duration);
      }).observe({ type: 'longtask', buffered: true });
    });
    await page.goto(`${server.base}/`);
    await page.fill('#token', TOKENS.viewer);
    const t0 = Date.now();
    await page.click('#login-form button[type=submit]');
    await page.waitForFunction(() => (window.inac.refreshes.fabric || 0) >= 1, null, { timeout: 120000 });
    figures.k16_first_render_ms = Date.now() - t0;
    const counts = await page.evaluate(() => ({
      switches: window.inac.fabric.cy.nodes('.switch').length,
      edges: window.inac.fabric.cy.edges().length,
      build_ms: window.inac.fabric.lastBuildMs,
      update_ms: window.inac.fabric.lastUpdateMs,
    }));
    assert.equal(counts.switches, 320);
    figures.k16_edges = counts.edges;
    figures.k16_layout_build_ms = Math.round(counts.build_ms);
    figures.k16_update_ms = Math.round(counts.update_ms);
    // Responsive: a second refresh completes and the main thread answers a round trip.
    await page.waitForFunction(() => (window.inac.refreshes.fabric || 0) >= 2, null, { timeout: 60000 });
    const r0 = Date.now();
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
    figures.k16_frame_roundtrip_ms = Date.now() - r0;
    const longTasks = await page.evaluate(() => window.__longTasks);
    figures.k16_longest_task_ms = Math.round(Math.max(0, ...longTasks));
    figures.k16_long_tasks = longTasks.length;
    await page.screenshot({ path: join(OUT, 'fabric-k16.png') });
    await page.evaluate(() => { location.hash = '#/jobs'; });
    await page.waitForFunction(() => document.querySelectorAll('#jobs-table tbody tr').length >= 8, null, { timeout: 30000 });
    await page.screenshot({ path: join(OUT, 'jobs-k16.png') });
    await context.close();
  });
});

after(() => {
  console.log(JSON.stringify({ dashboard_figures: figures }));
});
