'use strict';
// Time charts drawn as SVG, no library: one line per series over a time axis (UTC), a value
// axis from 0, a legend with each series' latest value, and a cursor that reads the values at
// the time under the mouse. The points come from the console server's sampled series
// (/api/history), so a chart shows the past hour even when the page was just opened.

const SVG_NS = 'http://www.w3.org/2000/svg';
const PALETTE = ['#2d6cdf', '#1c9b4b', '#d9822b', '#8e44ad', '#c93a3a', '#16a2b8', '#7f8c8d', '#b5a01a'];
// Tick spacings of the time axis, in ms: the first that leaves at most 7 ticks is used.
const TIME_STEPS = [10, 30, 60, 120, 300, 600, 900, 1800, 3600].map((s) => s * 1000);
// The time axis spans at least this many sample intervals (and a minute), so the first points
// do not stretch over the whole width.
const MIN_SPAN_INTERVALS = 30;

function svgEl(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) node.setAttribute(k, String(v));
  for (const c of children) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

// 1, 2 or 5 times a power of ten, at least `raw`.
function niceStep(raw) {
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / power;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * power;
}

function fmtAxis(v) {
  if (v >= 1e6) return +(v / 1e6).toFixed(1) + 'M';
  if (v >= 1e3) return +(v / 1e3).toFixed(1) + 'k';
  return String(+v.toFixed(2));
}

function timeLabel(ms, withSeconds) {
  const iso = new Date(ms).toISOString();
  return withSeconds ? iso.slice(11, 19) : iso.slice(11, 16);
}

// The point of `points` nearest to time `t`, if one lies within `within` ms.
function nearest(points, t, within) {
  let best = null;
  for (const p of points) if (best === null || Math.abs(p[0] - t) < Math.abs(best[0] - t)) best = p;
  return best && Math.abs(best[0] - t) <= within ? best : null;
}

function drawAxes(root, g) {
  for (let v = 0; v <= g.top + g.step / 2; v += g.step) {
    root.append(svgEl('line', { x1: g.pad.left, x2: g.width - g.pad.right, y1: g.y(v), y2: g.y(v), class: 'grid' }),
      svgEl('text', { x: g.pad.left - 6, y: g.y(v) + 4, class: 'axis', 'text-anchor': 'end' }, fmtAxis(v)));
  }
  const span = g.now - g.start;
  const tick = TIME_STEPS.find((s) => span / s <= 7) || TIME_STEPS[TIME_STEPS.length - 1];
  for (let t = Math.ceil(g.start / tick) * tick; t <= g.now; t += tick) {
    root.append(svgEl('line', { x1: g.x(t), x2: g.x(t), y1: g.height - g.pad.bottom, y2: g.height - g.pad.bottom + 4, class: 'tick' }),
      svgEl('text', { x: g.x(t), y: g.height - 6, class: 'axis', 'text-anchor': 'middle' }, timeLabel(t, tick < 60000)));
  }
}

function drawSeries(root, g, series, interval) {
  series.forEach((s) => {
    let d = '';
    let previous = null;
    for (const [t, v] of s.points) {
      // A gap of more than a few intervals (an outage, a restart) breaks the line.
      d += (previous === null || t - previous > 2.5 * interval ? 'M' : 'L') + g.x(t).toFixed(1) + ' ' + g.y(v).toFixed(1) + ' ';
      previous = t;
    }
    if (d) root.append(svgEl('path', { d, class: 'series', stroke: s.color }));
    const last = s.points[s.points.length - 1];
    if (last) root.append(svgEl('circle', { cx: g.x(last[0]), cy: g.y(last[1]), r: 2.5, fill: s.color }));
  });
}

function attachCursor(root, tip, g, series, interval) {
  const cursor = svgEl('line', { class: 'cursor', y1: g.pad.top, y2: g.height - g.pad.bottom, visibility: 'hidden' });
  root.append(cursor);
  root.addEventListener('mousemove', (ev) => {
    const rect = root.getBoundingClientRect();
    const px = ev.clientX - rect.left;
    const t = g.start + (px - g.pad.left) / (g.width - g.pad.left - g.pad.right) * (g.now - g.start);
    const found = series.map((s) => [s, nearest(s.points, t, 1.5 * interval)]).filter(([, p]) => p);
    if (!found.length) { cursor.setAttribute('visibility', 'hidden'); tip.hidden = true; return; }
    const at = found[0][1][0];
    cursor.setAttribute('x1', g.x(at));
    cursor.setAttribute('x2', g.x(at));
    cursor.setAttribute('visibility', 'visible');
    clear(tip).append(el('div', { class: 'tip-time' }, timeLabel(at, true) + ' UTC'),
      ...found.map(([s, p]) => el('div', {}, s.label + ': ', el('b', {}, fmtNum(p[1])))));
    tip.hidden = false;
    tip.style.left = Math.min(px + 12, g.width - 160) + 'px';
  });
  root.addEventListener('mouseleave', () => { cursor.setAttribute('visibility', 'hidden'); tip.hidden = true; });
}

// Draws `series` ([{ label, points: [[ms, value], ...] }]) into `box`.
// opts: { now, intervalSecs, height, unit }.
function timeChart(box, series, opts) {
  const width = Math.max(320, Math.floor(box.clientWidth || 600));
  const height = opts.height || 190;
  const interval = (opts.intervalSecs || 10) * 1000;
  const now = opts.now || Date.now();
  series = series.map((s, i) => ({ ...s, color: s.color || PALETTE[i % PALETTE.length] }));
  const all = series.flatMap((s) => s.points);
  const first = all.length ? Math.min(...all.map((p) => p[0])) : now;
  const start = Math.min(first, now - Math.max(60000, MIN_SPAN_INTERVALS * interval));
  const maxValue = Math.max(0, ...all.map((p) => p[1]));
  const step = maxValue > 0 ? niceStep(maxValue / 4) : 1;
  const top = step * Math.max(1, Math.ceil(maxValue / step));
  const pad = { left: 52, right: 14, top: 10, bottom: 24 };
  const g = {
    width, height, pad, start, now, step, top,
    x: (t) => pad.left + (width - pad.left - pad.right) * (t - start) / Math.max(1, now - start),
    y: (v) => height - pad.bottom - (height - pad.top - pad.bottom) * v / top,
  };
  const root = svgEl('svg', { class: 'chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': opts.title || 'chart' });
  drawAxes(root, g);
  drawSeries(root, g, series, interval);
  if (!all.length) {
    root.append(svgEl('text', { x: width / 2, y: height / 2, class: 'axis', 'text-anchor': 'middle' },
      `collecting: one point every ${opts.intervalSecs || 10} s`));
  }
  const tip = el('div', { class: 'chart-tip', hidden: true });
  attachCursor(root, tip, g, series, interval);
  const legend = el('div', { class: 'legend' }, series.map((s) => {
    const swatch = el('i', { class: 'swatch' });
    swatch.style.background = s.color;
    const last = s.points[s.points.length - 1];
    return el('span', {}, swatch, s.label, ' ', el('b', {}, last ? fmtNum(last[1]) : '—'), opts.unit ? ' ' + opts.unit : '');
  }), el('span', { class: 'muted axis-note' }, 'times in UTC'));
  clear(box).append(root, tip, legend);
}

// A chart box that loads its series from /api/history?<params> and draws them. opts.labels maps
// a series label to the legend's words; opts.byDirection names each series by the last part of
// its key (in, out) instead; opts.only keeps the series of that label alone. Returns the box
// and a refresh function.
function historyChart(params, opts) {
  const box = el('div', { class: 'chart-box', id: opts.id });
  const refresh = async (background) => {
    const data = await api('GET', '/api/history?' + q(params), undefined, { aside: true, background });
    const series = data.series.filter((s) => !opts.only || s.label === opts.only).map((s) => ({
      label: opts.byDirection ? s.key.split('/').pop() : ((opts.labels && opts.labels[s.label]) || s.label),
      points: s.points,
    }));
    timeChart(box, series, { ...opts, now: data.now, intervalSecs: data.intervalSecs });
  };
  return { box, refresh };
}
