// Drives the console in headless Chromium (see harness.mjs for what counts as a failure).
//
//   MODE=serve (default): against `comet serve`: every page, every write, the script texts
//     shown as text, the confirmations, the message trace, a broker setting, then the read-only
//     account (no write control anywhere).
//   MODE=outage: against `comet cluster`'s console: the broker dies (the console keeps
//     answering), then the name server (every page shows the error and the age of its data).
//   MODE=apache: against `comet console -n <Apache's name server>`: the read pages and a topic.
//
//   node browser.mjs   (env: CONSOLE_URL, CONSOLE_PASSWORD, VIEWER_PASSWORD, TRACED_ID,
//                       BROKER_ADDR, BROKER_PID, NAMESRV_PID, OUT, PLAYWRIGHT_DIR, CHROMIUM)
import { launch } from './harness.mjs';
import { readOnlyVisit, outage, apache } from './modes.mjs';

const url = process.env.CONSOLE_URL;
const password = process.env.CONSOLE_PASSWORD;
const MODE = process.env.MODE || 'serve';
const XSS_BODY = '<script>alert(1)</script>';
const XSS_KEY = '<script>alert(2)</script>';
const XSS_PROP = '<img src=x onerror=alert(3)>';

const h = await launch(MODE === 'apache' ? 'apache-' : '');
const { page } = h;

async function loginPage() {
  h.step('login page and redirect');
  await page.goto(url + '/');
  await page.waitForURL(/\/login$/);
  await h.shot('login');
  h.expectRefusals([401]);
  await page.fill('#password', 'not-the-password');
  await page.click('#login-button');
  await page.waitForSelector('#login-error:not(:empty)');
  h.expectRefusals([]);
  await page.fill('#password', password);
  await page.click('#login-button');
  await page.waitForSelector('#tps-in');
}

// The points of the first line of the chart in `box` (its path's move and line commands).
async function chartPoints(box) {
  const d = await page.$eval(box + ' svg path.series', (p) => p.getAttribute('d')).catch(() => '');
  return (d.match(/[ML]/g) || []).length;
}

// Opens the pages whose charts the later screenshots show, so the console samples their topic
// and group from now on.
async function warmUp() {
  h.step('charts: the console starts sampling ConsoleLoad and console_load');
  await h.go('#/topic/ConsoleLoad', '#topic-chart');
  await h.go('#/group/console_load', '#lag-chart');
}

// The overview with its charts drawn.
async function overview() {
  h.step('overview with its charts');
  await h.go('#/overview', '#broker-table tbody tr');
  await h.until('points on the rate charts', async () => (await chartPoints('#tps-chart')) >= 20
    && (await chartPoints('#broker-chart')) >= 20);
  await h.shot('overview');
}

async function topics() {
  h.step('topics: create ConsoleCreated; system topics hidden until asked for');
  await h.go('#/topics', '#create-topic');
  await page.fill('#create-topic input[name=topic]', 'ConsoleCreated');
  await page.fill('#create-topic input[name=queues]', '4');
  await page.click('#create-topic button[type=submit]');
  await h.expectOk();
  await page.waitForSelector('#topic-list >> text=ConsoleCreated');
  if (await page.$('#topic-list >> text=TBW102')) throw new Error('a system topic is listed by default');
  await page.check('main input[name=system]');
  await page.waitForSelector('#topic-list >> text=TBW102');
  await page.uncheck('main input[name=system]');
  await page.waitForSelector('#topic-list >> text=TBW102', { state: 'detached' });
  await h.shot('topics');
}

async function sendTest(topic, body, key, pkey, pvalue) {
  await h.go('#/topic/' + encodeURIComponent(topic), '#send-test');
  await page.fill('#send-test textarea[name=body]', body);
  await page.fill('#send-test input[name=keys]', key);
  await page.fill('#send-test input[name=pkey]', pkey);
  await page.fill('#send-test input[name=pvalue]', pvalue);
  await page.click('#send-test button[type=submit]');
  await h.expectOk();
}

async function topicPages() {
  h.step('topic page: messages with a script in body, key and property');
  await sendTest('ConsoleOrders', XSS_BODY, XSS_KEY, 'note', XSS_PROP);
  await h.go('#/topic/ConsoleLoad', '#topic-chart');
  await h.until('points on the topic chart', async () => (await chartPoints('#topic-chart')) >= 10);
  await page.waitForSelector('main table >> text=RW-');
  await h.shot('topic');
  h.step('dead letter of console_dead (a message on its DLQ topic naming its origin)');
  await sendTest('%DLQ%console_dead', 'dead letter body', 'dlq-key-1', 'DLQ_ORIGIN_TOPIC', 'ConsoleOrders');
}

async function groups() {
  h.step('groups; reset of the offline group; confirmations');
  await h.go('#/groups', '#group-list');
  await page.waitForSelector('#group-list >> text=console_offline');
  await h.shot('groups');
  await h.go('#/group/console_offline', '#reset-form');
  await page.waitForSelector('#group-status');
  await page.selectOption('#reset-form select[name=topic]', 'ConsoleOrders');
  // Refused: nothing happens.
  h.expectConfirm(/Skip the backlog of group console_offline on topic ConsoleOrders\?.*never consumed/, false);
  await page.click('#skip-backlog');
  await page.fill('#reset-form input[name=when]', '2000-01-01T00:00:01');
  h.expectConfirm(/Reset the offsets of group console_offline on topic ConsoleOrders to 2000-01-01 00:00:01 UTC\?/, true);
  await page.click('#reset-form button[type=submit]');
  await h.expectOk();
  if (h.confirms.length !== 2) throw new Error('expected two confirmations, saw ' + JSON.stringify(h.confirms));
  await h.go('#/group/console_load', '#lag-chart');
  await page.waitForSelector('#group-status >> text=online');
  await h.until('points on the group charts', async () => (await chartPoints('#lag-chart')) >= 10
    && (await chartPoints('#consume-chart')) >= 10);
  await h.shot('group');
}

async function producers() {
  h.step('producers: pickers, connections, producers online');
  await h.go('#/producers', '#producer-form');
  await page.waitForSelector('#producers-online >> text=console_load_producer');
  await page.selectOption('#producer-form select[name=topic]', 'ConsoleLoad');
  await page.selectOption('#producer-form select[name=group]', 'console_load_producer');
  await page.click('#producer-form button[type=submit]');
  await page.waitForSelector('#producer-connections table tbody tr td >> text=/V5_/');
  await h.shot('producers');
}

async function messages() {
  h.step('messages: the script texts show as text; the compact list');
  await h.go('#/messages', '#by-key');
  await page.waitForSelector('#by-key select[name=topic] option[value=ConsoleOrders]', { state: 'attached' });
  await page.selectOption('#by-key select[name=topic]', 'ConsoleOrders');
  await page.fill('#by-key input[name=key]', XSS_KEY);
  await h.until('the message with the script key', async () => {
    await page.click('#by-key button[type=submit]');
    await page.waitForSelector('#message-results p');
    return (await page.$$('#message-results tr.message')).length > 0;
  });
  await page.click('#message-results tr.message');
  for (const text of [XSS_BODY, XSS_KEY, XSS_PROP]) {
    const visible = await page.getByText(text, { exact: true }).first().isVisible();
    if (!visible) throw new Error('not visible as text: ' + text);
  }
  if (await page.$('#message-results script, #message-results img')) throw new Error('client text became markup');
  await page.selectOption('#message-results .message-detail select', 'hex');
  await page.waitForSelector('text=3c 73 63 72 69 70 74 3e');
  await page.selectOption('#by-time select[name=topic]', 'ConsoleOrders');
  await page.click('#by-time button[type=submit]');
  await page.waitForSelector('#message-results tr.message >> nth=23');
  await h.shot('messages');
  await page.click('#message-results tr.message >> nth=1');
  await page.waitForSelector('#message-results .message-detail');
  await h.shot('message');
}

async function trace() {
  h.step('message trace of a traced message');
  await h.go('#/trace', '#trace-form');
  await page.fill('#trace-form input[name=id]', process.env.TRACED_ID);
  await page.click('#trace-form button[type=submit]');
  await page.waitForSelector('#trace-timeline svg rect.bar.send');
  await page.waitForSelector('#trace-timeline svg rect.bar.consume');
  await page.waitForSelector('#trace-table >> text=SubAfter');
  await page.waitForSelector('#trace-results >> text=console_traced');
  await h.shot('trace');
}

async function deadLetters() {
  h.step('dead letters: picker, list, resend after a confirmation');
  await h.go('#/dlq', '#dlq-form');
  await page.waitForSelector('#dlq-form select[name=group] option[value=console_dead]', { state: 'attached' });
  await page.selectOption('#dlq-form select[name=group]', 'console_dead');
  await page.click('#dlq-form button[type=submit]');
  await page.waitForSelector('#resend-all:not([disabled])');
  h.expectConfirm(/Re-send all 1 listed dead letter\(s\) of group console_dead to their original topics\?/, true);
  await page.click('#resend-all');
  await h.expectOk();
  await h.shot('dlq');
  await h.go('#/acl', 'main h2');
  await h.shot('acl');
}

async function brokerSettings() {
  h.step('broker page: a refused key shows the broker\'s words; brokerPermission=4 is applied');
  await h.go('#/broker/' + encodeURIComponent(process.env.BROKER_ADDR), '#config-form');
  await page.waitForSelector('#broker-config >> text=brokerPermission');
  await page.fill('#config-form input[name=key]', 'rocketmqHome');
  await page.fill('#config-form input[name=value]', '/tmp/elsewhere');
  h.expectConfirm(/Change rocketmqHome to "\/tmp\/elsewhere" on broker/, true);
  h.expectRefusals([422]);
  await page.click('#config-form button[type=submit]');
  await page.waitForSelector('#flash-error >> text=/black list/');
  h.expectRefusals([]);
  await page.fill('#config-form input[name=key]', 'brokerPermission');
  await page.fill('#config-form input[name=value]', '4');
  h.expectConfirm(/Change brokerPermission from "6" to "4" on broker/, true);
  await page.click('#config-form button[type=submit]');
  await page.waitForSelector('#flash-ok >> text=/now reads 4/');
  await page.waitForSelector('#broker-tps-chart svg');
  await h.shot('broker');
}

try {
  if (MODE === 'outage') {
    await outage(h, url, password);
  } else if (MODE === 'apache') {
    await apache(h, url, password);
  } else {
    await loginPage();
    await warmUp();
    await topics();
    await topicPages();
    await groups();
    await producers();
    await messages();
    await trace();
    await deadLetters();
    await overview();
    await brokerSettings();
    await readOnlyVisit(h, url, process.env.VIEWER_PASSWORD);
  }
} catch (err) {
  h.problems.push('step failed: ' + err.message);
  await h.shot('failure').catch(() => {});
}
await h.finish();
