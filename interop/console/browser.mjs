// Drives the console in headless Chromium: logs in, loads every page, performs the writes, and
// proves that text from clients (a body, a key and a property holding a script tag) is shown as
// text. Exits non-zero on any browser console error, page error or dialog.
//
//   node browser.mjs   (env: CONSOLE_URL, CONSOLE_PASSWORD, OUT, PLAYWRIGHT_DIR, CHROMIUM)
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR, 'node_modules', 'x.js'));
const { chromium } = require('playwright-core');

const url = process.env.CONSOLE_URL;
const password = process.env.CONSOLE_PASSWORD;
const out = process.env.OUT;
const XSS_BODY = '<script>alert(1)</script>';
const XSS_KEY = '<script>alert(2)</script>';
const XSS_PROP = '<img src=x onerror=alert(3)>';
const STEP_TIMEOUT = 30000;
// Against another cluster (MODE=apache): the read pages and a topic creation only.
const APACHE = process.env.MODE === 'apache';
const PREFIX = APACHE ? 'apache-' : '';
const CREATED = APACHE ? 'ConsoleApacheCreated' : 'ConsoleCreated';

const problems = [];
const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'comet-console-chromium-'));
// A fresh profile directory: Playwright passes it to Chromium as --user-data-dir.
const context = await chromium.launchPersistentContext(userDir, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1280, height: 800 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(STEP_TIMEOUT);
// The one refused request the run makes on purpose is the wrong-password login.
let expectRefusal = false;
page.on('console', (msg) => {
  if (msg.type() !== 'error') return;
  if (expectRefusal && msg.text().includes('401')) return;
  problems.push('console error: ' + msg.text());
});
page.on('pageerror', (err) => problems.push('page error: ' + err.message));
page.on('dialog', async (dialog) => {
  if (dialog.type() === 'confirm') { await dialog.accept(); return; }
  problems.push('dialog fired: ' + dialog.type() + ' ' + dialog.message());
  await dialog.dismiss();
});

const shot = (name) => page.screenshot({ path: path.join(out, PREFIX + name + '.png') });
const step = (name) => console.log('browser: ' + name);
async function expectOk() {
  await page.waitForSelector('#flash-ok, #flash-error');
  if (await page.$('#flash-error')) throw new Error('the page reported: ' + await page.textContent('#flash-error'));
}
// Ends the steps early, without a failure.
class Done extends Error {}

async function go(hash, ready) {
  await page.evaluate((h) => { window.location.hash = h; }, hash);
  await page.waitForSelector(ready);
}

try {
  step('login page and redirect');
  await page.goto(url + '/');
  await page.waitForURL(/\/login$/);
  await shot('login');
  expectRefusal = true;
  await page.fill('#password', 'not-the-password');
  await page.click('#login-button');
  await page.waitForSelector('#login-error:not(:empty)');
  expectRefusal = false;
  await page.fill('#password', password);
  await page.click('#login-button');
  await page.waitForSelector('#tps-in');
  await page.waitForSelector('main table tbody tr');
  await shot('overview');

  step('topics: create ' + CREATED);
  await go('#/topics', '#create-topic');
  await page.fill('#create-topic input[name=topic]', CREATED);
  await page.fill('#create-topic input[name=queues]', '4');
  await page.click('#create-topic button[type=submit]');
  await expectOk();
  await page.waitForSelector('text=' + CREATED);
  await shot('topics');

  if (APACHE) {
    step('read pages of the other cluster');
    await go('#/topic/' + CREATED, '#send-test');
    await page.waitForSelector('main table tbody tr');
    await shot('topic');
    await go('#/groups', 'main table');
    await shot('groups');
    await go('#/messages', '#by-time');
    await page.fill('#by-time input[name=topic]', CREATED);
    await page.click('#by-time button[type=submit]');
    await page.waitForSelector('#message-results p');
    await shot('messages');
    await go('#/dlq', '#dlq-form');
    await go('#/producers', 'main form');
    await go('#/acl', 'main h2');
    throw new Done();
  }

  step('topic page: send messages with a script in body, key and property');
  await go('#/topic/ConsoleOrders', '#send-test');
  await page.fill('#send-test textarea[name=body]', XSS_BODY);
  await page.fill('#send-test input[name=keys]', XSS_KEY);
  await page.fill('#send-test input[name=pkey]', 'note');
  await page.fill('#send-test input[name=pvalue]', XSS_PROP);
  await page.click('#send-test button[type=submit]');
  await expectOk();
  await shot('topic');

  step('dead letter of console_dead (a message on its DLQ topic naming its origin)');
  await go('#/topic/' + encodeURIComponent('%DLQ%console_dead'), '#send-test');
  await page.fill('#send-test textarea[name=body]', 'dead letter body');
  await page.fill('#send-test input[name=keys]', 'dlq-key-1');
  await page.fill('#send-test input[name=pkey]', 'DLQ_ORIGIN_TOPIC');
  await page.fill('#send-test input[name=pvalue]', 'ConsoleOrders');
  await page.click('#send-test button[type=submit]');
  await expectOk();

  step('groups and reset of the offline group');
  await go('#/groups', 'main table');
  await page.waitForSelector('text=console_offline');
  await shot('groups');
  await go('#/group/console_offline', '#reset-form');
  await page.waitForSelector('#group-status');
  await page.selectOption('#reset-form select[name=topic]', 'ConsoleOrders');
  await page.fill('#reset-form input[name=when]', '2000-01-01T00:00:01');
  await page.click('#reset-form button[type=submit]');
  await expectOk();
  await shot('group');

  step('producers');
  await go('#/producers', 'main form');
  await page.fill('main form input[name=group]', 'TOOLS_PRODUCER');
  await page.fill('main form input[name=topic]', 'ConsoleOrders');
  await page.click('main form button[type=submit]');
  await page.waitForSelector('main table');
  await shot('producers');

  step('messages: the script texts show as text');
  await go('#/messages', '#by-key');
  await page.fill('#by-key input[name=topic]', 'ConsoleOrders');
  await page.fill('#by-key input[name=key]', XSS_KEY);
  let found = false;
  for (let i = 0; i < 60 && !found; i++) {
    await page.click('#by-key button[type=submit]');
    await page.waitForSelector('#message-results p');
    found = (await page.$$('#message-results .message')).length > 0;
    if (!found) await page.waitForTimeout(500);
  }
  if (!found) throw new Error('the message with the script key was not found');
  for (const text of [XSS_BODY, XSS_KEY, XSS_PROP]) {
    const visible = await page.getByText(text, { exact: true }).first().isVisible();
    if (!visible) throw new Error('not visible as text: ' + text);
  }
  if (await page.$('#message-results script, #message-results img')) throw new Error('client text became markup');
  await page.selectOption('#message-results select', 'hex');
  await page.waitForSelector('text=3c 73 63 72 69 70 74 3e');
  await page.selectOption('#message-results select', 'text');
  await shot('messages');

  step('dead letters: list and resend');
  await go('#/dlq', '#dlq-form');
  await page.fill('#dlq-form input[name=group]', 'console_dead');
  await page.click('#dlq-form button[type=submit]');
  await page.waitForSelector('#resend-all:not([disabled])');
  await page.click('#resend-all');
  await expectOk();
  await shot('dlq');

  step('ACL page (ACL is off here: it says so)');
  await go('#/acl', 'main h2');
  await shot('acl');
} catch (err) {
  if (err instanceof Done) await finish();
  problems.push('step failed: ' + err.message);
  await shot('failure').catch(() => {});
}
await finish();

async function finish() {
  await context.close();
  fs.rmSync(userDir, { recursive: true, force: true });
  if (problems.length) {
    for (const p of problems) console.error('browser: ' + p);
    process.exit(1);
  }
  console.log('browser: every page loaded, every write done, no error, no dialog');
  process.exit(0);
}
