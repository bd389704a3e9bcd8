// check.js -- drive headless Chromium over an `attnlab report --interactive`
// page with real mouse events and check what the explorers show.
//
//   node tests/browser/check.js SPEC.json
//
// SPEC (written by tests/test_viewer.c, values from sqlite3, `attnlab run
// --json` and the test's own forward pass):
//   page        absolute path of index.html
//   screenshot  where to write a PNG of the explorers
//   title       the document title the page must keep
//   attention   [{model, l, h, t, to: [[s, "0.1234"]...], from: [[u, "0.1234"]...]}]
//               click thumbnail l.h of model, check the enlarged head,
//               hover token t, compare the rows of "attends to" / "attended by"
//   loss        [{model, t, p, loss, top: [[token, "0.1234"]...]}]
//   heatmaps    [{model, title_has, row, col, col_prefix?, v_db, v2_db?, se_db?}]: hover that
//               cell (col_prefix: the column label is col, a space and more,
//               e.g. "pos 3" and the token there); the
//               value shown must be the database's (v_db, as sqlite3 printed
//               it with 17 digits) to 6 significant digits, as the page shows
//   sae         [{model, run, sort?, order?, click?, ctx?, up?, heads?}]: in the features
//               browser of that run, click the sort button (density | induction |
//               head) and compare the list's features in order; click feature `click`
//               and compare its dashboard: ctx [[i, token, v_db]] (row i of the top
//               contexts), up [[i, token, v_db]] (row i of the raised tokens), heads
//               [[head, v_db]] (its DFA share), values to 6 significant digits
//   images      true: every <img> of the static page loaded (under the CSP)
//   scripts     how many executable (untyped) <script> elements the page has
//   texts       strings that must be on the page as visible text
//   absent      CSS selectors that must match nothing (injected elements)
// Always: no console error, no page error, no dialog, no request outside
// the page's folder (file://), the viewer initialised.
// Prints {"ok": bool, "failures": [...], "requests": n} and exits 0 when ok.
'use strict';
const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');

const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const fails = [];
function fail(msg) { fails.push(msg); }

async function centre(page, handle, what) {
  if (!handle) { fail(what + ': not on the page'); return null; }
  await handle.evaluate((e) => e.scrollIntoView({block: 'center', inline: 'center'}));
  const b = await handle.boundingBox();
  if (!b || b.width < 1 || b.height < 1) { fail(what + ': not visible'); return null; }
  return {x: b.x + b.width / 2, y: b.y + b.height / 2};
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath: spec.chromium || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--hide-scrollbars'],
  });
  let nreq = 0;
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1200, height: 900});
    const dir = 'file://' + path.dirname(spec.page) + '/';
    page.on('console', (m) => { if (m.type() === 'error') fail('console error: ' + m.text()); });
    page.on('pageerror', (err) => fail('page error: ' + err.message));
    page.on('dialog', async (d) => { fail('dialog opened: ' + d.message()); await d.dismiss(); });
    page.on('request', (r) => {
      nreq++;
      if (!r.url().startsWith(dir)) fail('request outside the folder: ' + r.url());
    });
    page.on('requestfailed', (r) => fail('request failed: ' + r.url()));
    await page.goto('file://' + spec.page, {waitUntil: 'load'});
    try {
      await page.waitForSelector('html[data-al-viewer="ready"]', {timeout: 15000});
    } catch (e) {
      fail('the viewer did not initialise');
    }
    const title = await page.title();
    if (spec.title !== undefined && title !== spec.title)
      fail('title ' + JSON.stringify(title) + ', want ' + JSON.stringify(spec.title));

    for (const a of spec.attention || []) {
      const x = '#al-x-' + a.model;
      const th = await page.$(`${x} .al-thumb[data-l="${a.l}"][data-h="${a.h}"]`);
      const c = await centre(page, th, `thumbnail ${a.l}.${a.h}`);
      if (!c) continue;
      await page.mouse.click(c.x, c.y);
      const big = await page.$eval(`${x} .al-big`, (b) => ({
        l: b.getAttribute('data-l'), h: b.getAttribute('data-h'),
        title: (b.querySelector('.al-big-title') || {}).textContent,
        sel: Array.from(b.parentNode.querySelectorAll('.al-thumb.sel')).map(
          (t) => t.getAttribute('data-l') + '.' + t.getAttribute('data-h')),
      }));
      if (big.l !== String(a.l) || big.h !== String(a.h) || big.title !== `head ${a.l}.${a.h}` ||
          big.sel.join() !== `${a.l}.${a.h}`)
        fail(`after clicking thumbnail ${a.l}.${a.h} the enlarged view shows ${JSON.stringify(big)}`);
      const tok = await page.$(`${x} .al-big .al-strip .al-tok[data-t="${a.t}"]`);
      const tc = await centre(page, tok, `token ${a.t}`);
      if (!tc) continue;
      await page.mouse.move(tc.x, tc.y);
      const shown = await page.$eval(`${x} .al-big`, (b) => {
        const rows = (sel) => Array.from(b.querySelectorAll(sel + ' tbody tr')).map(
          (r) => Array.from(r.cells).map((td) => td.textContent));
        return {to: rows('.al-to'), from: rows('.al-from')};
      });
      for (const [key, want] of [['to', a.to], ['from', a.from]]) {
        const got = new Map(shown[key].map((r) => [r[0], r[2]]));
        for (const [pos, v] of want || [])
          if (got.get(String(pos)) !== v)
            fail(`head ${a.l}.${a.h} token ${a.t} ${key} ${pos}: shows ${got.get(String(pos))}, want ${v}`);
      }
    }

    for (const w of spec.loss || []) {
      const x = '#al-x-' + w.model;
      const tok = await page.$(`${x} .al-lossstrip .al-tok[data-t="${w.t}"]`);
      const c = await centre(page, tok, `loss token ${w.t}`);
      if (!c) continue;
      await page.mouse.move(c.x, c.y);
      const got = await page.$eval(`${x} .al-lossinfo`, (i) => ({
        p: (i.querySelector('.al-p') || {}).textContent,
        loss: (i.querySelector('.al-loss') || {}).textContent,
        top: Array.from(i.querySelectorAll('.al-top tbody tr')).map(
          (r) => [r.cells[1].textContent, r.cells[2].textContent]),
      }));
      if (got.p !== w.p || got.loss !== w.loss || JSON.stringify(got.top) !== JSON.stringify(w.top))
        fail(`loss token ${w.t}: shows ${JSON.stringify(got)}, want ${JSON.stringify(w)}`);
    }

    for (const w of spec.heatmaps || []) {
      const x = '#al-x-' + w.model;
      const cell = await page.evaluateHandle((x, w) => {
        const hm = Array.from(document.querySelectorAll(x + ' .al-hm')).find(
          (h) => h.getAttribute('data-title').includes(w.title_has));
        if (!hm) return null;
        const r = Array.from(hm.querySelectorAll('.al-rl')).findIndex((e) => e.textContent === w.row);
        const c = Array.from(hm.querySelectorAll('.al-cl')).findIndex((e) => w.col_prefix ?
          e.textContent.startsWith(w.col + ' ') : e.textContent === w.col);
        return hm.querySelector(`.al-cell[data-r="${r}"][data-c="${c}"]`);
      }, x, w);
      const el = cell.asElement();
      const c = await centre(page, el, `heatmap "${w.title_has}" cell ${w.row} / ${w.col}`);
      if (!c) continue;
      await page.mouse.move(c.x, c.y);
      const got = await el.evaluate((e) => {
        const i = e.closest('.al-hm').querySelector('.al-info');
        const t = (s) => (i.querySelector(s) || {}).textContent;
        return {row: t('.al-row'), col: t('.al-col'), v: t('.al-val'), v2: t('.al-v2'),
                ci: t('.al-ci')};
      });
      const want = Number(w.v_db).toPrecision(6);
      const want2 = w.v2_db === undefined ? undefined : Number(w.v2_db).toPrecision(6);
      const colOk = w.col_prefix ? (got.col || '').startsWith(w.col + ' ') && got.col.length > w.col.length + 1
                                 : got.col === w.col;
      if (got.row !== w.row || !colOk || got.v !== want ||
          (want2 !== undefined && got.v2 !== want2) ||
          (w.se_db !== undefined && !(got.ci || '').startsWith(' \u00b1 ' + Number(w.se_db).toPrecision(6) + ' [')))
        fail(`heatmap "${w.title_has}" ${w.row} / ${w.col}: shows ${JSON.stringify(got)}, want ` +
             JSON.stringify(w));
    }

    for (const w of spec.sae || []) {
      const x = `#al-x-${w.model} .al-sae[data-run="${w.run}"]`;
      if (w.sort) {
        const b = await page.$(`${x} .al-sae-sort button[data-sort="${w.sort}"]`);
        const c = await centre(page, b, `features sort ${w.sort}`);
        if (c) await page.mouse.click(c.x, c.y);
      }
      if (w.order) {
        const got = await page.$$eval(`${x} .al-sae-list tbody tr`,
          (l) => l.map((r) => r.getAttribute('data-f')));
        if (got.join() !== w.order.join())
          fail(`features sorted by ${w.sort}: ${got.join()}, want ${w.order.join()}`);
      }
      if (w.click === undefined) continue;
      const row = await page.$(`${x} .al-sae-list tbody tr[data-f="${w.click}"]`);
      const c = await centre(page, row, `feature ${w.click} in the list`);
      if (!c) continue;
      await page.mouse.click(c.x, c.y);
      const got = await page.$eval(`${x} .al-sae-detail`, (d) => {
        const rows = (sel) => Array.from(d.querySelectorAll(sel + ' tbody tr')).map(
          (r) => Array.from(r.cells).map((td) => td.textContent));
        return {f: d.getAttribute('data-f'), title: (d.querySelector('.al-sae-title') || {}).textContent,
                sel: Array.from(d.parentNode.querySelectorAll('.al-feat.sel')).map((r) => r.getAttribute('data-f')),
                ctx: rows('.al-sae-ctx'), up: rows('.al-sae-up'), heads: rows('.al-sae-heads')};
      });
      const p6 = (v) => Number(v).toPrecision(6);
      if (got.f !== String(w.click) || got.title !== `feature ${w.click}` || got.sel.join() !== String(w.click))
        fail(`after clicking feature ${w.click}: ${JSON.stringify({f: got.f, title: got.title, sel: got.sel})}`);
      for (const [i, tok, v] of w.ctx || [])
        if (!got.ctx[i] || got.ctx[i][1] !== tok || got.ctx[i][2] !== p6(v))
          fail(`feature ${w.click} context ${i}: ${JSON.stringify(got.ctx[i])}, want ${tok} ${p6(v)}`);
      for (const [i, tok, v] of w.up || [])
        if (!got.up[i] || got.up[i][0] !== tok || got.up[i][1] !== p6(v))
          fail(`feature ${w.click} raised token ${i}: ${JSON.stringify(got.up[i])}, want ${tok} ${p6(v)}`);
      for (const [head, v] of w.heads || []) {
        const r = got.heads.find((h) => h[0] === head);
        if (!r || r[1] !== p6(v))
          fail(`feature ${w.click} head ${head}: ${JSON.stringify(r)}, want ${p6(v)}`);
      }
    }

    const body = await page.evaluate(() => document.body.innerText);
    for (const s of spec.texts || [])
      if (!body.includes(s)) fail('not shown as text: ' + JSON.stringify(s));
    for (const sel of spec.absent || []) {
      const n = await page.$$eval(sel, (l) => l.length);
      if (n) fail(`${n} element(s) match ${sel}: injected markup`);
    }
    if (spec.images) {
      const im = await page.evaluate(() => Array.from(document.images).map(
        (i) => [i.getAttribute('src'), i.complete && i.naturalWidth > 0]));
      if (!im.length) fail('the page has no pictures');
      for (const [src, ok] of im) if (!ok) fail('picture not loaded: ' + src);
    }
    if (spec.scripts !== undefined) {
      const n = await page.$$eval('script:not([type])', (l) => l.length);
      if (n !== spec.scripts) fail(`${n} executable scripts on the page, want ${spec.scripts}`);
    }
    if (spec.screenshot) {
      const x = await page.$('.al-x');
      if (x) await x.evaluate((e) => e.scrollIntoView({block: 'start'}));
      await page.screenshot({path: spec.screenshot});
    }
    // whatever the hovering did, the title is still the page's own
    if (spec.title !== undefined && (await page.title()) !== spec.title)
      fail('title changed to ' + JSON.stringify(await page.title()));
  } finally {
    await browser.close();
  }
  if (nreq === 0) fail('no request seen at all (the page itself should be one)');
  process.stdout.write(JSON.stringify({ok: fails.length === 0, failures: fails, requests: nreq}) + '\n');
  process.exit(fails.length === 0 ? 0 : 1);
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ok: false, failures: fails.concat(['crashed: ' + e.message])}) + '\n');
  process.exit(2);
});
