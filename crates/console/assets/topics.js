'use strict';
// The topic pages (the list, one topic) and the producers.

const TOPIC_TYPES = ['all', 'normal', 'retry', 'dlq', 'system'];

function topicLink(name) { return link('#/topic/' + encodeURIComponent(name), name); }

function typeBadge(type) { return badge(type, { normal: 'blue', retry: 'amber', dlq: 'red', system: 'grey' }[type]); }

function createTopicForm(reload) {
  return el('form', { class: 'inline', id: 'create-topic', onsubmit: async (e) => {
    e.preventDefault();
    const f = e.target;
    try {
      await api('POST', '/api/topics', { topic: f.topic.value, readQueueNums: Number(f.queues.value), writeQueueNums: Number(f.queues.value), perm: Number(f.perm.value) });
      flash('Topic ' + f.topic.value + ' saved on every master of the cluster', true);
      attempt(() => reload(1));
    } catch (err) { flash(err.message); }
  } },
  el('label', {}, 'Topic', el('input', { name: 'topic', required: true })),
  el('label', {}, 'Queues', el('input', { name: 'queues', type: 'number', value: '8', min: '1', max: '1024' })),
  el('label', {}, 'Permission', el('select', { name: 'perm' }, el('option', { value: '6' }, 'RW- (read-write)'), el('option', { value: '4' }, 'R-- (read)'), el('option', { value: '2' }, '-W- (write)'))),
  el('button', { type: 'submit' }, 'Create / update'));
}

pages.topics = async (main) => {
  const list = el('div', {});
  const filter = { type: 'all', q: '', system: false };
  const load = async (page) => {
    const data = await api('GET', '/api/topics?' + q({ type: filter.type, q: filter.q, system: filter.system ? 'true' : '', page: page || 1, size: 50 }));
    clear(list).append(table(['topic', 'type'], data.items.map((t) => [topicLink(t.name), typeBadge(t.type)]), { id: 'topic-list' }), pager(data, load));
  };
  const filters = el('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); filter.q = e.target.q.value; filter.type = e.target.type.value; attempt(() => load(1)); } },
    el('label', {}, 'Name contains', el('input', { name: 'q', type: 'search' })),
    el('label', {}, 'Type', el('select', { name: 'type' }, TOPIC_TYPES.map((t) => el('option', { value: t }, t)))),
    systemToggle((e) => { filter.system = e.target.checked; attempt(() => load(1)); }),
    el('button', { type: 'submit' }, 'Filter'));
  main.append(el('h1', {}, 'Topics'),
    writeOnly(() => card('Create or update a topic', createTopicForm(load))),
    card(null, filters, list));
  await load(1);
};

function sendTestForm(name) {
  return el('form', { class: 'inline', id: 'send-test', onsubmit: async (e) => {
    e.preventDefault();
    const f = e.target;
    const properties = {};
    if (f.pkey.value) properties[f.pkey.value] = f.pvalue.value;
    try {
      const r = await api('POST', '/api/topics/' + encodeURIComponent(name) + '/messages', { body: f.body.value, tags: f.tags.value, keys: f.keys.value, properties });
      flash('Sent: ' + r.msgId + ' (' + r.status + ', queue ' + r.queueId + ', offset ' + r.queueOffset + ')', true);
    } catch (err) { flash(err.message); }
  } },
  el('label', {}, 'Body', el('textarea', { name: 'body', rows: '2', cols: '40' })),
  el('label', {}, 'Tags', el('input', { name: 'tags' })), el('label', {}, 'Keys', el('input', { name: 'keys' })),
  el('label', {}, 'Property', el('input', { name: 'pkey', placeholder: 'name' })), el('label', {}, 'Value', el('input', { name: 'pvalue' })),
  el('button', { type: 'submit' }, 'Send test message'));
}

function deleteTopicButton(name) {
  return el('button', { class: 'danger', id: 'delete-topic', onclick: async () => {
    if (!confirmed(`Delete topic ${name}? It is removed from every broker and name server of its clusters; its messages can no longer be consumed.`)) return;
    try { await api('DELETE', '/api/topics/' + encodeURIComponent(name)); flash('Deleted ' + name, true); location.hash = '#/topics'; } catch (err) { flash(err.message); }
  } }, 'Delete topic');
}

pages.topic = async (main, name) => {
  const data = await api('GET', '/api/topics/' + encodeURIComponent(name));
  const chart = historyChart({ kind: 'topic', name }, { id: 'topic-chart', unit: 'msg/s', labels: { in: 'in' }, title: 'topic messages in per second' });
  const total = data.queues.reduce((n, x) => n + (x.maxOffset - x.minOffset), 0);
  main.append(el('h1', {}, 'Topic ', name),
    el('div', { class: 'stats' }, stat('Queues', String(data.queues.length)), stat('Messages stored', fmtCount(total)),
      stat('Consumer groups', String(data.consumers.length)),
      stat('Permission', [...new Set(data.route.queues.map((r) => r.permText || fmtPerm(r.perm)))].join(' ') || '—')),
    card('Messages in per second', chart.box),
    el('div', { class: 'two' },
      card('Route', table(['broker', { label: 'read queues', num: 1 }, { label: 'write queues', num: 1 }, 'permission'],
        data.route.queues.map((r) => [r.brokerName, String(r.readQueueNums), String(r.writeQueueNums), el('code', {}, r.permText || fmtPerm(r.perm))]))),
      card('Consumers', table(['group', { label: 'lag', num: 1 }], data.consumers.map((c) => [link('#/group/' + encodeURIComponent(c.group), c.group), fmtCount(c.lag)])))),
    card('Queues', el('div', { class: 'scroll' }, table(['broker', { label: 'queue', num: 1 }, { label: 'min offset', num: 1 }, { label: 'max offset', num: 1 }, 'last update'],
      data.queues.map((x) => [x.brokerName, String(x.queueId), fmtCount(x.minOffset), fmtCount(x.maxOffset), fmtTime(x.lastUpdateTimestamp)])))),
    writeOnly(() => card('Send a test message', sendTestForm(name))),
    writeOnly(() => el('div', { class: 'danger-zone' }, deleteTopicButton(name))));
  await every(main, 5000, chart.refresh);
};

// Rows of client connections; `heartbeat` adds the time of each one's last heartbeat.
function clientRows(clients, heartbeat) {
  return clients.map((c) => [c.clientId, c.clientAddr, c.language, el('code', {}, c.versionName || String(c.version)),
    ...(heartbeat ? [fmtTime(c.lastUpdateTimestamp)] : [])]);
}

pages.producers = async (main) => {
  const out = el('div', { id: 'producer-connections' });
  const online = el('div', { id: 'producers-online' });
  const topic = picker('topics', { name: 'topic', system: true });
  const group = picker('producer-groups', { name: 'group', system: true });
  const show = async (e) => {
    e.preventDefault();
    try {
      const data = await api('GET', '/api/producers?' + q({ group: group.select.value, topic: topic.select.value }));
      clear(out).append(el('p', { class: 'muted' }, `${data.clients.length} connection(s) of ${data.group} on ${data.topic}`),
        table(['client id', 'address', 'language', 'version'], clientRows(data.clients, false)));
    } catch (err) { flash(err.message); }
  };
  const system = systemToggle(() => attempt(() => loadOnline(false)));
  const loadOnline = async (background) => {
    const data = await api('GET', '/api/producers/online?' + q({ system: system.querySelector('input').checked ? 'true' : '' }), undefined, { background });
    clear(online).append(
      el('p', { class: 'muted' }, data.errors.length ? 'Not answered: ' + data.errors.join('; ') : 'Asked of every master (GET_ALL_PRODUCER_INFO).'),
      table(['producer group', 'client id', 'address', 'language', 'version', 'last heartbeat (UTC)'],
        data.items.flatMap((g) => clientRows(g.clients, true).map((row) => [g.group, ...row]))));
  };
  main.append(el('h1', {}, 'Producers'),
    card('Connections of a producer group on a topic',
      el('form', { class: 'inline', id: 'producer-form', onsubmit: show },
        field('Topic', topic), field('Producer group', group),
        el('button', { type: 'submit' }, 'Show connections')), out),
    card('Producers connected now (every master)', el('div', { class: 'toolbar' }, system), online));
  await Promise.all([topic.ready, group.ready]);
  await every(main, 10000, loadOnline);
};
