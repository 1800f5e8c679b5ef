'use strict';
// The console's single page: shared helpers, the status banner and the router. The pages live
// in chart.js, cluster.js, topics.js, groups.js and messages.js, loaded after this file.
//
// Everything that comes from the cluster (names, bodies, keys, properties, client ids) is put
// into the page as text nodes (textContent / DOM APIs), never parsed as HTML.

const state = {
  csrf: '',
  role: '',
  canWrite: false,
  timers: [],
  // When the page shown last loaded its data (ms), and why its last refresh failed.
  dataAt: 0,
  pageError: '',
  // The name servers' reachability, from /api/status, and when they last answered (ms, this
  // browser's clock).
  health: { ok: true, error: '', lastOkAt: 0 },
};

const pages = {};

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
    if (child === undefined || child === null || child === false) continue;
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

// A call of the console's API. A GET that answers marks the page's data as fresh, unless
// opts.aside says it is not the page's data (the charts' series, the pickers' names).
// opts.background marks a read the page makes on its own (a periodic refresh): the server does
// not count it as the user's activity, so an open page does not keep an idle session alive.
async function api(method, path, body, opts) {
  const init = { method, headers: {} };
  if (method !== 'GET') init.headers['x-csrf-token'] = state.csrf;
  if (opts && opts.background) init.headers['x-comet-background'] = '1';
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiFailure('the console does not answer: ' + err.message);
  }
  if (response.status === 401) { window.location.assign('/login'); throw new ApiFailure('login required'); }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiFailure(data.error || ('HTTP ' + response.status));
  if (method === 'GET' && !(opts && opts.aside)) { state.dataAt = Date.now(); state.pageError = ''; }
  return data;
}

function q(params) {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') search.set(k, v);
  return search.toString();
}

// ---- units -------------------------------------------------------------------------------------

function fmtTime(ms) { return ms > 0 ? new Date(Number(ms)).toISOString().replace('T', ' ').replace(/\.\d+Z$/, '') : ''; }
function fmtNum(n) { return n === null || n === undefined ? '—' : (Math.round(Number(n) * 10) / 10).toLocaleString('en'); }
function fmtCount(n) { return n === null || n === undefined ? '—' : Number(n).toLocaleString('en'); }
function fmtPercent(p) { return p === null || p === undefined ? '—' : p.toFixed(1) + ' %'; }
function fmtBytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = Number(n), i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : String(v)) + ' ' + units[i];
}
// A duration in words: 42 s, 3 min 5 s, 2 h 10 min, 3 d 4 h.
function fmtAge(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  if (s < 86400) return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  return Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
}
// A topic permission as mqadmin prints it: R, W and X (inherit) bits, '-' for absent ones.
function fmtPerm(perm) { return (perm & 4 ? 'R' : '-') + (perm & 2 ? 'W' : '-') + (perm & 1 ? 'X' : '-'); }

// ---- building blocks ---------------------------------------------------------------------------

// A table; a header is a label or { label, num: true } for a right-aligned number column.
function table(headers, rows, attrs) {
  return el('table', attrs || {},
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', { class: h.num ? 'num' : null }, h.label || h)))),
    el('tbody', {}, rows.length === 0
      ? el('tr', {}, el('td', { class: 'muted empty', colspan: headers.length }, 'none'))
      : rows.map((cells) => el('tr', {}, cells.map((c, i) => el('td', { class: headers[i].num ? 'num' : null }, c))))));
}

function link(hash, text) { return el('a', { href: hash }, text); }

function card(title, ...children) { return el('section', { class: 'card' }, title ? el('h2', {}, title) : null, ...children); }

function stat(label, value, id) {
  return el('div', { class: 'stat-card' }, el('div', { class: 'stat-label' }, label), el('div', { class: 'stat', id }, value));
}

function badge(text, kind) { return el('span', { class: 'badge ' + (kind || '') }, text); }

// Runs an asynchronous action from a click or a form; its failure is shown, never uncaught.
function attempt(action) { Promise.resolve().then(action).catch((err) => flash(err.message)); }

function pager(data, go) {
  const pages = Math.max(1, Math.ceil(data.total / data.size));
  return el('div', { class: 'pager' },
    el('button', { class: 'secondary', disabled: data.page <= 1, onclick: () => attempt(() => go(data.page - 1)) }, 'Previous'),
    el('span', {}, `page ${data.page} of ${pages} (${fmtCount(data.total)} items)`),
    el('button', { class: 'secondary', disabled: data.page >= pages, onclick: () => attempt(() => go(data.page + 1)) }, 'Next'));
}

// A control that changes the cluster: only for a session that may write. The read-only role
// gets nothing, an empty text (the server refuses its writes anyway).
function writeOnly(build) { return state.canWrite ? build() : ''; }

// Asks before an operation that cannot be undone; `what` says what will happen.
function confirmed(what) { return window.confirm(what); }

// A select list of names from the cluster (/api/pickers/<kind>), optionally with a
// "show system" box. opts: { name, blank (label of an empty first choice), selected, system }.
function picker(kind, opts) {
  const select = el('select', { name: opts.name, 'aria-label': opts.name, 'data-picker': kind });
  const box = opts.system ? el('input', { type: 'checkbox', name: opts.name + '-system' }) : null;
  const fill = async () => {
    const keep = select.value || opts.selected || '';
    const data = await api('GET', '/api/pickers/' + kind + '?' + q({ system: box && box.checked ? 'true' : '' }), undefined, { aside: true });
    clear(select);
    if (opts.blank !== undefined) select.append(el('option', { value: '' }, opts.blank));
    for (const name of data.items) select.append(el('option', { value: name }, name));
    if (data.items.includes(keep)) select.value = keep;
    if (data.truncated) select.append(el('option', { value: '', disabled: true }, `… ${data.total - data.items.length} more (narrow the list)`));
    select.dispatchEvent(new Event('change'));
  };
  if (box) box.addEventListener('change', () => attempt(fill));
  const wrap = el('span', { class: 'picker' }, select, box ? el('label', { class: 'inline-check' }, box, 'show system') : null);
  wrap.ready = fill().catch((err) => flash(err.message));
  wrap.select = select;
  return wrap;
}

// A labelled control that is not a single input (a picker with its own checkbox).
function field(name, control) { return el('div', { class: 'field' }, el('span', { class: 'field-name' }, name), control); }

// A "show system" checkbox for a list filter.
function systemToggle(onchange) {
  const box = el('input', { type: 'checkbox', name: 'system', onchange });
  return el('label', { class: 'inline-check' }, box, 'show system');
}

// Runs `fn` now and every `ms` while the page built in `main` is shown; `fn(background)` is
// told whether the run is a periodic one (see api). A page left before it set this up finds its
// `main` detached: nothing runs. A failure keeps the numbers shown and puts the error and their
// age in the status banner; it never escapes as an uncaught error.
function every(main, ms, fn) {
  if (!main.isConnected) return Promise.resolve();
  const run = async (background) => {
    if (!main.isConnected) return;
    try { await fn(background); } catch (err) { state.pageError = err.message; renderStatus(); }
  };
  const first = run(false);
  const timer = setInterval(() => (main.isConnected ? run(true) : clearInterval(timer)), ms);
  state.timers.push(timer);
  return first;
}

// ---- the status banner: the name servers' reachability and the age of the data shown -------

const STATUS_POLL_MS = 5000;

// Shown when the name servers do not answer or the page's last refresh failed: the error, and
// how old the numbers on the page are (or, for a page that loaded nothing, when the name
// servers last answered). The page keeps its numbers, greyed.
function renderStatus() {
  const bar = document.getElementById('status');
  const main = document.getElementById('main');
  const health = state.health;
  const problem = !health.ok ? 'name servers unreachable: ' + health.error : state.pageError;
  if (!problem) { bar.hidden = true; main.classList.remove('stale'); return; }
  let age;
  if (state.dataAt) age = 'data from ' + fmtAge(Date.now() - state.dataAt) + ' ago';
  else if (!health.ok && health.lastOkAt) age = 'no data on this page; the name servers last answered ' + fmtAge(Date.now() - health.lastOkAt) + ' ago';
  else age = 'no data on this page';
  bar.textContent = problem + ' — ' + age;
  bar.hidden = false;
  main.classList.toggle('stale', state.dataAt > 0);
}

async function pollStatus() {
  try {
    const response = await fetch('/api/status');
    if (response.status === 401) { window.location.assign('/login'); return; }
    const data = await response.json();
    // The server's clock says how long ago; this browser's clock keeps counting from there.
    const lastOkAt = data.lastOkMs ? Date.now() - (data.now - data.lastOkMs) : 0;
    state.health = { ok: data.ok, error: data.error || '', lastOkAt };
  } catch (err) {
    state.health = { ok: false, error: 'the console does not answer (' + err.message + ')', lastOkAt: state.health.lastOkAt };
  }
  renderStatus();
  setTimeout(pollStatus, STATUS_POLL_MS);
}

// ---- router ------------------------------------------------------------------------------------

async function route() {
  state.timers.forEach(clearInterval);
  state.timers = [];
  state.dataAt = 0;
  state.pageError = '';
  const [, page, ...rest] = (location.hash || '#/overview').split('/');
  const name = page in pages ? page : 'overview';
  const arg = rest.length ? decodeURIComponent(rest.join('/')) : undefined;
  document.querySelectorAll('#nav a').forEach((a) => a.classList.toggle('active', a.dataset.page === name || a.dataset.page === name + 's'));
  // A new element for each page: a page still loading when the user moves on builds into the
  // old, detached one and never into the next page.
  const main = el('main', { id: 'main' });
  document.getElementById('main').replaceWith(main);
  renderStatus();
  try { await pages[name](main, arg); } catch (err) { state.pageError = err.message; flash(err.message); }
  // Marks the page as built (its controls are all there), for tools driving it.
  main.dataset.ready = name;
  renderStatus();
}

async function boot() {
  const session = await api('GET', '/api/session');
  state.csrf = session.csrf;
  state.role = session.role;
  state.canWrite = session.canWrite === true;
  document.getElementById('who').textContent = session.user + (state.canWrite ? '' : ' (read-only)');
  document.body.classList.toggle('read-only', !state.canWrite);
  document.getElementById('logout').addEventListener('click', async () => {
    await api('POST', '/api/logout').catch(() => {});
    window.location.assign('/login');
  });
  window.addEventListener('hashchange', () => { clear(document.getElementById('flash')); route(); });
  setInterval(renderStatus, 1000);
  pollStatus();
  await route();
}

document.addEventListener('DOMContentLoaded', () => {
  boot().catch((err) => flash('the console could not start: ' + err.message));
});
