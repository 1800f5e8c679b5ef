'use strict';
// The message pages: search (a compact list, one message's detail on click), message trace,
// dead letters, and the ACL listing.

const PREVIEW_CHARS = 60;

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
  return el('div', { class: 'message-detail' },
    el('div', { class: 'two' },
      el('div', {}, el('h3', {}, 'Fields'), table(['field', 'value'], [
        ['msgId', msg.msgId], ['offset msgId', msg.offsetMsgId], ['topic', msg.topic], ['queue', `${msg.queueId} @ ${msg.queueOffset}`],
        ['tags', msg.tags || ''], ['keys', (msg.keys || []).join(' ')], ['stored', fmtTime(msg.storeTimestamp) + ' UTC on ' + msg.storeHost],
        ['born', fmtTime(msg.bornTimestamp) + ' UTC on ' + msg.bornHost], ['reconsume times', String(msg.reconsumeTimes)],
        ['body', fmtBytes(msg.bodyLength)]])),
      el('div', {}, el('h3', {}, 'Properties'), table(['key', 'value'], props))),
    el('h3', {}, 'Body'), bodyView(msg),
    el('p', {}, link('#/trace/' + encodeURIComponent(msg.msgId), 'Message trace'), extra ? ' ' : null, extra || null));
}

// The start of a body on one line; a body that is not text (control characters, invalid UTF-8
// shown as U+FFFD) starts as hex.
function preview(m) {
  const text = String(m.bodyText || '');
  const odd = (text.match(/[\u0000-\u0008\u000e-\u001f\ufffd]/g) || []).length;
  if (odd > text.length / 20) {
    const raw = atob(m.bodyBase64 || '').slice(0, 16);
    return 'binary: ' + Array.from(raw, (c) => c.charCodeAt(0).toString(16).padStart(2, '0')).join(' ') + ' …';
  }
  const one = text.replace(/\s+/g, ' ');
  return one.length > PREVIEW_CHARS ? one.slice(0, PREVIEW_CHARS) + '…' : one;
}

// A compact list of messages: one line each; a click opens the message under its line.
// opts.extra: { headers: [...], cells(msg) → [...] } adds columns; opts.detail(msg) adds to the detail.
function messageList(items, opts) {
  opts = opts || {};
  const extra = opts.extra || { headers: [], cells: () => [] };
  const headers = ['message id', 'tags', 'keys', 'stored (UTC)', { label: 'size', num: 1 }, 'body', ...extra.headers];
  const rows = items.map((m) => {
    const row = el('tr', { class: 'message', tabindex: '0' },
      [el('code', {}, m.msgId), m.tags || '', (m.keys || []).join(' '), fmtTime(m.storeTimestamp), fmtBytes(m.bodyLength), el('span', { class: 'muted' }, preview(m)), ...extra.cells(m)]
        .map((c, i) => el('td', { class: headers[i].num ? 'num' : null }, c)));
    let open = null;
    const toggle = (e) => {
      if (e.target.closest('button, a, input')) return;
      if (open) { open.remove(); open = null; row.classList.remove('open'); return; }
      open = el('tr', { class: 'detail' }, el('td', { colspan: headers.length }, messageCard(m, opts.detail ? opts.detail(m) : null)));
      row.after(open);
      row.classList.add('open');
    };
    row.addEventListener('click', toggle);
    row.addEventListener('keydown', (e) => { if (e.key === 'Enter') toggle(e); });
    return row;
  });
  return el('table', { class: 'messages', id: 'message-list' },
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', { class: h.num ? 'num' : null }, h.label || h)))),
    el('tbody', {}, rows.length ? rows : el('tr', {}, el('td', { class: 'muted empty', colspan: headers.length }, 'no message'))));
}

pages.messages = async (main) => {
  const out = el('div', { id: 'message-results', class: 'results' });
  const showList = (data, go) => {
    clear(out).append(el('p', { class: 'muted' }, `${fmtCount(data.total)} message(s)` + (data.truncated ? ` (only the first ${data.max} are shown)` : '') + ' — click one for its detail'),
      messageList(data.items));
    if (data.size) out.append(pager(data, go));
  };
  const run = (fn) => (e) => { e.preventDefault(); attempt(() => fn(e.target)); };
  const byTime = async (f, page) => {
    const begin = f.begin.value ? Date.parse(f.begin.value + 'Z') : 0;
    const end = f.end.value ? Date.parse(f.end.value + 'Z') : Date.now();
    const data = await api('GET', '/api/messages/by-time?' + q({ topic: f.topic.value, begin, end, page: page || 1, size: 50 }));
    showList(data, (p) => byTime(f, p));
  };
  const keyTopic = picker('topics', { name: 'topic', system: true });
  const idTopic = picker('topics', { name: 'topic', blank: '(any, for offset ids)' });
  const timeTopic = picker('topics', { name: 'topic', system: true });
  main.append(el('h1', {}, 'Messages'),
    card(null,
      el('form', { class: 'inline', id: 'by-time', onsubmit: run((f) => byTime(f, 1)) },
        field('Topic', timeTopic),
        el('label', {}, 'From (UTC)', el('input', { name: 'begin', type: 'datetime-local', step: '1' })),
        el('label', {}, 'To (UTC)', el('input', { name: 'end', type: 'datetime-local', step: '1' })),
        el('button', { type: 'submit' }, 'Find by time')),
      el('form', { class: 'inline', id: 'by-key', onsubmit: run(async (f) => showList(await api('GET', '/api/messages/by-key?' + q({ topic: f.topic.value, key: f.key.value })))) },
        field('Topic', keyTopic), el('label', {}, 'Key', el('input', { name: 'key', required: true })),
        el('button', { type: 'submit' }, 'Find by key')),
      el('form', { class: 'inline', id: 'by-id', onsubmit: run(async (f) => showList(await api('GET', '/api/messages/by-id?' + q({ id: f.elements.namedItem('id').value, topic: f.topic.value })))) },
        el('label', {}, 'Message id', el('input', { name: 'id', required: true, size: '34' })), field('Topic (for unique ids)', idTopic),
        el('button', { type: 'submit' }, 'Find by id'))),
    out);
  await Promise.all([keyTopic.ready, idTopic.ready, timeTopic.ready]);
};

pages.dlq = async (main, initial) => {
  const out = el('div', { id: 'dlq-results', class: 'results' });
  const groups = picker('dlq-groups', { name: 'group', selected: initial });
  const load = async (group) => {
    const data = await api('GET', '/api/dlq/' + encodeURIComponent(group) + '?limit=100');
    const resend = async (ids, what) => {
      if (!confirmed(what)) return;
      try {
        const r = await api('POST', '/api/dlq/' + encodeURIComponent(group) + '/resend', { msgIds: ids });
        const failed = r.results.filter((x) => x.error);
        flash(`Resent ${r.results.length - failed.length} message(s)` + (failed.length ? `, ${failed.length} failed: ${failed[0].error}` : ''), failed.length === 0);
      } catch (err) { flash(err.message); }
    };
    const all = `Re-send all ${data.total} listed dead letter(s) of group ${group} to their original topics? Each becomes a new message there and is consumed again; the dead letters stay in %DLQ%${group}.`;
    const one = (m) => `Re-send dead letter ${m.msgId} to ${m.originTopic || 'its original topic'}? It becomes a new message there and is consumed again.`;
    clear(out).append(el('div', { class: 'toolbar' }, el('span', {}, `${data.total} dead letter(s) of ${group}`),
      writeOnly(() => el('button', { id: 'resend-all', disabled: data.total === 0, onclick: () => attempt(() => resend(data.items.map((m) => m.msgId), all)) }, 'Resend all listed')),
      el('a', { href: '/api/dlq/' + encodeURIComponent(group) + '/export', download: 'dlq-' + group + '.json' }, 'Export JSON')),
    messageList(data.items, {
      extra: {
        headers: ['original topic', { label: 'reconsumed', num: 1 }, ''],
        cells: (m) => [m.originTopic || 'unknown', String(m.reconsumeTimes),
          writeOnly(() => el('button', { class: 'secondary resend-one', onclick: () => attempt(() => resend([m.msgId], one(m))) }, 'Resend'))],
      },
    }));
  };
  main.append(el('h1', {}, 'Dead-letter queues'),
    card(null, el('form', { class: 'inline', id: 'dlq-form', onsubmit: (e) => { e.preventDefault(); attempt(() => load(groups.select.value)); } },
      field('Consumer group', groups), el('button', { type: 'submit' }, 'List dead letters'))), out);
  await groups.ready;
  if (initial) await load(initial);
};

pages.acl = async (main) => {
  const data = await api('GET', '/api/acl');
  main.append(el('h1', {}, 'ACL accounts'));
  if (!data.enabled) {
    main.append(el('p', { class: 'muted' }, 'ACL is off on this cluster (aclEnable=false), or no broker lets the console list its accounts.'));
  }
  for (const b of data.brokers) {
    const body = b.error ? [el('p', { class: 'muted' }, b.error)] : [el('p', {}, 'Global white list: ', b.globalWhiteAddrs.length ? b.globalWhiteAddrs.join(', ') : 'none'),
      table(['access key', 'admin', 'white address', 'default topic perm', 'default group perm', 'topic perms', 'group perms'],
        b.accounts.map((a) => [a.accessKey, a.admin ? 'yes' : 'no', a.whiteRemoteAddress, a.defaultTopicPerm, a.defaultGroupPerm, a.topicPerms.join(', '), a.groupPerms.join(', ')]))];
    main.append(card(`${b.brokerName} (${b.addr})`, ...body));
  }
};
