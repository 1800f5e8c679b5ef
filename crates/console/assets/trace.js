'use strict';
// The message trace page: the trace records of one message (Pub when it was sent, SubBefore
// and SubAfter around each consumption, EndTransaction), read from the trace topic, as a
// timeline and as a table.

const TRACE_ROW = 26;
const TRACE_LABEL = 230;
// Room right of the bars for the last bar's text.
const TRACE_RIGHT = 170;

// One timeline row per step: the send, then each consumption (a SubBefore paired with its
// SubAfter by request id), then transaction ends. Each: { label, start, cost, ok, kind }.
function traceSteps(items) {
  const steps = [];
  const after = new Map(items.filter((r) => r.type === 'SubAfter').map((r) => [r.requestId, r]));
  for (const r of items) {
    if (r.type === 'Pub') {
      steps.push({ label: `sent by ${r.group}`, start: r.timestamp, cost: r.costTime, ok: r.success, kind: 'send' });
    } else if (r.type === 'SubBefore') {
      const done = after.get(r.requestId);
      const attempt = r.retryTimes > 0 ? ` (retry ${r.retryTimes})` : '';
      steps.push({ label: `consumed by ${r.group}${attempt}`, start: r.timestamp, cost: done ? done.costTime : 0, ok: done ? done.success : null, kind: 'consume' });
    } else if (r.type === 'EndTransaction') {
      steps.push({ label: `${r.transactionState || 'transaction end'} by ${r.group}`, start: r.timestamp, cost: 0, ok: true, kind: 'send' });
    }
  }
  return steps;
}

function traceTimeline(box, steps) {
  const width = Math.max(480, Math.floor(box.clientWidth || 800));
  const t0 = Math.min(...steps.map((s) => s.start));
  const t1 = Math.max(...steps.map((s) => s.start + Math.max(1, s.cost)));
  const span = Math.max(1, t1 - t0);
  const x = (t) => TRACE_LABEL + (width - TRACE_LABEL - TRACE_RIGHT) * (t - t0) / span;
  const height = steps.length * TRACE_ROW + 24;
  const root = svgEl('svg', { class: 'chart timeline', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'message trace timeline' });
  root.append(svgEl('line', { x1: TRACE_LABEL, x2: TRACE_LABEL, y1: 0, y2: height - 20, class: 'grid' }));
  steps.forEach((s, i) => {
    const y = i * TRACE_ROW + 4;
    const w = Math.max(3, x(s.start + s.cost) - x(s.start));
    const cls = s.ok === false ? 'bar failed' : (s.kind === 'send' ? 'bar send' : 'bar consume');
    root.append(svgEl('text', { x: 4, y: y + 15, class: 'label' }, s.label),
      svgEl('rect', { x: x(s.start), y, width: w, height: TRACE_ROW - 8, rx: 3, class: cls }),
      svgEl('text', { x: x(s.start) + w + 6, y: y + 14, class: 'axis' }, `+${s.start - t0} ms, ${s.cost} ms` + (s.ok === false ? ', failed' : s.ok === null ? ', no result' : '')));
  });
  root.append(svgEl('text', { x: TRACE_LABEL, y: height - 4, class: 'axis' }, fmtTime(t0) + ' UTC'),
    svgEl('text', { x: x(t1), y: height - 4, class: 'axis', 'text-anchor': 'end' }, `+${span} ms`));
  clear(box).append(root);
}

function traceTable(items) {
  const result = (r) => (r.type === 'SubAfter' ? (r.success ? 'consumed' : 'failed (code ' + r.contextCode + ')') : (r.success ? 'ok' : 'failed'));
  return table(['record', 'time (UTC)', 'group', { label: 'cost ms', num: 1 }, 'result', 'broker', 'client', { label: 'retry', num: 1 }, 'request id'],
    items.map((r) => [r.type, fmtTime(r.timestamp), r.group, String(r.costTime), result(r), r.storeHost || '', r.clientHost || '',
      r.type === 'SubBefore' ? String(r.retryTimes) : '', r.requestId || '']), { id: 'trace-table' });
}

async function showTrace(out, id, traceTopic) {
  const data = await api('GET', '/api/messages/trace?' + q({ id, traceTopic }));
  clear(out);
  if (data.items.length === 0) {
    out.append(el('p', { class: 'muted', id: 'trace-empty' }, `No trace record of ${id} in ${data.traceTopic}. A message has a trace only when its producer or consumer records one (message trace on: enableMsgTrace in the clients, --trace in comet produce / consume).`));
    return;
  }
  const pub = data.items.find((r) => r.type === 'Pub');
  const consumers = new Set(data.items.filter((r) => r.type === 'SubAfter').map((r) => r.group));
  const box = el('div', { class: 'timeline-box', id: 'trace-timeline' });
  // The trace format writes an absent tag or key as the text "null".
  const text = (v) => (v && v !== 'null' ? v : '—');
  out.append(el('div', { class: 'stats small' },
    stat('Topic', pub ? pub.topic : '—'), stat('Sent by', pub ? pub.group : '—'), stat('Stored on', pub ? pub.storeHost : '—'),
    stat('Keys / tags', pub ? `${text(pub.keys)} / ${text(pub.tags)}` : '—'), stat('Consumed by', consumers.size ? [...consumers].join(', ') : 'no group yet')),
  card('Timeline', box), card('Records (' + data.traceTopic + ')', traceTable(data.items)));
  traceTimeline(box, traceSteps(data.items));
}

pages.trace = async (main, initial) => {
  const out = el('div', { id: 'trace-results' });
  const topics = picker('trace-topics', { name: 'traceTopic', selected: 'RMQ_SYS_TRACE_TOPIC' });
  const form = el('form', { class: 'inline', id: 'trace-form', onsubmit: (e) => {
    e.preventDefault();
    location.hash = '#/trace/' + encodeURIComponent(e.target.elements.namedItem('id').value.trim()) + '?' + q({ topic: topics.select.value });
  } },
  el('label', {}, 'Message id', el('input', { name: 'id', required: true, size: '40', value: initial ? initial.split('?')[0] : '' })),
  field('Trace topic', topics), el('button', { type: 'submit' }, 'Show trace'));
  main.append(el('h1', {}, 'Message trace'), card(null, form), out);
  await topics.ready;
  if (!initial) return;
  const [id, query] = initial.split('?');
  const topic = new URLSearchParams(query || '').get('topic');
  if (topic) topics.select.value = topic;
  await showTrace(out, id, topics.select.value);
};
