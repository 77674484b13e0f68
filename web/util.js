// Small helpers shared by the views: DOM building (text only: nothing from the API is ever
// inserted as HTML), number and time formatting, colour scales, throttling.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k === 'onclick') node.addEventListener('click', v);
    else if (k === 'style') node.style.cssText = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

export const naturalCompare = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' })
  .compare;

export function fmt(v, digits = 1) {
  if (v == null || Number.isNaN(v)) return '—';
  if (typeof v !== 'number') return String(v);
  if (Math.abs(v) >= 1000) return v.toLocaleString(undefined, { maximumFractionDigits: 0 });
  return v.toFixed(digits);
}

export function fmtTime(ms) {
  if (!ms) return '—';
  const d = new Date(ms);
  return d.toLocaleTimeString(undefined, { hour12: false });
}

export function fmtDateTime(ms) {
  if (!ms) return '—';
  return new Date(ms).toLocaleString(undefined, { hour12: false });
}

// Aggregator utilisation 0..1 -> green .. amber .. red.
export function utilColor(u) {
  const x = Math.max(0, Math.min(1, u || 0));
  return `hsl(${Math.round(130 * (1 - x))}, ${55 + Math.round(20 * x)}%, ${42 + Math.round(10 * x)}%)`;
}
export const NO_INA_COLOR = '#3b4a5e';

// Planned link load over capacity -> grey when idle, blue up to 1, red beyond (over-subscribed).
export function loadColor(u) {
  if (!u) return '#3d444d';
  // Planned load is the plan doing its job, not an alarm: shades of blue up to the capacity; only
  // a load beyond it (the plan over-subscribes the link) is red. Down links are drawn apart.
  if (u > 1 + 1e-9) return '#f85149';
  const x = Math.max(0, Math.min(1, u));
  return `hsl(212, ${Math.round(35 + 55 * x)}%, ${Math.round(38 + 24 * x)}%)`;
}

// Calls fn at most once per `ms`; calls made in between run once at the end of the window.
export function throttle(fn, ms) {
  let last = 0;
  let timer = null;
  return (...args) => {
    const now = Date.now();
    const wait = last + ms - now;
    if (wait <= 0 && !timer) {
      last = now;
      fn(...args);
    } else if (!timer) {
      timer = setTimeout(() => {
        timer = null;
        last = Date.now();
        fn(...args);
      }, Math.max(wait, 0));
    }
  };
}

export function badge(text, cls = text) {
  return el('span', { class: `badge ${cls}` }, text);
}

export function bar(fraction, label, cls = '') {
  const pct = Math.max(0, Math.min(100, (fraction || 0) * 100));
  return el('span', {},
    el('span', { class: `bar ${cls}` }, el('span', { style: `width:${pct.toFixed(1)}%` })),
    el('span', { class: 'bar-label' }, label));
}

export function kv(pairs) {
  return el('dl', { class: 'kv' }, pairs.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
}

let toastTimer = null;
export function toast(message, isError = false) {
  const t = document.getElementById('toast');
  t.textContent = message;
  t.className = isError ? 'toast error' : 'toast';
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, 5000);
}
