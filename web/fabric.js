// The fabric view: the topology drawn with Cytoscape.js at the positions of layeredLayout
// (no force layout), switches coloured by aggregator utilisation (the plan's grants over the
// switch's aggregators), links by the plan's load over their capacity (shades of blue; red only
// beyond it), down links dashed red.
// A click on a switch shows its P4Runtime session, pipeline, versions, errors and table
// occupancy (GET /switches/{id}); on a link its load and state, with set up/down for admins.
// Updates are batched (cy.batch) and only rebuild the graph when the topology's version changes.

import { get, getOrNull, request } from './api.js';
import { layeredLayout, linkLoads, switchGrants } from './topology.js';
import {
  bar, badge, clear, el, fmt, fmtDateTime, kv, loadColor, NO_INA_COLOR, toast, utilColor,
} from './util.js';

// Hosts are drawn up to this many; beyond, each ToR's label carries its host count instead.
export const HOST_LIMIT = 256;
// Graphs with more elements than this get Cytoscape's cheaper viewport rendering.
const LARGE = 1500;

export const GRAPH_STYLE = [
  { selector: 'node', style: {
    label: 'data(label)', 'font-size': 10, color: '#c9d1d9', 'text-valign': 'bottom',
    'text-background-color': '#0b0f14', 'text-background-opacity': 0.7, 'text-background-padding': 1,
    'text-margin-y': 2, 'min-zoomed-font-size': 7, 'text-wrap': 'wrap' } },
  { selector: 'node.switch', style: {
    shape: 'round-rectangle', width: 30, height: 18, 'background-color': 'data(color)',
    'border-width': 1, 'border-color': '#30363d' } },
  { selector: 'node.switch.disconnected', style: { 'border-color': '#f85149', 'border-width': 3 } },
  { selector: 'node.host', style: {
    shape: 'ellipse', width: 10, height: 10, 'background-color': '#6e7681', 'font-size': 7 } },
  { selector: 'node.ps', style: { 'background-color': '#d29922', width: 14, height: 14 } },
  { selector: 'node.worker', style: { 'background-color': '#58a6ff', width: 12, height: 12 } },
  { selector: 'edge', style: {
    'curve-style': 'haystack', width: 'data(width)', 'line-color': 'data(color)', opacity: 0.9 } },
  { selector: 'edge.down', style: {
    'line-style': 'dashed', 'line-dash-pattern': [6, 4], 'line-color': '#f85149', width: 2.5,
    opacity: 1 } },
  { selector: 'edge.tree', style: { 'line-color': '#58a6ff', width: 3, 'curve-style': 'straight' } },
  { selector: 'edge.up', style: { 'line-color': '#d29922', width: 3, 'curve-style': 'straight' } },
  { selector: 'edge.ring', style: {
    'line-color': '#bc8cff', width: 2.5, 'line-style': 'dashed', 'curve-style': 'bezier',
    'target-arrow-shape': 'triangle', 'target-arrow-color': '#bc8cff' } },
  { selector: 'edge.context', style: { 'line-color': '#262c34', width: 1 } },
  { selector: ':selected', style: { 'border-color': '#58a6ff', 'border-width': 3, 'line-color': '#58a6ff' } },
];

export function makeGraph(container, size) {
  const large = size > LARGE;
  return cytoscape({
    container,
    elements: [],
    style: GRAPH_STYLE,
    layout: { name: 'preset' },
    minZoom: 0.03,
    maxZoom: 4,
    boxSelectionEnabled: false,
    autoungrabify: true,
    textureOnViewport: large,
    hideEdgesOnViewport: large,
    pixelRatio: large ? 1 : 'auto',
  });
}

export class FabricView {
  constructor(ctx) {
    this.ctx = ctx;
    this.container = document.getElementById('fabric-graph');
    this.panel = document.getElementById('fabric-panel');
    this.summary = document.getElementById('fabric-summary');
    this.cy = null;
    this.version = null;
    this.topology = null;
    this.switches = new Map();
    this.plan = null;
    this.selected = null;
    this.lastBuildMs = 0;
    this.lastUpdateMs = 0;
  }

  async refresh() {
    let topo;
    try {
      topo = await request('/topology');
    } catch (e) {
      if (e.status === 404) {
        this.summary.textContent = 'No topology loaded yet (PUT /api/v1/topology).';
        return;
      }
      throw e;
    }
    const [switches, plan] = await Promise.all([get('/switches'), getOrNull('/plan')]);
    const version = topo.headers.get('X-Topology-Version');
    if (version !== this.version || !this.cy) this.build(topo.data, version);
    this.topology = topo.data;
    this.switches = new Map(switches.switches.map((s) => [s.id, s]));
    this.plan = plan;
    this.update();
    if (this.selected) this.showSelected();
  }

  build(topology, version) {
    const t0 = performance.now();
    const drawHosts = topology.hosts.length <= HOST_LIMIT;
    const layout = layeredLayout(topology, { spreadHosts: drawHosts });
    const nodes = [];
    for (const s of topology.switches) {
      const p = layout.positions.get(s.id);
      nodes.push({
        group: 'nodes',
        data: { id: s.id, label: s.id, color: NO_INA_COLOR, kind: 'switch' },
        position: { x: p.x, y: p.y },
        classes: s.ina && s.ina.capable ? 'switch ina' : 'switch',
      });
    }
    if (drawHosts) {
      for (const h of topology.hosts) {
        const p = layout.positions.get(h.id);
        nodes.push({ group: 'nodes', data: { id: h.id, label: h.id, kind: 'host' },
          position: { x: p.x, y: p.y }, classes: 'host' });
      }
    }
    const drawn = new Set(nodes.map((n) => n.data.id));
    const edges = [];
    for (const l of topology.links) {
      if (!drawn.has(l.a) || !drawn.has(l.b)) continue;
      edges.push({ group: 'edges', data: { id: `link:${l.id}`, link: l.id, source: l.a,
        target: l.b, width: 1, color: '#3d444d' }, classes: l.status === 'down' ? 'down' : '' });
    }
    const size = nodes.length + edges.length;
    if (this.cy && (this.cy.elements().length > LARGE) !== (size > LARGE)) {
      this.cy.destroy();
      this.cy = null;
    }
    if (!this.cy) {
      this.cy = makeGraph(this.container, size);
      this.cy.on('tap', 'node.switch', (e) => this.select({ kind: 'switch', id: e.target.id() }));
      this.cy.on('tap', 'edge', (e) => this.select({ kind: 'link', id: e.target.data('link') }));
      this.cy.on('tap', (e) => { if (e.target === this.cy) this.select(null); });
    }
    this.cy.batch(() => {
      this.cy.elements().remove();
      this.cy.add(nodes);
      this.cy.add(edges);
    });
    this.cy.fit(undefined, 24);
    this.version = version;
    this.hostsOf = layout.hostsOf;
    this.drawHosts = drawHosts;
    this.lastBuildMs = performance.now() - t0;
  }

  update() {
    const t0 = performance.now();
    const topology = this.topology;
    const grants = switchGrants(this.plan);
    const loads = linkLoads(topology, this.plan);
    let down = 0;
    let disconnected = 0;
    this.cy.batch(() => {
      for (const s of topology.switches) {
        const node = this.cy.getElementById(s.id);
        if (node.empty()) continue;
        const st = this.switches.get(s.id);
        const ina = s.ina && s.ina.capable && s.ina.aggregators > 0;
        const util = ina ? (grants.get(s.id) || 0) / s.ina.aggregators : 0;
        const hosts = !this.drawHosts && this.hostsOf.get(s.id) ? this.hostsOf.get(s.id).length : 0;
        const label = hosts ? `${s.id}\n${hosts} hosts` : s.id;
        node.data({ color: ina ? utilColor(util) : NO_INA_COLOR, util, label });
        const off = st && st.managed && !st.connected;
        if (off) disconnected++;
        node.toggleClass('disconnected', Boolean(off));
      }
      for (const l of topology.links) {
        const edge = this.cy.getElementById(`link:${l.id}`);
        if (l.status === 'down') down++;
        if (edge.empty()) continue;
        const u = l.gbps > 0 ? (loads.get(l.id) || 0) / l.gbps : 0;
        edge.data({ width: 1 + 5 * Math.min(1, u), color: loadColor(u), load: u });
        edge.toggleClass('down', l.status === 'down');
      }
    });
    this.lastUpdateMs = performance.now() - t0;
    const hostsNote = this.drawHosts ? `${topology.hosts.length} hosts` :
      `${topology.hosts.length} hosts (not drawn over ${HOST_LIMIT}; ToR labels count them)`;
    this.summary.textContent = `topology v${this.version}: ${topology.switches.length} switches, ` +
      `${hostsNote}, ${topology.links.length} links (${down} down); ` +
      `${disconnected} managed switch(es) disconnected; plan ` +
      `${this.plan ? `v${this.plan.version} (${this.plan.algorithm})` : 'none yet'}`;
  }

  select(sel) {
    this.selected = sel;
    this.showSelected();
  }

  async showSelected() {
    const sel = this.selected;
    if (!sel) {
      clear(this.panel).append(el('p', { class: 'hint' },
        'Click a switch for its session, pipeline and tables, or a link for its load and state.'));
      return;
    }
    if (sel.kind === 'switch') {
      try {
        const st = await get(`/switches/${encodeURIComponent(sel.id)}`);
        if (this.selected === sel) this.renderSwitch(st);
      } catch (e) {
        clear(this.panel).append(el('p', { class: 'error' }, e.message));
      }
    } else {
      this.renderLink(sel.id);
    }
  }

  renderSwitch(st) {
    const sw = this.topology.switches.find((s) => s.id === st.id) || { ina: {} };
    const grants = switchGrants(this.plan);
    const used = grants.get(st.id) || 0;
    const total = sw.ina && sw.ina.capable ? sw.ina.aggregators : 0;
    const jobs = ((this.plan && this.plan.jobs) || [])
      .filter((j) => j.aggregators && j.aggregators[st.id])
      .map((j) => el('div', {}, el('a', { href: `#/jobs/${j.job_id}` }, `job ${j.job_id}`),
        ` ${j.aggregators[st.id]} aggregators`));
    const yes = (v) => badge(v ? 'yes' : 'no');
    const p4 = st.p4runtime;
    const rows = [
      ['Managed', st.managed ? `${p4.target} at ${p4.address}, device ${p4.device_id}` : 'no (planning only)'],
      ['Connected', yes(st.connected)],
      ['Primary', yes(st.primary)],
      ['Election id', st.election_id],
      ['Pipeline pushes', st.pipeline_pushes],
      ['Intent version', st.intent_version],
      ['Applied version', st.applied_version],
      ['In sync', yes(st.in_sync)],
      ['Last contact', fmtDateTime(st.last_contact_ms)],
      ['Errors', st.last_error ? el('span', { class: 'error' }, st.last_error) : 'none'],
    ];
    const tables = st.tables
      ? el('table', { class: 'grid compact' },
        el('thead', {}, el('tr', {}, el('th', {}, 'Table'), el('th', { class: 'num' }, 'Entries'),
          el('th', { class: 'num' }, 'Size'), el('th', {}, 'Occupancy'))),
        el('tbody', {}, st.tables.map((t) => el('tr', {}, el('td', {}, t.name),
          el('td', { class: 'num' }, t.entries), el('td', { class: 'num' }, t.size),
          el('td', {}, bar(t.size ? t.entries / t.size : 0, `${fmt(t.size ? 100 * t.entries / t.size : 0, 2)}%`))))))
      : el('p', {}, `${st.entries} entries and groups in its intent`);
    clear(this.panel).append(
      el('h3', {}, `Switch ${st.id}`),
      kv(rows),
      el('h3', {}, 'Aggregators'),
      total ? bar(used / total, `${used} of ${total} granted`) : el('p', { class: 'muted' }, 'not INA-capable'),
      el('h3', {}, 'Table occupancy'),
      tables,
      ...(jobs.length ? [el('h3', {}, 'Jobs aggregating here'), ...jobs] : []),
    );
  }

  renderLink(id) {
    const l = this.topology.links.find((x) => x.id === id);
    if (!l) return this.select(null);
    const loads = linkLoads(this.topology, this.plan);
    const load = loads.get(id) || 0;
    const canSet = this.ctx.can('admin');
    const target = l.status === 'down' ? 'up' : 'down';
    const action = canSet
      ? el('button', { type: 'button', class: target === 'down' ? 'danger' : '', 'data-action': 'link-status',
        onclick: () => this.setLink(l.id, target) }, `Set link ${target}`)
      : null;
    clear(this.panel).append(
      el('h3', {}, `Link ${l.id}`),
      kv([
        ['Ends', `${l.a} — ${l.b}`],
        ['Capacity', `${fmt(l.gbps)} Gbps`],
        ['Status', badge(l.status === 'down' ? 'down' : 'up', l.status === 'down' ? 'down' : 'yes')],
        ['Planned load', `${fmt(load, 2)} Gbps (${fmt(l.gbps ? (100 * load) / l.gbps : 0)}%)`],
        ['Latency', l.latency_us != null ? `${l.latency_us} µs` : '—'],
      ]),
      ...(action ? [el('p', {}, action)] : []),
    );
  }

  async setLink(id, status) {
    try {
      await request(`/links/${encodeURIComponent(id)}`, { method: 'PATCH', body: { status } });
      toast(`link ${id} set ${status}`);
      await this.refresh();
    } catch (e) {
      toast(e.message, true);
    }
  }
}
