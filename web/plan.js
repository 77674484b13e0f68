// The plan view: the plan in force (algorithm, memory policy, solve time) and each job's
// predicted rate against its LP bound, with the controller's submissions and re-plans.

import { getOrNull, get } from './api.js';
import { bar, clear, el, fmt, fmtDateTime } from './util.js';

export class PlanView {
  constructor(ctx) {
    this.ctx = ctx;
  }

  async refresh() {
    const [plan, jobsPage] = await Promise.all([getOrNull('/plan'), get('/jobs?limit=1000&state=pending,scheduled,running')]);
    const facts = clear(document.getElementById('plan-facts'));
    const tbody = clear(document.querySelector('#plan-table tbody'));
    if (!plan) {
      facts.append(el('p', { class: 'muted' }, 'No plan has been computed yet.'));
      return;
    }
    const names = new Map(jobsPage.jobs.map((j) => [j.id, j.spec && j.spec.name]));
    const bounded = plan.jobs.filter((j) => j.lp_bound_gbps);
    const ratio = bounded.length
      ? bounded.reduce((s, j) => s + j.rate_gbps / j.lp_bound_gbps, 0) / bounded.length : null;
    const f = [
      ['Version', plan.version],
      ['Algorithm', plan.algorithm],
      ['Memory policy', plan.memory_policy || 'static'],
      ['Solve time', `${fmt(plan.solve_ms, 1)} ms`],
      ['Jobs', plan.jobs.length],
      ['Mean rate / LP bound', ratio == null ? '—' : `${fmt(100 * ratio, 1)}%`],
      ['Created', fmtDateTime(plan.created_ms)],
    ];
    facts.append(...f.map(([k, v]) => el('div', {}, el('b', {}, k), el('span', {}, v))));
    const maxRate = Math.max(1e-9, ...plan.jobs.map((j) => Math.max(j.rate_gbps || 0, j.lp_bound_gbps || 0)));
    for (const j of plan.jobs) {
      const aggs = Object.values(j.aggregators || {}).reduce((s, n) => s + n, 0);
      const shape = j.ring && j.ring.length ? `ring of ${j.ring.length}` :
        `${Object.keys(j.ps_shares || {}).length} PS, ${Object.keys(j.aggregators || {}).length} INA switch(es)`;
      tbody.append(el('tr', {},
        el('td', { class: 'num' }, el('a', { href: `#/jobs/${j.job_id}` }, j.job_id)),
        el('td', {}, names.get(j.job_id) || ''),
        el('td', { class: 'num' }, fmt(j.rate_gbps, 2)),
        el('td', { class: 'num' }, j.lp_bound_gbps != null ? fmt(j.lp_bound_gbps, 2) : '—'),
        el('td', {}, j.lp_bound_gbps
          ? bar(j.rate_gbps / j.lp_bound_gbps, `${fmt(100 * j.rate_gbps / j.lp_bound_gbps, 1)}%`, 'rate')
          : bar(j.rate_gbps / maxRate, 'no bound', 'rate')),
        el('td', { class: 'num' }, fmt(j.iteration_ms, 1)),
        el('td', { class: 'num' }, fmt(j.comm_ms, 1)),
        el('td', { class: 'num' }, j.batch_size || '—'),
        el('td', { class: 'num' }, j.priority),
        el('td', { class: 'num' }, aggs),
        el('td', {}, shape),
      ));
    }
  }
}
