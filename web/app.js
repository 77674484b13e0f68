// The INAC dashboard: sign-in, the hash router (#/fabric, #/jobs, #/jobs/<id>, #/plan, #/events),
// the refresh loop (the shown view every REFRESH_MS, and at most once a second after events of
// the stream), and the role gate: elements marked data-requires="operator" or "admin" are shown
// only to tokens of that role or above (the API refuses the others with 403 anyway).

import { ApiError, get, session, streamEvents } from './api.js';
import { TimeChart } from './charts.js';
import { EventsView } from './events.js';
import { FabricView } from './fabric.js';
import { JobsView, JobView } from './jobs.js';
import { PlanView } from './plan.js';
import { throttle, toast } from './util.js';

const REFRESH_MS = 5000;
const RANK = { viewer: 1, operator: 2, admin: 3 };

const state = { role: 'viewer', name: '', views: null, current: null, timer: null, stream: null };
// For tests and the curious: the views and their refresh counters (never the token).
window.inac = { refreshes: {}, errors: [] };

const ctx = { can: (role) => (RANK[state.role] || 0) >= RANK[role] };

function show(id, on) {
  document.getElementById(id).hidden = !on;
}

async function whoami() {
  try {
    return await get('/whoami');
  } catch (e) {
    if (e instanceof ApiError && (e.status === 401 || e.status === 403)) return null;
    throw e;
  }
}

async function boot() {
  document.getElementById('login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const input = document.getElementById('token');
    session.setToken(input.value.trim());
    input.value = '';
    const me = await whoami().catch(() => null);
    if (!me) {
      session.clear();
      document.getElementById('login-error').textContent =
        'This token was refused (unknown token, or a worker token).';
      return;
    }
    start(me);
  });
  document.getElementById('signout').addEventListener('click', () => {
    session.clear();
    location.hash = '';
    location.reload();
  });
  const me = await whoami().catch(() => null);
  if (me) start(me);
  else {
    session.clear();
    show('login', true);
    document.getElementById('token').focus();
  }
}

function start(me) {
  state.role = me.role;
  state.name = me.name;
  show('login', false);
  show('nav', true);
  show('session', true);
  document.getElementById('who').textContent = me.auth ? `${me.name} (${me.role})` :
    'no authentication configured';
  for (const node of document.querySelectorAll('[data-requires]')) {
    if (!ctx.can(node.dataset.requires)) node.hidden = true;
  }
  const fabric = new FabricView(ctx);
  fabric.utilChart = new TimeChart(document.getElementById('chart-util'), { yLabel: 'share' });
  fabric.ctlChart = new TimeChart(document.getElementById('chart-ctl'), { stepped: true });
  state.views = {
    fabric,
    jobs: new JobsView(ctx),
    job: new JobView(ctx),
    plan: new PlanView(ctx),
    events: new EventsView(ctx),
  };
  Object.assign(window.inac, state.views, { role: me.role });
  window.addEventListener('hashchange', route);
  route();
  startStream();
}

async function fabricCharts(fabric) {
  const [sw, ctl] = await Promise.all([get('/stats/switches'), get('/stats/controller')]);
  const n = sw.times_ms.length;
  const mean = [], max = [];
  for (let i = 0; i < n; i++) {
    let s = 0, c = 0, m = null;
    for (const x of sw.switches) {
      const v = x.aggregator_utilisation[i];
      if (v == null) continue;
      s += v; c++;
      m = m == null ? v : Math.max(m, v);
    }
    mean.push(c ? s / c : null);
    max.push(m);
  }
  const latest = (x) => x.aggregator_utilisation[n - 1] ?? 0;
  const top = sw.switches.slice().sort((a, b) => latest(b) - latest(a)).slice(0, 4)
    .filter((x) => latest(x) > 0);
  fabric.utilChart.setData(sw.times_ms, [
    { label: 'mean', values: mean },
    { label: 'max', values: max },
    ...top.map((x) => ({ label: x.id, values: x.aggregator_utilisation })),
  ]);
  fabric.ctlChart.setData(ctl.times_ms, [
    { label: 'submissions', values: ctl.submissions },
    { label: 're-plans', values: ctl.replans },
  ]);
}

function route() {
  const hash = location.hash || '#/fabric';
  const m = hash.match(/^#\/jobs\/(\d+)$/);
  let name = m ? 'job' : hash.slice(2);
  if (!state.views[name]) name = 'fabric';
  for (const v of ['fabric', 'jobs', 'job', 'plan', 'events']) show(`view-${v}`, v === name);
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.view === name || (name === 'job' && a.dataset.view === 'jobs'));
  }
  if (name === 'job') state.views.job.show(Number(m[1]));
  state.views.events.visible = name === 'events';
  state.current = name;
  document.body.dataset.view = name;
  refreshNow();
}

let inflight = null;
async function refreshNow() {
  clearTimeout(state.timer);
  const name = state.current;
  const view = state.views[name];
  if (inflight) {
    await inflight.catch(() => {});
    if (state.current !== name) return;
  }
  inflight = (async () => {
    try {
      await view.refresh();
      if (name === 'fabric') await fabricCharts(view);
      window.inac.refreshes[name] = (window.inac.refreshes[name] || 0) + 1;
    } catch (e) {
      window.inac.errors.push(String(e.message || e));
      if (e instanceof ApiError && e.status === 401) {
        session.clear();
        location.reload();
        return;
      }
      toast(`${name}: ${e.message}`, true);
    }
  })();
  await inflight;
  inflight = null;
  if (state.current === name && !document.hidden) {
    clearTimeout(state.timer);
    state.timer = setTimeout(refreshNow, REFRESH_MS);
  }
}

const refreshSoon = throttle(() => {
  if (state.current !== 'events' && !document.hidden) refreshNow();
}, 1000);

document.addEventListener('visibilitychange', () => {
  if (!document.hidden && state.views) refreshNow();
});

async function startStream() {
  const live = document.getElementById('live');
  const events = state.views.events;
  let since = 0;
  try {
    const tail = await get('/events?tail=200');
    for (const ev of tail.events) events.add(ev);
    since = tail.last_seq;
  } catch (e) {
    toast(`events: ${e.message}`, true);
  }
  const controller = new AbortController();
  state.stream = controller;
  streamEvents({
    since,
    signal: controller.signal,
    onEvent: (ev) => {
      events.add(ev);
      refreshSoon();
    },
    onState: (on) => {
      live.className = on ? 'live on' : 'live off';
      live.title = on ? 'event stream connected' : 'event stream disconnected';
    },
  });
}

boot();
