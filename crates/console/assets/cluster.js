'use strict';
// The cluster pages: the overview (figures and charts), the broker list and one broker (its
// runtime figures, its settings and the change of a setting).

function brokerLink(b) { return link('#/broker/' + encodeURIComponent(b.addr), `${b.brokerName}/${b.brokerId}`); }

function roleBadge(role) { return badge(role, role === 'master' ? 'blue' : 'grey'); }

function diskCell(b) {
  if (b.diskFull === 'true') return badge('FULL', 'red');
  if (b.diskPercent === null || b.diskPercent === undefined) return '—';
  return el('span', { class: b.diskPercent >= 85 ? 'warn' : null }, fmtPercent(b.diskPercent));
}

// How long a broker has run, from its boot time (or its own words when it reports none).
function uptime(bootTimestamp, words) { return Number(bootTimestamp) > 0 ? fmtAge(Date.now() - Number(bootTimestamp)) : (words || '—'); }

function sum(rows, key) {
  const values = rows.map((b) => b[key]).filter((v) => typeof v === 'number');
  return values.length ? values.reduce((a, b) => a + b, 0) : null;
}

pages.overview = async (main) => {
  main.append(el('h1', {}, 'Overview'));
  const summary = el('div', { class: 'stats' });
  const rates = historyChart({ kind: 'cluster' }, { id: 'tps-chart', unit: 'msg/s', title: 'messages per second' });
  const perBroker = historyChart({ kind: 'brokers' }, { id: 'broker-chart', unit: 'msg/s', title: 'messages in per second by broker' });
  const brokers = el('div', { id: 'broker-table' });
  main.append(summary,
    el('div', { class: 'two' }, card('Messages per second, cluster', rates.box), card('Messages in per second, by broker', perBroker.box)),
    card('Brokers', brokers));
  await every(main, 5000, async (background) => {
    const data = await api('GET', '/api/overview', undefined, { background });
    const answered = data.brokers.filter((b) => !b.error).length;
    clear(summary).append(
      stat('Name servers', data.namesrv),
      stat('Clusters', data.clusters.join(', ') || '—'),
      stat('Brokers', `${answered} of ${data.brokers.length} answering`),
      stat('In (msg/s)', fmtNum(data.putTps), 'tps-in'),
      stat('Out (msg/s)', fmtNum(data.getTps), 'tps-out'),
      stat('Today in / out', `${fmtCount(sum(data.brokers.filter((b) => b.role === 'master'), 'todayIn'))} / ${fmtCount(sum(data.brokers, 'todayOut'))}`));
    clear(brokers).append(table(['broker', 'role', 'address', 'version', { label: 'in/s', num: 1 }, { label: 'out/s', num: 1 },
      { label: 'today in', num: 1 }, { label: 'today out', num: 1 }, { label: 'disk', num: 1 }],
    data.brokers.map((b) => [brokerLink(b), roleBadge(b.role), b.addr, b.error ? el('span', { class: 'error' }, b.error) : (b.version || ''),
      fmtNum(b.putTps), fmtNum(b.getTps), fmtCount(b.todayIn), fmtCount(b.todayOut), diskCell(b)])));
    await Promise.all([rates.refresh(background), perBroker.refresh(background)]);
  });
};

pages.brokers = async (main) => {
  main.append(el('h1', {}, 'Brokers'));
  const out = el('div', {});
  main.append(card(null, out));
  await every(main, 5000, async (background) => {
    const data = await api('GET', '/api/overview', undefined, { background });
    clear(out).append(table(['cluster', 'broker', 'role', 'address', 'version', { label: 'in/s', num: 1 }, { label: 'out/s', num: 1 },
      { label: 'today in', num: 1 }, { label: 'today out', num: 1 }, { label: 'yesterday in', num: 1 }, { label: 'yesterday out', num: 1 },
      { label: 'disk', num: 1 }, 'running for'],
    data.brokers.map((b) => [b.cluster, brokerLink(b), roleBadge(b.role), b.addr, b.error ? el('span', { class: 'error' }, b.error) : (b.version || ''),
      fmtNum(b.putTps), fmtNum(b.getTps), fmtCount(b.todayIn), fmtCount(b.todayOut), fmtCount(b.yesterdayIn), fmtCount(b.yesterdayOut),
      diskCell(b), uptime(b.bootTimestamp, b.runtime)]), { class: 'nowrap' }));
  });
};

// A key/value table with a filter box above it.
function filteredTable(id, entries, note) {
  entries = entries.slice().sort(([a], [b]) => a.localeCompare(b, 'en', { sensitivity: 'base' }));
  const body = el('div', { class: 'scroll' });
  const draw = (text) => {
    const f = text.toLowerCase();
    clear(body).append(table(['key', 'value'], entries.filter(([k, v]) => !f || k.toLowerCase().includes(f) || String(v).toLowerCase().includes(f))
      .map(([k, v]) => [el('code', {}, k), String(v)]), { id, class: 'kv' }));
  };
  draw('');
  return el('div', {}, el('div', { class: 'toolbar' }, el('input', { type: 'search', placeholder: 'filter', 'aria-label': 'filter ' + id, oninput: (e) => draw(e.target.value) }),
    note ? el('span', { class: 'muted' }, note) : null), body);
}

// The form that changes one setting of the broker at `addr` (read-write sessions only). The
// setting's name is picked from the broker's settings or typed (a key it does not list).
function configForm(data, reload) {
  const value = el('input', { name: 'value', size: '28', required: true });
  const key = el('input', { name: 'key', list: 'config-keys', size: '30', required: true, value: 'brokerPermission',
    oninput: (e) => { if (e.target.value in data.config) value.value = data.config[e.target.value]; } });
  const keys = el('datalist', { id: 'config-keys' }, Object.keys(data.config).map((k) => el('option', { value: k })));
  value.value = data.config[key.value] || '';
  const who = `${data.brokerName}/${data.brokerId} (${data.addr})`;
  return el('form', { class: 'inline', id: 'config-form', onsubmit: async (e) => {
    e.preventDefault();
    const k = key.value.trim(), v = value.value.trim();
    const was = k in data.config ? `from "${data.config[k]}" ` : '';
    if (!confirmed(`Change ${k} ${was}to "${v}" on broker ${who}? The broker applies the change at once or refuses it; a change lasts until the broker restarts.`)) return;
    try {
      const r = await api('POST', '/api/brokers/' + encodeURIComponent(data.addr) + '/config', { key: k, value: v });
      flash(`${who} accepted ${r.key}=${r.value}` + (r.nowReads !== null && r.nowReads !== undefined ? ` (it now reads ${r.nowReads})` : ''), true);
      await reload();
    } catch (err) { flash(`${who} refused ${k}=${v}: ${err.message}`); }
  } }, el('label', {}, 'Setting', key), keys, el('label', {}, 'New value', value), el('button', { type: 'submit' }, 'Apply'));
}

pages.broker = async (main, addr) => {
  const data = await api('GET', '/api/brokers/' + encodeURIComponent(addr));
  const rt = data.runtime;
  const first = (text) => (text ? fmtNum(Number(String(text).split(' ')[0])) : '—');
  const chart = historyChart({ kind: 'broker', name: addr }, { id: 'broker-tps-chart', unit: 'msg/s', byDirection: true, title: 'broker messages per second' });
  const settings = el('div', {});
  const reload = async () => {
    const fresh = await api('GET', '/api/brokers/' + encodeURIComponent(addr));
    Object.assign(data, fresh);
    clear(settings).append(data.configError ? el('p', { class: 'error' }, data.configError) : filteredTable('broker-config', Object.entries(data.config)));
  };
  main.append(el('h1', {}, 'Broker ', `${data.brokerName}/${data.brokerId}`, ' ', roleBadge(data.role)),
    el('p', { class: 'muted' }, `${data.addr} · cluster ${data.cluster} · ${rt.brokerVersionDesc || ''}`),
    el('div', { class: 'stats' }, stat('In (msg/s, last 10 s)', first(rt.putTps)), stat('Out (msg/s, last 10 s)', first(rt.getTransferredTps || rt.getTransferedTps)),
      stat('Disk used', rt.commitLogDiskRatio >= 0 ? fmtPercent(Number(rt.commitLogDiskRatio) * 100) : '—'),
      stat('Commit log', fmtBytes(Number(rt.commitLogMaxOffset || 0) - Number(rt.commitLogMinOffset || 0))), stat('Running for', uptime(rt.bootTimestamp, rt.runtime))),
    card('Messages per second', chart.box),
    el('div', { class: 'two' },
      card('Runtime figures (GET_BROKER_RUNTIME_INFO)', data.runtimeError ? el('p', { class: 'error' }, data.runtimeError) : filteredTable('broker-runtime', Object.entries(rt))),
      card('Settings (GET_BROKER_CONFIG)', writeOnly(() => configForm(data, reload)), settings)));
  await reload();
  await every(main, 5000, chart.refresh);
};
