// The events view: the controller's event log, live from the event stream (newest first, the
// last 500 kept), with a text filter and a pause.

import { clear, el, fmtTime } from './util.js';

const KEEP = 500;

export class EventsView {
  constructor(ctx) {
    this.ctx = ctx;
    this.events = [];
    this.paused = false;
    this.tbody = document.querySelector('#events-table tbody');
    this.filter = document.getElementById('events-filter');
    this.count = document.getElementById('events-count');
    this.pauseButton = document.getElementById('events-pause');
    this.filter.addEventListener('input', () => this.render());
    this.pauseButton.addEventListener('click', () => {
      this.paused = !this.paused;
      this.pauseButton.textContent = this.paused ? 'Resume' : 'Pause';
      if (!this.paused) this.render();
    });
    this.visible = false;
  }

  // Called for every event of the stream (whatever view is shown).
  add(ev) {
    this.events.push(ev);
    if (this.events.length > KEEP) this.events.splice(0, this.events.length - KEEP);
    if (this.visible && !this.paused) this.renderSoon();
  }

  renderSoon() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = null;
      this.render();
    });
  }

  async refresh() {
    this.render();
  }

  render() {
    const q = this.filter.value.trim().toLowerCase();
    const rows = this.events.filter((ev) => !q ||
      `${ev.kind} ${ev.message} ${ev.job_id ?? ''}`.toLowerCase().includes(q));
    clear(this.tbody);
    const frag = document.createDocumentFragment();
    for (let i = rows.length - 1; i >= 0; i--) {
      const ev = rows[i];
      frag.append(el('tr', { 'data-seq': ev.seq },
        el('td', { class: 'num' }, ev.seq),
        el('td', {}, fmtTime(ev.time_ms)),
        el('td', {}, ev.kind),
        el('td', {}, ev.job_id != null ? el('a', { href: `#/jobs/${ev.job_id}` }, ev.job_id) : ''),
        el('td', { class: 'msg' }, ev.message)));
    }
    this.tbody.append(frag);
    this.count.textContent = `${rows.length} event(s)${this.paused ? ', paused' : ''}`;
  }
}
