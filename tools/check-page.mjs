// check-page.mjs TARGET [flags]: opens a page (a URL, or an HTML file's
// path) in headless Chromium through playwright-core and prints one JSON
// object saying what went wrong on it and how long it took to draw:
//
//   consoleErrors, consoleWarnings, pageErrors, dialogs   what the page said
//   failedRequests, externalRequests                     what it fetched
//   charts {total, drawn, missing}                       [data-chart] boxes
//   tooltip, hoverError                                  --hover-event
//   eval, evalError                                      --eval
//   waitError, loadMs, drawMs, screenshot
//
// Requests that leave the page's origin (for a file:// page, anything but
// file:, data: and blob:) are recorded and aborted, never sent. Dialogs
// (alert, confirm, prompt) are recorded and dismissed. The exit status is 0
// whatever the page did, so that the caller judges; it is 1 when the
// harness itself fails (bad flags, no browser, a page that cannot be
// opened) and 2 for bad usage. docs/web.md says how to run it by hand.
import { chromium } from 'playwright-core';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const usage = `usage: node check-page.mjs URL|FILE [flags]
  --screenshot FILE   save a PNG of the page after it has drawn
  --full-page         the screenshot covers the whole page, not the viewport
  --hover-event N     hover event N of the page's timeline and record its tooltip
  --wait-for EXPR     JavaScript expression that is true once the page has drawn
  --eval EXPR         JavaScript expression evaluated after the wait (awaited); its value is printed
  --timeout MS        how long to wait for the page, in ms (default 30000)
  --viewport WxH      window size in CSS pixels (default 1280x800)
  --dpr N             device pixel ratio (default 1)
Environment: CHROMIUM names the browser (default /usr/bin/chromium).`;

// Fail is the harness's own failure, as opposed to the page's.
class Fail extends Error {}

function die(code, msg) {
  process.stderr.write('check-page: ' + msg + '\n');
  process.exit(code);
}

let args;
try {
  args = parseArgs({
    allowPositionals: true,
    options: {
      screenshot: { type: 'string' },
      'full-page': { type: 'boolean', default: false },
      'hover-event': { type: 'string' },
      'wait-for': { type: 'string' },
      eval: { type: 'string' },
      timeout: { type: 'string', default: '30000' },
      viewport: { type: 'string', default: '1280x800' },
      dpr: { type: 'string', default: '1' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
} catch (err) {
  die(2, err.message + '\n' + usage);
}
const opt = args.values;
if (opt.help) {
  process.stdout.write(usage + '\n');
  process.exit(0);
}
if (args.positionals.length !== 1) die(2, 'want one URL or file\n' + usage);
const timeout = Number(opt.timeout);
if (!(timeout > 0)) die(2, `--timeout ${opt.timeout}: want a positive number of ms`);
const vp = /^(\d+)x(\d+)$/.exec(opt.viewport);
if (!vp) die(2, `--viewport ${opt.viewport}: want WIDTHxHEIGHT`);
const dpr = Number(opt.dpr);
if (!(dpr > 0)) die(2, `--dpr ${opt.dpr}: want a positive number`);
let hoverEvent = -1;
if (opt['hover-event'] !== undefined) {
  hoverEvent = Number(opt['hover-event']);
  if (!Number.isInteger(hoverEvent)) die(2, `--hover-event ${opt['hover-event']}: want an event index`);
}

// A target with a scheme is a URL; anything else is a file.
const target = args.positionals[0];
let pageURL;
if (/^[a-z][a-z0-9+.-]+:/i.test(target)) {
  pageURL = new URL(target);
} else {
  if (!existsSync(target)) die(1, `${target}: no such file`);
  pageURL = pathToFileURL(resolve(target));
}

const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(executablePath)) die(1, `no Chromium at ${executablePath} (install Debian's chromium, or set CHROMIUM)`);

// Nothing the harness does may outlive it: a last-resort timer.
const guard = setTimeout(() => die(1, `gave up after ${2 * timeout + 90000} ms`), 2 * timeout + 90000);
guard.unref();

const local = new Set(['data:', 'blob:', 'about:']);
function isExternal(u) {
  let url;
  try {
    url = new URL(u);
  } catch {
    return false;
  }
  if (local.has(url.protocol)) return false;
  if (pageURL.protocol === 'file:') return url.protocol !== 'file:';
  return url.origin !== pageURL.origin;
}

const result = {
  target: pageURL.href,
  consoleErrors: [],
  consoleWarnings: [],
  pageErrors: [],
  dialogs: [],
  failedRequests: [],
  externalRequests: [],
  charts: { total: 0, drawn: 0, missing: [] },
  tooltip: null,
  hoverError: null,
  eval: null,
  evalError: null,
  waitError: null,
  loadMs: null,
  drawMs: null,
  screenshot: null,
};

const frames = 'new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const userDataDir = mkdtempSync(join(tmpdir(), 'commprof-chromium-'));
let context;
let failure = null;
try {
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      viewport: { width: Number(vp[1]), height: Number(vp[2]) },
      deviceScaleFactor: dpr,
      timeout: 60000,
    });
  } catch (err) {
    throw new Fail(`starting ${executablePath}: ${err.message}`);
  }
  // A page of our own: the persistent context's first page may still be
  // finishing its own start-up navigation, which would replace the page
  // under test (seen as "Execution context was destroyed" now and then).
  const page = await context.newPage();
  for (const p of context.pages()) {
    if (p !== page) await p.close().catch(() => {});
  }

  const aborted = new Set();
  await context.route('**/*', (route) => {
    const req = route.request();
    if (isExternal(req.url())) {
      aborted.add(req);
      return route.abort('blockedbyclient');
    }
    return route.continue();
  });
  page.on('request', (req) => {
    if (isExternal(req.url())) result.externalRequests.push(`${req.method()} ${req.url()}`);
  });
  page.on('websocket', (ws) => {
    if (isExternal(ws.url())) result.externalRequests.push(`WEBSOCKET ${ws.url()}`);
  });
  page.on('requestfailed', (req) => {
    if (!aborted.has(req)) result.failedRequests.push(`${req.method()} ${req.url()}: ${req.failure()?.errorText ?? 'failed'}`);
  });
  page.on('response', (res) => {
    if (res.status() >= 400) result.failedRequests.push(`${res.request().method()} ${res.url()}: HTTP ${res.status()}`);
  });
  page.on('console', (msg) => {
    const where = msg.location();
    const at = where && where.url ? ` (${where.url.length > 200 ? where.url.slice(0, 200) + '…' : where.url}:${where.lineNumber + 1})` : '';
    if (msg.type() === 'error') result.consoleErrors.push(msg.text() + at);
    else if (msg.type() === 'warning') result.consoleWarnings.push(msg.text() + at);
  });
  page.on('pageerror', (err) => {
    result.pageErrors.push(String(err.stack || err.message || err).split('\n').slice(0, 3).join('\n'));
  });
  page.on('dialog', async (d) => {
    result.dialogs.push(`${d.type()}: ${d.message()}`);
    await d.dismiss().catch(() => {});
  });

  try {
    await page.goto(pageURL.href, { waitUntil: 'load', timeout });
  } catch (err) {
    if (err.name !== 'TimeoutError') throw new Fail(`opening ${pageURL.href}: ${err.message.split('\n')[0]}`);
    result.waitError = `the page did not load in ${timeout} ms`;
  }
  result.loadMs = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    return nav && nav.loadEventEnd > 0 ? Math.round(nav.loadEventEnd * 10) / 10 : null;
  });

  // Wait until the page has drawn: the caller's condition, or two frames
  // after load. The time is the page's clock since navigation started.
  if (!result.waitError) {
    if (opt['wait-for']) {
      const probe = `(() => { try { return [!!(${opt['wait-for']}), performance.now(), null]; } catch (e) { return [false, performance.now(), String(e)]; } })()`;
      const deadline = Date.now() + timeout;
      let last = null;
      for (;;) {
        let ok;
        let at;
        try {
          [ok, at, last] = await page.evaluate(probe);
        } catch (err) {
          throw new Fail(`--wait-for ${opt['wait-for']}: ${err.message.split('\n')[0]}`);
        }
        if (ok) {
          result.drawMs = Math.round(at * 10) / 10;
          break;
        }
        if (Date.now() > deadline) {
          result.waitError = `--wait-for ${opt['wait-for']} was not true after ${timeout} ms` + (last ? ` (last error: ${last})` : '');
          break;
        }
        await sleep(20);
      }
    } else {
      result.drawMs = Math.round((await page.evaluate(frames)) * 10) / 10;
    }
  }

  // Every [data-chart] box must hold a canvas with something on it, or an
  // svg with something in it.
  result.charts = await page.evaluate(() => {
    const out = { total: 0, drawn: 0, missing: [] };
    document.querySelectorAll('[data-chart]').forEach((box, i) => {
      out.total++;
      let drawn = false;
      for (const c of box.querySelectorAll('canvas')) {
        if (!c.width || !c.height) continue;
        const probe = document.createElement('canvas');
        probe.width = 64;
        probe.height = 64;
        const pctx = probe.getContext('2d', { willReadFrequently: true });
        try {
          pctx.drawImage(c, 0, 0, 64, 64);
          const px = pctx.getImageData(0, 0, 64, 64).data;
          for (let j = 3; j < px.length && !drawn; j += 4) drawn = px[j] > 0;
        } catch {
          drawn = true; // a tainted canvas has content the page cannot read
        }
        if (drawn) break;
      }
      if (!drawn) {
        for (const s of box.querySelectorAll('svg')) {
          const r = s.getBoundingClientRect();
          if (r.width > 0 && r.height > 0 && s.querySelector('path, rect, circle, line, polyline, polygon, text')) {
            drawn = true;
            break;
          }
        }
      }
      if (drawn) out.drawn++;
      else out.missing.push(box.id || box.getAttribute('data-chart') || `#${i}`);
    });
    return out;
  });

  if (opt.eval !== undefined) {
    try {
      const v = await page.evaluate(opt.eval);
      result.eval = v === undefined ? null : v;
    } catch (err) {
      result.evalError = err.message.split('\n')[0];
    }
    await page.evaluate(frames);
  }

  if (hoverEvent >= 0) {
    const pos = await page.evaluate((i) => {
      const box = document.querySelector('[data-commprof-timeline]');
      const tl = box && box.commprofTimeline;
      if (!tl) return { error: 'no timeline on the page (no element with data-commprof-timeline and its commprofTimeline hook)' };
      if (!tl.ready) return { error: 'the timeline is not ready' };
      box.scrollIntoView({ block: 'center' });
      let p = tl.screenPositionOf(i);
      if (!p && tl.reveal) {
        tl.reveal(i);
        p = tl.screenPositionOf(i);
      }
      return p ? { x: p.x, y: p.y } : { error: `event ${i} cannot be shown` };
    }, hoverEvent);
    if (pos.error) {
      result.hoverError = pos.error;
    } else {
      await page.mouse.move(1, 1);
      await page.mouse.move(pos.x, pos.y, { steps: 2 });
      const deadline = Date.now() + Math.min(timeout, 5000);
      for (;;) {
        const text = await page.evaluate(() => document.querySelector('[data-commprof-timeline]').commprofTimeline.tooltipText());
        if (text) {
          result.tooltip = text;
          break;
        }
        if (Date.now() > deadline) {
          result.hoverError = `no tooltip at (${Math.round(pos.x)}, ${Math.round(pos.y)}) for event ${hoverEvent}`;
          break;
        }
        await sleep(20);
      }
      await page.evaluate(frames);
    }
  }

  if (opt.screenshot) {
    const file = resolve(opt.screenshot);
    mkdirSync(dirname(file), { recursive: true });
    await page.screenshot({ path: file, fullPage: opt['full-page'], timeout });
    result.screenshot = file;
  }
} catch (err) {
  failure = err instanceof Fail ? err.message : err.stack || String(err);
} finally {
  if (context) await context.close().catch(() => {});
  rmSync(userDataDir, { recursive: true, force: true });
}
if (failure) die(1, failure);
process.stdout.write(JSON.stringify(result, null, 1) + '\n');
