'use strict';
// The console's single page. Everything that comes from the cluster (names, bodies, keys,
// properties, client ids) is put into the page as text nodes (textContent / DOM APIs), never
// parsed as HTML.

const state = { csrf: '', role: '', timers: [] };

// An element: el('td', { class: 'num' }, 'text', childNode, ...). Strings become text nodes.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else if (name === 'class') node.className = value;
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

function flash(text, ok) {
  const box = clear(document.getElementById('flash'));
  box.append(el('p', { class: ok ? 'ok' : 'error', id: ok ? 'flash-ok' : 'flash-error' }, text));
}

class ApiFailure extends Error {}

async function api(method, path, body) {
  const init = { method, headers: {} };
  if (method !== 'GET') init.headers['x-csrf-token'] = state.csrf;
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) { window.location.assign('/login'); throw new ApiFailure('login required'); }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiFailure(data.error || ('HTTP ' + response.status));
  return data;
}

function q(params) {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') search.set(k, v);
  return search.toString();
}

function fmtTime(ms) { return ms > 0 ? new Date(Number(ms)).toISOString().replace('T', ' ').replace('Z', '') : ''; }
function fmtNum(n) { return n === null || n === undefined ? '—' : (Math.round(Number(n) * 10) / 10).toLocaleString('en'); }

function table(headers, rows) {
  return el('table', {},
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', { class: h.num ? 'num' : null }, h.label || h)))),
    el('tbody', {}, rows.map((cells) => el('tr', {}, cells.map((c, i) => el('td', { class: headers[i].num ? 'num' : null }, c))))));
}

function link(hash, text) { return el('a', { href: hash }, text); }

function pager(data, go) {
  const pages = Math.max(1, Math.ceil(data.total / data.size));
  return el('div', { class: 'pager' },
    el('button', { class: 'secondary', disabled: data.page <= 1, onclick: () => go(data.page - 1) }, 'Previous'),
    el('span', {}, `page ${data.page} of ${pages} (${data.total} items)`),
    el('button', { class: 'secondary', disabled: data.page >= pages, onclick: () => go(data.page + 1) }, 'Next'));
}

// A line chart of the last values of several series, drawn on a canvas.
function chart(canvas, series) {
  const ctx = canvas.getContext('2d');
  const w = canvas.width = canvas.clientWidth || 600;
  const h = canvas.height = canvas.clientHeight || 160;
  ctx.clearRect(0, 0, w, h);
  const all = series.flatMap((s) => s.values);
  const max = Math.max(1, ...all);
  ctx.font = '11px sans-serif';
  ctx.fillStyle = '#6b7487';
  ctx.fillText(fmtNum(max), 4, 12);
  series.forEach((s, n) => {
    ctx.strokeStyle = s.color;
    ctx.beginPath();
    s.values.forEach((v, i) => {
      const x = 40 + (w - 50) * (s.values.length < 2 ? 1 : i / (s.values.length - 1));
      const y = h - 16 - (h - 32) * (v / max);
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
    ctx.fillStyle = s.color;
    ctx.fillText(`${s.label}: ${fmtNum(s.values[s.values.length - 1])}`, 40 + n * 160, h - 2);
  });
}

function every(ms, fn) { fn(); state.timers.push(setInterval(fn, ms)); }

function bodyView(msg) {
  const pre = el('pre', { class: 'body' });
  const show = (mode) => {
    let text = msg.bodyText;
    if (mode === 'json') {
      try { text = JSON.stringify(JSON.parse(msg.bodyText), null, 2); } catch (e) { text = 'not JSON: ' + msg.bodyText; }
    } else if (mode === 'hex') {
      const raw = atob(msg.bodyBase64);
      text = Array.from(raw, (c) => c.charCodeAt(0).toString(16).padStart(2, '0')).join(' ');
    }
    pre.textContent = text;
  };
  show('text');
  const select = el('select', { onchange: (e) => show(e.target.value), 'aria-label': 'body format' },
    el('option', { value: 'text' }, 'text'), el('option', { value: 'json' }, 'JSON'), el('option', { value: 'hex' }, 'hex'));
  return el('div', {}, select, pre);
}

function messageCard(msg, extra) {
  const props = Object.entries(msg.properties || {}).map(([k, v]) => [k, v]);
  return el('div', { class: 'card message' },
    el('h2', {}, 'Message ', msg.msgId),
    table(['field', 'value'], [
      ['topic', msg.topic], ['queue', `${msg.queueId} @ ${msg.queueOffset}`], ['offset msgId', msg.offsetMsgId],
      ['tags', msg.tags || ''], ['keys', (msg.keys || []).join(' ')], ['stored', fmtTime(msg.storeTimestamp) + ' on ' + msg.storeHost],
      ['born', fmtTime(msg.bornTimestamp) + ' on ' + msg.bornHost], ['reconsume times', String(msg.reconsumeTimes)],
      ['body length', String(msg.bodyLength)]]),
    el('h2', {}, 'Properties'), table(['key', 'value'], props),
    el('h2', {}, 'Body'), bodyView(msg),
    extra || null,
    el('button', { class: 'secondary', onclick: (e) => showTrace(msg.msgId, e.target.parentNode) }, 'Trace'));
}

async function showTrace(id, parent) {
  const data = await api('GET', '/api/messages/trace?' + q({ id }));
  parent.append(data.items.length === 0 ? el('p', { class: 'muted' }, 'No trace record in ', data.traceTopic) :
    table(['type', 'time', 'group', 'cost ms', 'success', 'store host'],
      data.items.map((t) => [t.type, fmtTime(t.timestamp), t.group, String(t.costTime), String(t.success), t.storeHost])));
}

// ---- pages -----------------------------------------------------------------------------------

const pages = {};

pages.overview = async (main) => {
  main.append(el('h1', {}, 'Overview'));
  const summary = el('div', { class: 'grid' });
  const brokers = el('div', {});
  const canvas = el('canvas', { class: 'chart', id: 'tps-chart' });
  main.append(summary, el('h2', {}, 'Messages per second'), canvas, el('h2', {}, 'Brokers'), brokers);
  const put = [], get = [];
  every(5000, async () => {
    const data = await api('GET', '/api/overview');
    clear(summary).append(
      el('div', { class: 'card' }, el('div', { class: 'muted' }, 'Name servers'), el('div', { class: 'stat' }, data.namesrv)),
      el('div', { class: 'card' }, el('div', { class: 'muted' }, 'Clusters'), el('div', { class: 'stat' }, data.clusters.join(', '))),
      el('div', { class: 'card' }, el('div', { class: 'muted' }, 'In (msg/s)'), el('div', { class: 'stat', id: 'tps-in' }, fmtNum(data.putTps))),
      el('div', { class: 'card' }, el('div', { class: 'muted' }, 'Out (msg/s)'), el('div', { class: 'stat' }, fmtNum(data.getTps))));
    clear(brokers).append(table(['cluster', 'broker', 'id', 'address', 'role', 'version', { label: 'in/s', num: 1 }, { label: 'out/s', num: 1 }, 'disk'],
      data.brokers.map((b) => [b.cluster, b.brokerName, String(b.brokerId), b.addr, b.role, b.version || b.error || '',
        fmtNum(b.putTps), fmtNum(b.getTps), b.diskRatio || (b.diskFull === 'true' ? 'FULL' : (b.diskFull ? 'ok' : ''))])));
    put.push(data.putTps || 0); get.push(data.getTps || 0);
    if (put.length > 60) { put.shift(); get.shift(); }
    chart(canvas, [{ label: 'in', color: '#2d6cdf', values: put }, { label: 'out', color: '#1c9b4b', values: get }]);
  });
};

pages.topics = async (main) => {
  const list = el('div', {});
  const filter = { type: 'all', q: '', page: 1 };
  const load = async (page) => {
    filter.page = page || 1;
    const data = await api('GET', '/api/topics?' + q({ type: filter.type, q: filter.q, page: filter.page, size: 50 }));
    clear(list).append(table(['topic', 'type'], data.items.map((t) => [link('#/topic/' + encodeURIComponent(t.name), t.name), t.type])), pager(data, load));
  };
  const create = el('form', { class: 'inline', id: 'create-topic', onsubmit: async (e) => {
    e.preventDefault();
    const f = e.target;
    try {
      await api('POST', '/api/topics', { topic: f.topic.value, readQueueNums: Number(f.queues.value), writeQueueNums: Number(f.queues.value), perm: Number(f.perm.value) });
      flash('Topic ' + f.topic.value + ' saved', true); load(1);
    } catch (err) { flash(err.message); }
  } },
  el('label', {}, 'Topic', el('input', { name: 'topic', required: true })),
  el('label', {}, 'Queues', el('input', { name: 'queues', type: 'number', value: '8', min: '1', max: '1024' })),
  el('label', {}, 'Permission', el('select', { name: 'perm' }, el('option', { value: '6' }, 'read-write'), el('option', { value: '4' }, 'read'), el('option', { value: '2' }, 'write'))),
  el('button', { type: 'submit' }, 'Create / update'));
  const filters = el('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); filter.q = e.target.q.value; filter.type = e.target.type.value; load(1); } },
    el('label', {}, 'Name contains', el('input', { name: 'q' })),
    el('label', {}, 'Type', el('select', { name: 'type' }, ['all', 'normal', 'retry', 'dlq', 'system'].map((t) => el('option', { value: t }, t)))),
    el('button', { type: 'submit' }, 'Filter'));
  main.append(el('h1', {}, 'Topics'), el('div', { class: 'card' }, el('h2', {}, 'Create or update a topic'), create), filters, list);
  await load(1);
};

pages.topic = async (main, name) => {
  const data = await api('GET', '/api/topics/' + encodeURIComponent(name));
  const send = el('form', { class: 'inline', id: 'send-test', onsubmit: async (e) => {
    e.preventDefault();
    const f = e.target;
    const properties = {};
    if (f.pkey.value) properties[f.pkey.value] = f.pvalue.value;
    try {
      const r = await api('POST', '/api/topics/' + encodeURIComponent(name) + '/messages', { body: f.body.value, tags: f.tags.value, keys: f.keys.value, properties });
      flash('Sent: ' + r.msgId + ' (' + r.status + ')', true);
    } catch (err) { flash(err.message); }
  } },
  el('label', {}, 'Body', el('textarea', { name: 'body', rows: '2', cols: '40' })),
  el('label', {}, 'Tags', el('input', { name: 'tags' })), el('label', {}, 'Keys', el('input', { name: 'keys' })),
  el('label', {}, 'Property', el('input', { name: 'pkey', placeholder: 'name' })), el('label', {}, 'Value', el('input', { name: 'pvalue' })),
  el('button', { type: 'submit' }, 'Send test message'));
  const del = el('button', { class: 'danger', onclick: async () => {
    if (!window.confirm('Delete topic ' + name + '?')) return;
    try { await api('DELETE', '/api/topics/' + encodeURIComponent(name)); flash('Deleted ' + name, true); location.hash = '#/topics'; } catch (err) { flash(err.message); }
  } }, 'Delete topic');
  main.append(el('h1', {}, 'Topic ', name),
    el('h2', {}, 'Route'), table(['broker', 'read queues', 'write queues', 'perm'], data.route.queues.map((r) => [r.brokerName, String(r.readQueueNums), String(r.writeQueueNums), String(r.perm)])),
    el('h2', {}, 'Queues'), table(['broker', { label: 'queue', num: 1 }, { label: 'min offset', num: 1 }, { label: 'max offset', num: 1 }, 'last update'],
      data.queues.map((x) => [x.brokerName, String(x.queueId), String(x.minOffset), String(x.maxOffset), fmtTime(x.lastUpdateTimestamp)])),
    el('h2', {}, 'Consumers'), table(['group', { label: 'lag', num: 1 }], data.consumers.map((c) => [link('#/group/' + encodeURIComponent(c.group), c.group), fmtNum(c.lag)])),
    el('div', { class: 'card' }, el('h2', {}, 'Send a test message'), send), del);
};

pages.groups = async (main) => {
  const list = el('div', {});
  const filter = { q: '', type: 'all' };
  const load = async (page) => {
    const data = await api('GET', '/api/groups?' + q({ q: filter.q, type: filter.type, page: page || 1, size: 20 }));
    clear(list).append(table(['group', { label: 'clients', num: 1 }, { label: 'lag', num: 1 }, { label: 'consume TPS', num: 1 }],
      data.items.map((g) => [link('#/group/' + encodeURIComponent(g.group), g.group), String(g.clients), fmtNum(g.lag), fmtNum(g.consumeTps)])), pager(data, load));
  };
  main.append(el('h1', {}, 'Consumer groups'),
    el('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); filter.q = e.target.q.value; filter.type = e.target.type.value; load(1); } },
      el('label', {}, 'Name contains', el('input', { name: 'q' })),
      el('label', {}, 'Type', el('select', { name: 'type' }, ['all', 'user', 'system'].map((t) => el('option', { value: t }, t)))),
      el('button', { type: 'submit' }, 'Filter')), list);
  await load(1);
};

pages.group = async (main, group) => {
  const body = el('div', {});
  const controls = el('div', {});
  const canvas = el('canvas', { class: 'chart', id: 'lag-chart' });
  const lags = [];
  const path = '/api/groups/' + encodeURIComponent(group);
  // Refreshed every few seconds; the forms below are built once so typing is never lost.
  const render = async () => {
    const data = await api('GET', path);
    lags.push(data.lag); if (lags.length > 60) lags.shift();
    chart(canvas, [{ label: 'lag', color: '#c93a3a', values: lags }]);
    clear(body).append(
      el('p', { id: 'group-status' }, data.online ? `online, ${data.clients.length} client(s)` : 'offline (no client connected)', ' — total lag ', fmtNum(data.lag)),
      el('h2', {}, 'Clients'), table(['client id', 'address', 'language', 'version'], data.clients.map((c) => [c.clientId, c.clientAddr, c.language, String(c.version)])),
      el('h2', {}, 'Subscriptions'), table(['topic', 'expression', 'type'], data.subscriptions.map((s) => [s.topic, s.expression, s.type])),
      el('h2', {}, 'Queues'), table(['topic', 'broker', { label: 'queue', num: 1 }, { label: 'broker offset', num: 1 }, { label: 'consumer offset', num: 1 }, { label: 'lag', num: 1 }, 'last consumed'],
        data.queues.map((x) => [x.topic, x.brokerName, String(x.queueId), String(x.brokerOffset), String(x.consumerOffset), String(x.lag), fmtTime(x.lastTimestamp)])));
    return data;
  };
  main.append(el('h1', {}, 'Consumer group ', group), el('h2', {}, 'Lag'), canvas, body, controls);
  const first = await render();
  const topics = [...new Set(first.topics.concat(first.subscriptions.map((s) => s.topic)))].filter((t) => !t.startsWith('%'));
  controls.append(
    el('div', { class: 'card' }, el('h2', {}, 'Reset offsets'),
      el('form', { class: 'inline', id: 'reset-form', onsubmit: async (e) => {
        e.preventDefault();
        const f = e.target;
        const ts = f.when.value ? Date.parse(f.when.value + 'Z') : NaN;
        if (Number.isNaN(ts)) { flash('pick a time (UTC)'); return; }
        try {
          const r = await api('POST', path + '/reset', { topic: f.topic.value, timestamp: ts, force: true });
          flash(`Offsets of ${r.topic} reset on ${r.queues.length} queue(s)` + (r.committedOffline ? ' (group offline: committed directly)' : ''), true);
          render();
        } catch (err) { flash(err.message); }
      } },
      el('label', {}, 'Topic', el('select', { name: 'topic' }, topics.map((t) => el('option', { value: t }, t)))),
      el('label', {}, 'Time (UTC)', el('input', { name: 'when', type: 'datetime-local', step: '1' })),
      el('button', { type: 'submit' }, 'Reset to time'),
      el('button', { type: 'button', class: 'secondary', onclick: async (e) => {
        const t = e.target.form.topic.value;
        try { await api('POST', path + '/skip', { topic: t }); flash('Backlog of ' + t + ' skipped', true); render(); } catch (err) { flash(err.message); }
      } }, 'Skip backlog'))),
    el('button', { class: 'danger', onclick: async () => {
      if (!window.confirm('Delete group ' + group + '?')) return;
      try { await api('DELETE', path); flash('Deleted ' + group, true); location.hash = '#/groups'; } catch (err) { flash(err.message); }
    } }, 'Delete group'));
  state.timers.push(setInterval(() => render().catch((err) => flash(err.message)), 5000));
};

pages.producers = async (main) => {
  const out = el('div', {});
  main.append(el('h1', {}, 'Producers'),
    el('form', { class: 'inline', onsubmit: async (e) => {
      e.preventDefault();
      try {
        const data = await api('GET', '/api/producers?' + q({ group: e.target.group.value, topic: e.target.topic.value }));
        clear(out).append(table(['client id', 'address', 'language', 'version'], data.clients.map((c) => [c.clientId, c.clientAddr, c.language, String(c.version)])));
      } catch (err) { flash(err.message); }
    } },
    el('label', {}, 'Producer group', el('input', { name: 'group', required: true })),
    el('label', {}, 'Topic', el('input', { name: 'topic', required: true })),
    el('button', { type: 'submit' }, 'Show connections')), out);
};

pages.messages = async (main) => {
  const out = el('div', { id: 'message-results' });
  const showList = (data, go) => {
    clear(out).append(el('p', { class: 'muted' }, `${data.total} message(s)` + (data.truncated ? ` (only the first ${data.max} are shown)` : '')),
      ...data.items.map((m) => messageCard(m)));
    if (data.size) out.append(pager(data, go));
  };
  const run = (fn) => async (e) => { e.preventDefault(); try { await fn(e.target); } catch (err) { flash(err.message); } };
  const byTime = async (f, page) => {
    const begin = f.begin.value ? Date.parse(f.begin.value + 'Z') : 0;
    const end = f.end.value ? Date.parse(f.end.value + 'Z') : Date.now();
    const data = await api('GET', '/api/messages/by-time?' + q({ topic: f.topic.value, begin, end, page: page || 1, size: 20 }));
    showList(data, (p) => byTime(f, p));
  };
  main.append(el('h1', {}, 'Messages'),
    el('form', { class: 'inline', id: 'by-key', onsubmit: run(async (f) => showList(await api('GET', '/api/messages/by-key?' + q({ topic: f.topic.value, key: f.key.value })))) },
      el('label', {}, 'Topic', el('input', { name: 'topic', required: true })), el('label', {}, 'Key', el('input', { name: 'key', required: true })),
      el('button', { type: 'submit' }, 'Find by key')),
    el('form', { class: 'inline', id: 'by-id', onsubmit: run(async (f) => showList(await api('GET', '/api/messages/by-id?' + q({ id: f.id.value, topic: f.topic.value })))) },
      el('label', {}, 'Message id', el('input', { name: 'id', required: true, size: '34' })), el('label', {}, 'Topic (for unique ids)', el('input', { name: 'topic' })),
      el('button', { type: 'submit' }, 'Find by id')),
    el('form', { class: 'inline', id: 'by-time', onsubmit: run((f) => byTime(f, 1)) },
      el('label', {}, 'Topic', el('input', { name: 'topic', required: true })),
      el('label', {}, 'From (UTC)', el('input', { name: 'begin', type: 'datetime-local', step: '1' })),
      el('label', {}, 'To (UTC)', el('input', { name: 'end', type: 'datetime-local', step: '1' })),
      el('button', { type: 'submit' }, 'Find by time')), out);
};

pages.dlq = async (main) => {
  const out = el('div', { id: 'dlq-results' });
  const load = async (group) => {
    const data = await api('GET', '/api/dlq/' + encodeURIComponent(group) + '?limit=100');
    const resend = async (ids) => {
      try {
        const r = await api('POST', '/api/dlq/' + encodeURIComponent(group) + '/resend', { msgIds: ids });
        const failed = r.results.filter((x) => x.error);
        flash(`Resent ${r.results.length - failed.length} message(s)` + (failed.length ? `, ${failed.length} failed: ${failed[0].error}` : ''), failed.length === 0);
      } catch (err) { flash(err.message); }
    };
    clear(out).append(el('p', {}, `${data.total} dead letter(s) of ${group} `,
      el('button', { id: 'resend-all', disabled: data.total === 0, onclick: () => resend(data.items.map((m) => m.msgId)) }, 'Resend all listed'), ' ',
      el('a', { href: '/api/dlq/' + encodeURIComponent(group) + '/export', download: 'dlq-' + group + '.json' }, 'Export JSON')),
    ...data.items.map((m) => messageCard(m, el('p', {}, 'Original topic: ', m.originTopic || 'unknown', ' ',
      el('button', { class: 'resend-one', onclick: () => resend([m.msgId]) }, 'Resend to original topic')))));
  };
  main.append(el('h1', {}, 'Dead-letter queues'),
    el('form', { class: 'inline', id: 'dlq-form', onsubmit: async (e) => { e.preventDefault(); try { await load(e.target.group.value); } catch (err) { flash(err.message); } } },
      el('label', {}, 'Consumer group', el('input', { name: 'group', required: true })),
      el('button', { type: 'submit' }, 'List dead letters')), out);
};

pages.acl = async (main) => {
  const data = await api('GET', '/api/acl');
  main.append(el('h1', {}, 'ACL accounts'));
  if (!data.enabled) {
    main.append(el('p', { class: 'muted' }, 'ACL is off on this cluster (aclEnable=false), or no broker lets the console list its accounts.'));
  }
  for (const b of data.brokers) {
    main.append(el('h2', {}, `${b.brokerName} (${b.addr})`));
    if (b.error) { main.append(el('p', { class: 'muted' }, b.error)); continue; }
    main.append(el('p', {}, 'Global white list: ', b.globalWhiteAddrs.length ? b.globalWhiteAddrs.join(', ') : 'none'),
      table(['access key', 'admin', 'white address', 'default topic perm', 'default group perm', 'topic perms', 'group perms'],
        b.accounts.map((a) => [a.accessKey, a.admin ? 'yes' : 'no', a.whiteRemoteAddress, a.defaultTopicPerm, a.defaultGroupPerm, a.topicPerms.join(', '), a.groupPerms.join(', ')])));
  }
};

async function route() {
  state.timers.forEach(clearInterval);
  state.timers = [];
  const [, page, ...rest] = (location.hash || '#/overview').split('/');
  const name = page in pages ? page : 'overview';
  const arg = rest.length ? decodeURIComponent(rest.join('/')) : undefined;
  document.querySelectorAll('#nav a').forEach((a) => a.classList.toggle('active', a.dataset.page === name || a.dataset.page === name + 's'));
  const main = clear(document.getElementById('main'));
  try { await pages[name](main, arg); } catch (err) { flash(err.message); }
}

document.addEventListener('DOMContentLoaded', async () => {
  const session = await api('GET', '/api/session');
  state.csrf = session.csrf;
  state.role = session.role;
  document.getElementById('who').textContent = session.user + ' (' + session.role + ')';
  document.getElementById('logout').addEventListener('click', async () => {
    await api('POST', '/api/logout').catch(() => {});
    window.location.assign('/login');
  });
  window.addEventListener('hashchange', () => { clear(document.getElementById('flash')); route(); });
  route();
});
