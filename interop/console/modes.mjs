// The console suite's other runs (see browser.mjs): the read-only account, the outage of a
// `comet cluster`, and Apache RocketMQ through `comet console -n`.

// Controls that change the cluster; the read-only account must see none of them.
const WRITE_CONTROLS = ['#create-topic', '#send-test', '#delete-topic', '#reset-form', '#skip-backlog',
  '#delete-group', '#resend-all', '.resend-one', '#config-form'];
const WRITE_LABELS = ['Create / update', 'Send test message', 'Delete topic', 'Reset to time', 'Skip backlog',
  'Delete group', 'Resend all listed', 'Resend', 'Apply'];

// Every page, with what shows that it loaded.
const PAGES = [
  ['#/overview', '#broker-table tbody tr'],
  ['#/brokers', 'main table tbody tr'],
  ['#/topics', '#topic-list'],
  ['#/topic/ConsoleOrders', '#topic-chart'],
  ['#/groups', '#group-list'],
  ['#/group/console_offline', '#group-status'],
  ['#/producers', '#producers-online table'],
  ['#/messages', '#by-time'],
  ['#/trace', '#trace-form'],
  ['#/dlq/console_dead', '#dlq-results table'],
  ['#/acl', 'main h2'],
];

// Waits until the router marks the page at `hash` as built.
async function settle(page, hash) {
  await page.evaluate((x) => { window.location.hash = x; }, hash);
  const name = hash.split('/')[1];
  await page.waitForSelector(`main[data-ready="${name}"]`);
}

export async function readOnlyVisit(h, url, viewerPassword) {
  const { page } = h;
  h.step('the read-only account: every page, no write control');
  await page.click('#logout');
  await page.waitForURL(/\/login$/);
  await h.login(url, 'viewer', viewerPassword);
  if (!(await page.textContent('#who')).includes('read-only')) throw new Error('the page does not say read-only');
  const broker = ['#/broker/' + encodeURIComponent(process.env.BROKER_ADDR), '#broker-config'];
  for (const [hash, ready] of [...PAGES, broker]) {
    await settle(page, hash);
    await page.waitForSelector(ready);
    for (const selector of WRITE_CONTROLS) {
      if (await page.$(selector)) throw new Error(`the read-only account sees ${selector} on ${hash}`);
    }
    for (const label of (await page.$$eval('main button', (bs) => bs.map((b) => b.textContent.trim())))) {
      if (WRITE_LABELS.includes(label)) throw new Error(`the read-only account sees the button "${label}" on ${hash}`);
    }
    if (hash === '#/group/console_offline') await h.shot('read-only');
  }
}

export async function outage(h, url, password) {
  const { page } = h;
  h.step('the cluster\'s console: log in with the printed password');
  await h.login(url, 'admin', password);
  for (const broker of ['broker-a/0', 'broker-a/1', 'broker-b/0', 'broker-b/1']) {
    await page.waitForSelector('#broker-table tbody tr >> text=' + broker);
  }
  await settle(page, '#/brokers');
  await page.waitForSelector('main table tbody tr >> nth=3');
  await h.shot('brokers');
  await settle(page, '#/overview');
  await page.waitForSelector('#broker-table tbody tr >> nth=3');

  h.step('broker-a-0 dies: the console, in the cluster\'s process, keeps answering');
  process.kill(Number(process.env.BROKER_PID), 'SIGKILL');
  await page.waitForSelector('#broker-table >> text=broker-a/0', { state: 'detached' });
  await page.waitForSelector('#broker-table >> text=broker-b/0');
  if (await page.isVisible('#status')) throw new Error('a banner while the name server answers: ' + await page.textContent('#status'));
  await h.until('broker-b-0 taking the sends', async () => Number((await page.textContent('#tps-in')).replace(/,/g, '')) > 0);

  h.step('the name server dies: every page shows the error and the age of its data');
  h.expectRefusals([404, 422, 500, 502, 503, 504]);
  process.kill(Number(process.env.NAMESRV_PID), 'SIGKILL');
  await page.waitForSelector('#status >> text=/name servers unreachable: .* — data from \\d+ s ago/');
  if (!(await page.$('main.stale #broker-table'))) throw new Error('the overview dropped its last numbers');
  await h.until('the data to age', async () => /data from ([3-9]|\d\d+) s ago/.test(await page.textContent('#status')));
  await h.shot('outage');
  for (const [hash] of PAGES.slice(1)) {
    await settle(page, hash);
    await page.waitForSelector('#status >> text=/name servers unreachable: .* — (data from|no data on this page; the name servers last answered) /');
  }
}

export async function apache(h, url, password) {
  const { page } = h;
  h.step('Apache RocketMQ: overview, brokers, a topic, the read pages');
  await h.login(url, 'admin', password);
  // The broker registers with its name server a moment after it starts; the overview refreshes
  // every 5 s until it shows.
  await page.waitForSelector('#broker-table a[href^="#/broker/"]', { timeout: 90000 });
  await h.shot('overview');
  await settle(page, '#/topics');
  await page.fill('#create-topic input[name=topic]', 'ConsoleApacheCreated');
  await page.fill('#create-topic input[name=queues]', '4');
  await page.click('#create-topic button[type=submit]');
  await h.expectOk();
  await page.waitForSelector('#topic-list >> text=ConsoleApacheCreated');
  await h.shot('topics');
  await settle(page, '#/topic/ConsoleApacheCreated');
  await page.waitForSelector('main table >> text=RW-');
  await h.shot('topic');
  await settle(page, '#/brokers');
  const addr = await page.$eval('main table tbody tr td:nth-child(4)', (td) => td.textContent);
  await settle(page, '#/broker/' + encodeURIComponent(addr));
  await page.waitForSelector('#broker-config >> text=brokerClusterName');
  await page.waitForSelector('#broker-runtime >> text=putTps');
  await h.shot('broker');
  await settle(page, '#/groups');
  await h.shot('groups');
  await settle(page, '#/messages');
  await page.selectOption('#by-time select[name=topic]', 'ConsoleApacheCreated');
  await page.click('#by-time button[type=submit]');
  await page.waitForSelector('#message-results p');
  await h.shot('messages');
  for (const hash of ['#/producers', '#/dlq', '#/trace', '#/acl']) await settle(page, hash);
}
