// Pure functions over the API's topology and plan: a layered layout computed from the fabric's
// levels (hosts at the bottom, then the switches one hop above them -- ToR/edge --, then the
// next level, and so on: a fat-tree's edge, aggregation and core rows), and the plan's load on
// every link and grants on every switch. No force layout: positions are deterministic and cost
// O(nodes + links), so a fat-tree k=16 (320 switches, 1,024 hosts) lays out at once.

import { naturalCompare } from './util.js';

const ROW_GAP = 170;
const NODE_GAP = 46;
const HOST_GAP = 30;

// {positions: Map(id -> {x, y}), level: Map(id -> level), levels, hostsOf: Map(switch -> [host])}
// Hosts are level 0; a switch's level is 1 + its hop distance to the nearest host (links of any
// status count, so a link going down never moves a node); switches that reach no host go one
// row above the highest. Within a row: ToRs by id (natural order), hosts under their ToR, upper
// rows by the mean position of their neighbours in the row below, then by id.
// `spreadHosts`: make the drawing wide enough for every host (when they are drawn).
export function layeredLayout(topology, { spreadHosts = false } = {}) {
  const hosts = new Set(topology.hosts.map((h) => h.id));
  const switches = topology.switches.map((s) => s.id);
  const adj = new Map();
  for (const id of [...switches, ...hosts]) adj.set(id, []);
  for (const l of topology.links) {
    if (!adj.has(l.a) || !adj.has(l.b)) continue;
    adj.get(l.a).push(l.b);
    adj.get(l.b).push(l.a);
  }
  const level = new Map();
  let frontier = [...hosts];
  for (const h of frontier) level.set(h, 0);
  while (frontier.length) {
    const next = [];
    for (const n of frontier) {
      for (const m of adj.get(n)) {
        if (!level.has(m)) {
          level.set(m, level.get(n) + 1);
          next.push(m);
        }
      }
    }
    frontier = next;
  }
  let top = 0;
  for (const v of level.values()) top = Math.max(top, v);
  for (const s of switches) if (!level.has(s)) level.set(s, top + 1);
  const levels = Math.max(...level.values(), 0);

  const rows = [];
  for (let i = 0; i <= levels; i++) rows.push([]);
  for (const [id, lv] of level) rows[lv].push(id);

  const hostsOf = new Map();
  const index = new Map();  // position in its row, normalised to 0..1
  // Row 1 (ToRs) by id; then hosts under their ToR; then upper rows by barycentre.
  if (rows.length > 1) {
    rows[1].sort(naturalCompare);
    rows[1].forEach((id, i) => index.set(id, (i + 0.5) / rows[1].length));
  }
  for (const h of rows[0]) {
    const tor = adj.get(h).find((m) => level.get(m) === 1);
    if (tor !== undefined) {
      if (!hostsOf.has(tor)) hostsOf.set(tor, []);
      hostsOf.get(tor).push(h);
    }
  }
  const torOf = (h) => adj.get(h).find((m) => level.get(m) === 1);
  rows[0].sort((a, b) => {
    const ta = torOf(a), tb = torOf(b);
    const d = (ta === undefined ? 2 : index.get(ta)) - (tb === undefined ? 2 : index.get(tb));
    return d || naturalCompare(a, b);
  });
  for (let lv = 2; lv < rows.length; lv++) {
    const key = new Map();
    for (const id of rows[lv]) {
      const below = adj.get(id).filter((m) => level.get(m) === lv - 1 && index.has(m));
      key.set(id, below.length ? below.reduce((s, m) => s + index.get(m), 0) / below.length : 2);
    }
    rows[lv].sort((a, b) => key.get(a) - key.get(b) || naturalCompare(a, b));
    rows[lv].forEach((id, i) => index.set(id, (i + 0.5) / rows[lv].length));
  }

  const widest = Math.max(...rows.slice(1).map((r) => r.length), 1);
  const width = Math.max(widest * NODE_GAP, spreadHosts ? rows[0].length * HOST_GAP : 0);
  // Rows further apart on wide fabrics, so the drawing keeps a screen-like aspect.
  const rowGap = Math.max(ROW_GAP, width / (2 * Math.max(levels, 1)));
  const positions = new Map();
  rows.forEach((row, lv) => {
    const y = (levels - lv) * rowGap;
    row.forEach((id, i) => positions.set(id, { x: ((i + 0.5) / row.length) * width, y }));
  });
  return { positions, level, levels, hostsOf };
}

// Per link id: the plan's load in Gbps, the larger of its two directions: every worker flow
// carries its job's predicted rate times its fraction along its path, every aggregated stream
// (switch -> PS) the job's rate, every ring hop the job's rate.
export function linkLoads(topology, plan) {
  const byPair = new Map();
  for (const l of topology.links) {
    byPair.set(`${l.a}\u0000${l.b}`, { id: l.id, dir: 0 });
    byPair.set(`${l.b}\u0000${l.a}`, { id: l.id, dir: 1 });
  }
  const load = new Map();
  const add = (path, gbps) => {
    for (let i = 0; i + 1 < path.length; i++) {
      const hit = byPair.get(`${path[i]}\u0000${path[i + 1]}`);
      if (!hit) continue;
      if (!load.has(hit.id)) load.set(hit.id, [0, 0]);
      load.get(hit.id)[hit.dir] += gbps;
    }
  };
  for (const job of (plan && plan.jobs) || []) {
    const rate = job.rate_gbps || 0;
    for (const f of job.flows || []) add(f.path || [], rate * (f.fraction ?? 1));
    for (const a of job.aggregator_paths || []) add(a.path || [], rate);
  }
  const out = new Map();
  for (const [id, [a, b]] of load) out.set(id, Math.max(a, b));
  return out;
}

// Per switch id: aggregators granted by the plan, over all jobs.
export function switchGrants(plan) {
  const grants = new Map();
  for (const job of (plan && plan.jobs) || []) {
    for (const [sw, n] of Object.entries(job.aggregators || {})) {
      grants.set(sw, (grants.get(sw) || 0) + n);
    }
  }
  return grants;
}
