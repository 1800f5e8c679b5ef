// The browser harness of the console suite: headless Chromium through Playwright, with every
// browser console error, uncaught page error and unexpected dialog recorded as a problem.
//
// Two things a page does on purpose are let through, each only while a step expects it:
//  - a refused request (a wrong password's 401, a broker's refusal, an outage's 5xx): Chromium
//    logs "Failed to load resource: ... status of N" for it; `expectRefusals(codes)` names the
//    statuses allowed until `expectRefusals([])`;
//  - a confirmation: `expectConfirm(pattern, accept)` says the next dialog must be a confirm
//    whose text matches `pattern`, and whether to accept it.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR, 'node_modules', 'x.js'));
const { chromium } = require('playwright-core');

export const STEP_TIMEOUT = 30000;

export async function launch(prefix) {
  const problems = [];
  const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'comet-console-chromium-'));
  // A fresh profile directory: Playwright passes it to Chromium as --user-data-dir.
  const context = await chromium.launchPersistentContext(userDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1360, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT);
  let refusals = [];
  let confirm = null;
  const confirms = [];
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const text = msg.text();
    const status = /Failed to load resource: the server responded with a status of (\d+)/.exec(text);
    if (status && refusals.includes(Number(status[1]))) return;
    problems.push('console error: ' + text);
  });
  page.on('pageerror', (err) => problems.push('uncaught page error: ' + err.message));
  page.on('dialog', async (dialog) => {
    const expected = confirm;
    confirm = null;
    if (dialog.type() !== 'confirm' || !expected) {
      problems.push('unexpected dialog: ' + dialog.type() + ' ' + dialog.message());
      await dialog.dismiss();
      return;
    }
    confirms.push(dialog.message());
    if (!expected.pattern.test(dialog.message())) problems.push(`confirm text ${JSON.stringify(dialog.message())} does not match ${expected.pattern}`);
    if (expected.accept) await dialog.accept(); else await dialog.dismiss();
  });
  const out = process.env.OUT;
  const h = {
    page,
    problems,
    confirms,
    shot: (name) => page.screenshot({ path: path.join(out, prefix + name + '.png') }),
    step: (name) => console.log('browser: ' + name),
    expectRefusals: (codes) => { refusals = codes; },
    expectConfirm: (pattern, accept) => { confirm = { pattern, accept }; },
    // Goes to a page of the console (a hash route) and waits for `ready`.
    go: async (hash, ready) => {
      await page.evaluate((x) => { window.location.hash = x; }, hash);
      await page.waitForSelector(ready);
    },
    // Waits for the flash of the last action; fails on an error flash.
    expectOk: async () => {
      await page.waitForSelector('#flash-ok, #flash-error');
      if (await page.$('#flash-error')) throw new Error('the page reported: ' + await page.textContent('#flash-error'));
    },
    // Polls `probe` every 250 ms until it is true; fails after `ms` (a hang guard).
    until: async (what, probe, ms = STEP_TIMEOUT) => {
      const deadline = Date.now() + ms;
      while (!(await probe())) {
        if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
        await page.waitForTimeout(250);
      }
    },
    login: async (url, user, password) => {
      await page.goto(url + '/login');
      await page.fill('#user', user);
      await page.fill('#password', password);
      await page.click('#login-button');
      await page.waitForSelector('#who:not(:empty)');
    },
    finish: async () => {
      await context.close();
      fs.rmSync(userDir, { recursive: true, force: true });
      if (problems.length) {
        for (const p of problems) console.error('browser: ' + p);
        process.exit(1);
      }
      console.log('browser: every step done, no error, no unexpected dialog');
      process.exit(0);
    },
  };
  return h;
}
