// The jobs view (a table: state, algorithm, priority, batch size, predicted and reported
// iteration time, rate, progress; filter and sort) and the job view (its aggregation tree or
// ring drawn on the topology, aggregators per switch, its data path as its workers report it,
// its events, its rate over time).

import { allJobs, get, getOrNull, request } from './api.js';
import { TimeChart } from './charts.js';
import { makeGraph } from './fabric.js';
import { layeredLayout } from './topology.js';
import { badge, bar, clear, el, fmt, fmtDateTime, fmtTime, naturalCompare, toast } from './util.js';

const ACTIVE = new Set(['pending', 'scheduled', 'running']);
const TERMINAL = new Set(['completed', 'cancelled', 'failed']);

function lastValue(values) {
  for (let i = (values || []).length - 1; i >= 0; i--) if (values[i] != null) return values[i];
  return null;
}

function algorithmOf(job, planJob, plan) {
  if (!planJob) return '—';
  if (planJob.ring && planJob.ring.length) return `${plan.algorithm} (ring)`;
  return plan.algorithm;
}

// A job's data path as its workers report it (POST /jobs/{id}/data-path): "INA active", "PS
// only", "fallback: <reason>" or mixed, with the all-reduce and fallback counts; each worker's
// latest report in the tooltip.
function dataPath(dp) {
  const count = (n, one) => `${Number(n).toLocaleString()} ${one}${n === 1 ? '' : 's'}`;
  const title = (dp.workers || []).map((w) => {
    const why = w.reason ? ` (${w.reason})` : '';
    return `${w.worker}: ${w.path}${why}, ${count(w.allreduces, 'all-reduce')}, ` +
      count(w.fallbacks, 'fallback');
  }).join('\n');
  return el('span', { id: 'job-data-path', title },
    badge(dp.summary, `dp-${dp.state}`),
    ` ${count(dp.allreduces, 'all-reduce')}, ${count(dp.fallbacks, 'fallback')}`);
}

export class JobsView {
  constructor(ctx) {
    this.ctx = ctx;
    this.table = document.getElementById('jobs-table');
    this.tbody = this.table.querySelector('tbody');
    this.filter = document.getElementById('jobs-filter');
    this.state = document.getElementById('jobs-state');
    this.count = document.getElementById('jobs-count');
    this.sortKey = 'id';
    this.sortDir = -1;
    this.rows = [];
    this.chart = new TimeChart(document.getElementById('chart-rates'), { yLabel: 'Gbps' });
    this.filter.addEventListener('input', () => this.render());
    this.state.addEventListener('change', () => this.render());
    for (const th of this.table.querySelectorAll('th[data-key]')) {
      th.addEventListener('click', () => {
        const key = th.dataset.key;
        this.sortDir = this.sortKey === key ? -this.sortDir : 1;
        this.sortKey = key;
        this.render();
      });
    }
  }

  async refresh() {
    const [jobs, plan, stats] = await Promise.all([
      allJobs(), getOrNull('/plan'), get('/stats/jobs'),
    ]);
    const planned = new Map(((plan && plan.jobs) || []).map((j) => [j.job_id, j]));
    const series = new Map(stats.jobs.map((s) => [s.job_id, s]));
    this.rows = jobs.map((job) => {
      const pj = planned.get(job.id);
      const st = series.get(job.id);
      const spec = job.spec || {};
      return {
        id: job.id,
        name: spec.name || '',
        tenant: spec.tenant || '',
        state: job.state,
        algorithm: algorithmOf(job, pj, plan),
        priority: spec.priority ?? 0,  // as submitted; the data-plane one is in the job's facts
        batch: pj && pj.batch_size ? pj.batch_size : spec.batch_size,
        rate: pj ? pj.rate_gbps : null,
        predicted: pj ? pj.iteration_ms : null,
        reported: st ? lastValue(st.reported_iteration_ms) : null,
        progress: spec.iterations ? job.iterations_done / spec.iterations : 0,
        done: job.iterations_done,
        iterations: spec.iterations,
      };
    });
    this.render();
    const shown = stats.jobs.slice(-8);
    this.chart.setData(stats.times_ms,
      shown.map((s) => ({ label: `job ${s.job_id}`, values: s.rate_gbps })));
  }

  render() {
    const q = this.filter.value.trim().toLowerCase();
    const stateFilter = this.state.value;
    let rows = this.rows.filter((r) => {
      if (stateFilter === 'active' && !ACTIVE.has(r.state)) return false;
      if (stateFilter && stateFilter !== 'active' && r.state !== stateFilter) return false;
      if (!q) return true;
      return `${r.id} ${r.name} ${r.tenant} ${r.state} ${r.algorithm}`.toLowerCase().includes(q);
    });
    const k = this.sortKey;
    rows.sort((a, b) => {
      const x = a[k], y = b[k];
      let d;
      if (x == null && y == null) d = 0;
      else if (x == null) d = 1;
      else if (y == null) d = -1;
      else if (typeof x === 'number' && typeof y === 'number') d = x - y;
      else d = naturalCompare(String(x), String(y));
      return d * this.sortDir || b.id - a.id;
    });
    for (const th of this.table.querySelectorAll('th[data-key]')) {
      th.classList.toggle('sorted-asc', th.dataset.key === k && this.sortDir > 0);
      th.classList.toggle('sorted-desc', th.dataset.key === k && this.sortDir < 0);
    }
    const total = rows.length;
    rows = rows.slice(0, 1000);
    clear(this.tbody);
    const frag = document.createDocumentFragment();
    for (const r of rows) {
      const tr = el('tr', { class: 'clickable', 'data-job': r.id },
        el('td', { class: 'num' }, el('a', { href: `#/jobs/${r.id}` }, r.id)),
        el('td', {}, r.name),
        el('td', {}, r.tenant),
        el('td', {}, badge(r.state)),
        el('td', {}, r.algorithm),
        el('td', { class: 'num' }, r.priority),
        el('td', { class: 'num' }, r.batch ?? '—'),
        el('td', { class: 'num' }, fmt(r.rate, 2)),
        el('td', { class: 'num' }, fmt(r.predicted, 1)),
        el('td', { class: 'num' }, fmt(r.reported, 1)),
        el('td', {}, bar(r.progress, `${r.done}/${r.iterations}`)),
      );
      tr.addEventListener('click', (e) => {
        if (e.target.tagName !== 'A') location.hash = `#/jobs/${r.id}`;
      });
      frag.append(tr);
    }
    this.tbody.append(frag);
    this.count.textContent = total > rows.length ? `${rows.length} of ${total} jobs shown` :
      `${total} job(s)`;
  }
}

export class JobView {
  constructor(ctx) {
    this.ctx = ctx;
    this.cy = null;
    this.jobId = null;
    this.layout = null;
    this.layoutVersion = null;
    this.key = '';
    this.chart = new TimeChart(document.getElementById('chart-job'), { yLabel: 'Gbps' });
    this.cancel = document.getElementById('job-cancel');
    this.cancel.addEventListener('click', () => this.cancelJob());
  }

  show(jobId) {
    if (this.jobId !== jobId) {
      this.jobId = jobId;
      this.key = '';
      document.getElementById('job-title').textContent = `Job ${jobId}`;
      clear(document.getElementById('job-facts'));
      if (this.cy) this.cy.elements().remove();
    }
  }

  async refresh() {
    const id = this.jobId;
    const [job, plan, topo, events, stats] = await Promise.all([
      get(`/jobs/${id}`),
      getOrNull('/plan'),
      request('/topology'),
      get(`/events?job=${id}&limit=500`),
      get(`/stats/jobs?job=${id}`),
    ]);
    if (id !== this.jobId) return;
    const topology = topo.data;
    const version = topo.headers.get('X-Topology-Version');
    if (version !== this.layoutVersion) {
      this.layout = layeredLayout(topology);
      this.layoutVersion = version;
      this.key = '';
    }
    const pj = plan ? (plan.jobs || []).find((j) => j.job_id === id) : null;
    const spec = job.spec || {};
    document.getElementById('job-title').textContent = `Job ${id} · ${spec.name || ''}`;
    this.cancel.hidden = !this.ctx.can('operator') || TERMINAL.has(job.state);
    const st = stats.jobs[0];
    const facts = [
      ['State', badge(job.state)],
      ['Tenant', spec.tenant],
      ['Algorithm', algorithmOf(job, pj, plan)],
      ['Priority', spec.priority ?? 0],
      ['Data-plane priority', pj ? pj.priority : '—'],
      ['Batch size', pj && pj.batch_size ? pj.batch_size : spec.batch_size],
      ['Rate', pj ? `${fmt(pj.rate_gbps, 2)} Gbps` : '—'],
      ['LP bound', pj && pj.lp_bound_gbps != null ? `${fmt(pj.lp_bound_gbps, 2)} Gbps` : '—'],
      ['Iteration ms predicted', pj ? fmt(pj.iteration_ms) : '—'],
      ['reported', st ? fmt(lastValue(st.reported_iteration_ms)) : '—'],
      ['Progress', bar(spec.iterations ? job.iterations_done / spec.iterations : 0,
        `${job.iterations_done}/${spec.iterations}`)],
      ['Workers', (spec.workers || []).length],
      ['Parameter servers', (spec.parameter_servers || []).length || 'ring'],
      ['Created', fmtDateTime(job.created_ms)],
    ];
    if (job.data_path) facts.push(['Data path', dataPath(job.data_path)]);
    if (job.failure_reason) facts.push(['Failure', job.failure_reason]);
    clear(document.getElementById('job-facts')).append(
      ...facts.map(([k, v]) => el('div', {}, el('b', {}, k), el('span', {}, v))));
    this.drawGraph(topology, spec, pj);
    this.fillTables(topology, pj);
    const tbody = clear(document.querySelector('#job-events tbody'));
    for (const ev of events.events.slice().reverse()) {
      tbody.append(el('tr', {}, el('td', { class: 'num' }, ev.seq), el('td', {}, fmtTime(ev.time_ms)),
        el('td', {}, ev.kind), el('td', { class: 'msg' }, ev.message)));
    }
    if (st) {
      this.chart.setData(stats.times_ms, [
        { label: 'rate Gbps', values: st.rate_gbps },
        { label: 'LP bound Gbps', values: st.lp_bound_gbps },
      ]);
    }
  }

  // The job's nodes (its hosts and every switch its flows, aggregated streams or ring cross) at
  // their fabric positions; edges: worker flows (tree), aggregated streams to the PSs (up), ring
  // hops (ring).
  drawGraph(topology, spec, pj) {
    const key = JSON.stringify([this.layoutVersion, spec.workers, pj && pj.flows,
      pj && pj.aggregator_paths, pj && pj.ring, pj && pj.aggregators]);
    if (key === this.key) return;
    this.key = key;
    const nodes = new Map();
    const isHost = new Set(topology.hosts.map((h) => h.id));
    const workers = new Set(spec.workers || []);
    const servers = new Set(spec.parameter_servers || []);
    const addNode = (id) => {
      if (nodes.has(id) || !this.layout.positions.has(id)) return;
      const classes = [isHost.has(id) ? 'host' : 'switch'];
      if (workers.has(id)) classes.push('worker');
      if (servers.has(id)) classes.push('ps');
      const aggs = pj && pj.aggregators ? pj.aggregators[id] : 0;
      nodes.set(id, {
        group: 'nodes',
        data: { id, label: aggs ? `${id}\n${aggs} agg` : id, color: aggs ? '#2ea043' : '#3b4a5e' },
        position: { ...this.layout.positions.get(id) },
        classes: classes.join(' '),
      });
    };
    for (const h of [...workers, ...servers]) addNode(h);
    const edges = new Map();
    const addPath = (path, cls) => {
      for (let i = 0; i + 1 < (path || []).length; i++) {
        addNode(path[i]);
        addNode(path[i + 1]);
        const id = `${cls}:${path[i]}>${path[i + 1]}`;
        if (!edges.has(id) && nodes.has(path[i]) && nodes.has(path[i + 1])) {
          edges.set(id, { group: 'edges', data: { id, source: path[i], target: path[i + 1] }, classes: cls });
        }
      }
    };
    if (pj) {
      for (const f of pj.flows || []) addPath(f.path, 'tree');
      for (const a of pj.aggregator_paths || []) addPath(a.path, 'up');
      const ring = pj.ring || [];
      for (let i = 0; i < ring.length && ring.length > 1; i++) {
        addPath([ring[i], ring[(i + 1) % ring.length]], 'ring');
      }
      for (const sw of Object.keys(pj.aggregators || {})) addNode(sw);
    }
    if (!this.cy) {
      this.cy = makeGraph(document.getElementById('job-graph'), 0);
    }
    this.cy.batch(() => {
      this.cy.elements().remove();
      this.cy.add([...nodes.values()]);
      this.cy.add([...edges.values()]);
    });
    this.cy.fit(undefined, 30);
  }

  fillTables(topology, pj) {
    const aggs = clear(document.querySelector('#job-aggs tbody'));
    const ps = clear(document.querySelector('#job-ps tbody'));
    if (!pj) {
      aggs.append(el('tr', {}, el('td', { colspan: 3, class: 'muted' }, 'not in the current plan')));
      return;
    }
    const byId = new Map(topology.switches.map((s) => [s.id, s]));
    for (const [sw, n] of Object.entries(pj.aggregators || {}).sort((a, b) => naturalCompare(a[0], b[0]))) {
      const total = byId.get(sw) && byId.get(sw).ina ? byId.get(sw).ina.aggregators : 0;
      aggs.append(el('tr', {}, el('td', {}, sw), el('td', { class: 'num' }, n), el('td', { class: 'num' }, total)));
    }
    for (const [id, share] of Object.entries(pj.ps_shares || {})) {
      ps.append(el('tr', {}, el('td', {}, id), el('td', { class: 'num' }, fmt(share * 100, 1) + '%')));
    }
  }

  async cancelJob() {
    if (!confirm(`Cancel job ${this.jobId}?`)) return;
    try {
      await request(`/jobs/${this.jobId}`, { method: 'DELETE' });
      toast(`job ${this.jobId} cancelled`);
      await this.refresh();
    } catch (e) {
      toast(e.message, true);
    }
  }
}
