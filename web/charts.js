// Time-series charts over GET /api/v1/stats/... with uPlot (column data: one x array of epoch
// seconds, one y array per series; null is a gap).

const PALETTE = ['#58a6ff', '#3fb950', '#d29922', '#f85149', '#bc8cff', '#39c5cf', '#ff7b72',
  '#e3b341', '#a5d6ff', '#7ee787'];

export class TimeChart {
  // windowS: the x axis always spans this many seconds up to the newest point (the last hour).
  constructor(container, { height = 200, yLabel = '', stepped = false, windowS = 3600 } = {}) {
    this.windowS = windowS;
    this.container = container;
    this.height = height;
    this.yLabel = yLabel;
    this.stepped = stepped;
    this.plot = null;
    this.key = '';
    this.resize = () => {
      if (this.plot) this.plot.setSize({ width: this.width(), height: this.height });
    };
    window.addEventListener('resize', this.resize);
  }

  width() {
    return Math.max(300, this.container.clientWidth || 600);
  }

  // timesMs: bucket starts; series: [{label, values}] (values aligned with timesMs).
  setData(timesMs, series) {
    const key = series.map((s) => s.label).join('\u0000');
    const data = [timesMs.map((t) => t / 1000), ...series.map((s) => s.values)];
    if (this.plot && key === this.key) {
      this.plot.setData(data);
      this.fixWindow(data[0]);
      return;
    }
    if (this.plot) this.plot.destroy();
    this.key = key;
    const paths = this.stepped && uPlot.paths.stepped ? uPlot.paths.stepped({ align: 1 }) : undefined;
    this.plot = new uPlot({
      width: this.width(),
      height: this.height,
      series: [{}, ...series.map((s, i) => ({
        label: s.label,
        stroke: PALETTE[i % PALETTE.length],
        width: 1.5,
        spanGaps: false,
        paths,
        value: (u, v) => (v == null ? '—' : Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(2)),
      }))],
      axes: [
        { stroke: '#8b949e', grid: { stroke: '#21262d' }, ticks: { stroke: '#30363d' } },
        { stroke: '#8b949e', grid: { stroke: '#21262d' }, ticks: { stroke: '#30363d' },
          label: this.yLabel, labelSize: 18, size: 56 },
      ],
      scales: {
        x: { time: true },
        y: { range: (u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] },
      },
      cursor: { drag: { x: true, y: false } },
    }, data, this.container);
    this.fixWindow(data[0]);
  }

  // The x axis: the last windowS seconds up to the newest point.
  fixWindow(xs) {
    if (!xs.length) return;
    const max = xs[xs.length - 1];
    this.plot.setScale('x', { min: Math.min(xs[0], max - this.windowS), max: max + 10 });
  }
}
