'use strict';
// The consumer group pages: the list and one group (clients, subscriptions, queues, lag over
// time, offset reset, skip backlog, delete).

function groupLink(name) { return link('#/group/' + encodeURIComponent(name), name); }

// CONSUME_PASSIVELY → push, CONSUME_ACTIVELY → pull, CONSUME_POP → pop.
function consumeTypeText(t) { return { CONSUME_PASSIVELY: 'push', CONSUME_ACTIVELY: 'pull', CONSUME_POP: 'pop' }[t] || t || '—'; }
function modelText(m) { return m ? m.toLowerCase() : '—'; }

pages.groups = async (main) => {
  const list = el('div', {});
  const filter = { q: '', system: false };
  const load = async (page) => {
    const data = await api('GET', '/api/groups?' + q({ q: filter.q, system: filter.system ? 'true' : '', page: page || 1, size: 20 }));
    clear(list).append(table(['group', { label: 'clients', num: 1 }, 'client version', 'type', 'mode', { label: 'lag', num: 1 }, { label: 'consumed/s', num: 1 }],
      data.items.map((g) => [groupLink(g.group), String(g.clients), g.version ? el('code', {}, g.version) : '—', consumeTypeText(g.consumeType),
        modelText(g.messageModel), fmtCount(g.lag), fmtNum(g.consumeTps)]), { id: 'group-list' }), pager(data, load));
  };
  main.append(el('h1', {}, 'Consumer groups'),
    card(null, el('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); filter.q = e.target.q.value; attempt(() => load(1)); } },
      el('label', {}, 'Name contains', el('input', { name: 'q', type: 'search' })),
      systemToggle((e) => { filter.system = e.target.checked; attempt(() => load(1)); }),
      el('button', { type: 'submit' }, 'Filter')), list));
  await load(1);
};

// The reset form: reset to a time, or skip the backlog, after a confirmation naming the group,
// the topic and what happens to the messages.
function resetForm(group, path, topics, current, render) {
  const lagOf = (topic) => current().queues.filter((x) => x.topic === topic).reduce((n, x) => n + x.lag, 0);
  const skip = async (e) => {
    const t = e.target.form.topic.value;
    if (!confirmed(`Skip the backlog of group ${group} on topic ${t}? The offset of every queue moves to its end: the ${fmtCount(lagOf(t))} message(s) waiting now are never consumed by this group.`)) return;
    try { await api('POST', path + '/skip', { topic: t }); flash('Backlog of ' + t + ' skipped', true); render(); } catch (err) { flash(err.message); }
  };
  return el('form', { class: 'inline', id: 'reset-form', onsubmit: async (e) => {
    e.preventDefault();
    const f = e.target;
    const ts = f.when.value ? Date.parse(f.when.value + 'Z') : NaN;
    if (Number.isNaN(ts)) { flash('pick a time (UTC)'); return; }
    const when = fmtTime(ts) + ' UTC';
    if (!confirmed(`Reset the offsets of group ${group} on topic ${f.topic.value} to ${when}? Every queue moves to its first message stored at or after that time: messages stored before it are skipped, later ones are consumed (again).`)) return;
    try {
      const r = await api('POST', path + '/reset', { topic: f.topic.value, timestamp: ts, force: true });
      flash(`Offsets of ${r.topic} reset on ${r.queues.length} queue(s)` + (r.committedOffline ? ' (group offline: committed directly)' : ''), true);
      render();
    } catch (err) { flash(err.message); }
  } },
  el('label', {}, 'Topic', el('select', { name: 'topic' }, topics.map((t) => el('option', { value: t }, t)))),
  el('label', {}, 'Time (UTC)', el('input', { name: 'when', type: 'datetime-local', step: '1' })),
  el('button', { type: 'submit' }, 'Reset to time'),
  el('button', { type: 'button', class: 'secondary', id: 'skip-backlog', onclick: skip }, 'Skip backlog'));
}

function deleteGroupButton(group, path) {
  return el('button', { class: 'danger', id: 'delete-group', onclick: async () => {
    if (!confirmed(`Delete group ${group}? Its subscription and its committed offsets are removed from every broker.`)) return;
    try { await api('DELETE', path); flash('Deleted ' + group, true); location.hash = '#/groups'; } catch (err) { flash(err.message); }
  } }, 'Delete group');
}

pages.group = async (main, group) => {
  const body = el('div', {});
  const path = '/api/groups/' + encodeURIComponent(group);
  const lag = historyChart({ kind: 'group', name: group }, { id: 'lag-chart', only: 'lag', unit: 'messages', title: 'lag' });
  const tps = historyChart({ kind: 'group', name: group }, { id: 'consume-chart', only: 'consumed/s', unit: 'msg/s', title: 'consumed per second' });
  let last = null;
  // Refreshed every few seconds; the forms are built once so typing is never lost.
  const render = async (background) => {
    const data = await api('GET', path, undefined, { background });
    last = data;
    const status = data.online ? `online, ${data.clients.length} client(s), ${consumeTypeText(data.consumeType)}, ${modelText(data.messageModel)}` : 'offline (no client connected)';
    clear(body).append(
      el('p', { id: 'group-status' }, badge(data.online ? 'online' : 'offline', data.online ? 'green' : 'grey'), ' ', status, ' — total lag ', el('b', {}, fmtCount(data.lag))),
      el('div', { class: 'two' },
        card('Clients', table(['client id', 'address', 'language', 'version'], data.clients.map((c) => [c.clientId, c.clientAddr, c.language, el('code', {}, c.versionName || String(c.version))]))),
        card('Subscriptions', table(['topic', 'expression', 'type'], data.subscriptions.map((s) => [s.topic, s.expression, s.type])))),
      card('Queues', el('div', { class: 'scroll' }, table(['topic', 'broker', { label: 'queue', num: 1 }, { label: 'broker offset', num: 1 }, { label: 'consumer offset', num: 1 }, { label: 'lag', num: 1 }, 'last consumed'],
        data.queues.map((x) => [x.topic, x.brokerName, String(x.queueId), fmtCount(x.brokerOffset), fmtCount(x.consumerOffset), fmtCount(x.lag), fmtTime(x.lastTimestamp)])))));
    await Promise.all([lag.refresh(background), tps.refresh(background)]);
    return data;
  };
  const refresh = (background) => render(background === true).catch((err) => { state.pageError = err.message; renderStatus(); });
  main.append(el('h1', {}, 'Consumer group ', group),
    el('div', { class: 'two' }, card('Lag (messages)', lag.box), card('Consumed per second', tps.box)), body);
  const first = await render(false);
  const topics = [...new Set(first.topics.concat(first.subscriptions.map((s) => s.topic)))].filter((t) => !t.startsWith('%'));
  main.append(writeOnly(() => card('Reset offsets', resetForm(group, path, topics, () => last, refresh))),
    writeOnly(() => el('div', { class: 'danger-zone' }, deleteGroupButton(group, path))));
  // The first render is done: the periodic ones follow.
  every(main, 5000, (background) => (background ? render(true) : undefined));
};
