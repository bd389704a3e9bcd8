/* viewer.js -- the explorers of `attnlab report --interactive`
 * (include/attnlab/viewer.h). Compiled into the binary as a string and
 * inlined in the page (so it holds no script tag or comment opener of
 * HTML: test_viewer.c checks). It reads each model's data from its JSON
 * script element, id al-data-SLUG, and fills the div al-x-SLUG. Every string from the data goes into the page with
 * textContent or setAttribute, never innerHTML: token strings are data.
 * Numbers shown: attention, probabilities and losses to 4 decimals
 * (toFixed), database values to 6 significant digits (toPrecision). */
(function () {
  'use strict';

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fix4(v) { return typeof v === 'number' ? v.toFixed(4) : 'n/a'; }
  function sig6(v) { return typeof v === 'number' ? v.toPrecision(6) : 'NULL'; }

  var VIR = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function viridis(x) {
    x = Math.max(0, Math.min(1, x));
    var f = x * 4, i = Math.min(3, Math.floor(f)), t = f - i, a = VIR[i], b = VIR[i + 1];
    return 'rgb(' + Math.round(a[0] + (b[0] - a[0]) * t) + ',' + Math.round(a[1] + (b[1] - a[1]) * t) +
      ',' + Math.round(a[2] + (b[2] - a[2]) * t) + ')';
  }
  /* blue - white - red, white exactly at 0 (as the PNGs) */
  function diverging(v, m) {
    if (typeof v !== 'number') return '#d9d9d9';
    var x = m > 0 ? Math.max(-1, Math.min(1, v / m)) : 0, t = Math.abs(x);
    var c = x >= 0 ? [178, 24, 43] : [33, 102, 172];
    return 'rgb(' + Math.round(255 + (c[0] - 255) * t) + ',' + Math.round(255 + (c[1] - 255) * t) +
      ',' + Math.round(255 + (c[2] - 255) * t) + ')';
  }
  function table(cls, heads) {
    var t = el('table', cls), tr = el('tr');
    heads.forEach(function (h) { tr.appendChild(el('th', null, h)); });
    t.appendChild(el('thead')).appendChild(tr);
    t.appendChild(el('tbody'));
    return t;
  }
  function addRow(t, cells) {
    var tr = el('tr');
    cells.forEach(function (c) { tr.appendChild(el('td', null, c)); });
    t.tBodies[0].appendChild(tr);
  }

  /* A heatmap as a grid of cells. spec: rows, cols (labels), cells
   * [[r, c, value(, value2(, se, lo, hi))]], row_title, col_title, title, v2_name.
   * colour(v) gives a cell's colour. Hovering a cell writes its row,
   * column and value(s) into the line under the grid. */
  function heatmap(spec, colour) {
    var box = el('div', 'al-hm');
    box.setAttribute('data-kind', spec.kind || '');
    box.setAttribute('data-title', spec.title || '');
    box.appendChild(el('div', 'al-hm-title', spec.title));
    box.appendChild(el('div', 'meta', 'rows: ' + spec.row_title + ', columns: ' + spec.col_title));
    var nr = spec.rows.length, nc = spec.cols.length, val = {};
    spec.cells.forEach(function (c) { val[c[0] * nc + c[1]] = c; });
    var grid = el('div', 'al-grid');
    grid.style.gridTemplateColumns = 'max-content repeat(' + nc + ', 14px)';
    grid.appendChild(el('div'));
    spec.cols.forEach(function (c) { grid.appendChild(el('div', 'al-cl', c)); });
    for (var r = 0; r < nr; r++) {
      grid.appendChild(el('div', 'al-rl', spec.rows[r]));
      for (var c = 0; c < nc; c++) {
        var d = el('div', 'al-cell'), cell = val[r * nc + c];
        d.setAttribute('data-r', r);
        d.setAttribute('data-c', c);
        d.style.background = cell ? colour(cell[2]) : '#f4f4f4';
        grid.appendChild(d);
      }
    }
    var info = el('div', 'al-info', 'hover a cell');
    grid.addEventListener('mouseover', function (ev) {
      var t = ev.target, r = t.getAttribute('data-r'), c = t.getAttribute('data-c');
      if (r === null || c === null) return;
      var cell = val[r * nc + +c];
      info.textContent = '';
      info.appendChild(document.createTextNode(spec.row_title + ' '));
      info.appendChild(el('span', 'al-row', spec.rows[r]));
      info.appendChild(document.createTextNode(', ' + spec.col_title + ' '));
      info.appendChild(el('span', 'al-col', spec.cols[c]));
      info.appendChild(document.createTextNode(': '));
      info.appendChild(el('span', 'al-val', cell ? spec.fmt(cell[2]) : 'no row'));
      if (spec.v2_name && cell) {
        info.appendChild(document.createTextNode(' (' + spec.v2_name + ' '));
        info.appendChild(el('span', 'al-v2', spec.fmt(cell[3])));
        info.appendChild(document.createTextNode(')'));
      }
      if (cell && cell.length > 4 && typeof cell[4] === 'number') { /* its interval */
        var ci = ' \u00b1 ' + spec.fmt(cell[4]);
        if (typeof cell[5] === 'number' && typeof cell[6] === 'number')
          ci += ' [' + spec.fmt(cell[5]) + ', ' + spec.fmt(cell[6]) + ']';
        info.appendChild(el('span', 'al-ci', ci));
      }
    });
    box.appendChild(el('div', 'al-scroll-x')).appendChild(grid);
    box.appendChild(info);
    return box;
  }

  function signedMax(cells, k) {
    var m = 0;
    cells.forEach(function (c) { if (typeof c[k] === 'number') m = Math.max(m, Math.abs(c[k])); });
    return m;
  }

  /* ---- attention on the prompt: thumbnails, the enlarged head, tokens */
  function attention(x, P) {
    var T = P.tokens.length, L = P.n_layers, H = P.n_heads;
    function at(l, h, t, s) { return s > t ? null : P.att[l * H + h][t * (t + 1) / 2 + s]; }
    x.appendChild(el('h4', null, 'Attention on the prompt'));
    x.appendChild(el('p', 'meta', 'Every head on the prompt (' + T + ' tokens' +
      (P.cut ? ', the last ones: ' + P.cut + ' cut' : '') + '). Click a thumbnail to enlarge ' +
      'that head; hover a token to see where it attends (its row) and what attends to it (its ' +
      'column), with the attention probabilities.'));
    var thumbs = el('div', 'al-thumbs'), big = el('div', 'al-big'), cur = {l: 0, h: 0};
    var k = Math.max(1, Math.floor(72 / T));
    for (var l = 0; l < L; l++)
      for (var h = 0; h < H; h++) {
        var th = el('div', 'al-thumb'), cv = document.createElement('canvas');
        th.setAttribute('data-l', l);
        th.setAttribute('data-h', h);
        cv.width = cv.height = T * k;
        var g = cv.getContext('2d');
        for (var t = 0; t < T; t++)
          for (var s = 0; s < T; s++) {
            var v = at(l, h, t, s);
            g.fillStyle = v === null ? '#bbb' : viridis(v);
            g.fillRect(s * k, t * k, k, k);
          }
        th.appendChild(cv);
        th.appendChild(el('div', null, 'head ' + l + '.' + h));
        th.addEventListener('click', select.bind(null, l, h));
        thumbs.appendChild(th);
      }
    x.appendChild(thumbs);
    x.appendChild(big);
    function select(l, h) {
      cur = {l: l, h: h};
      Array.prototype.forEach.call(thumbs.children, function (c) {
        c.classList.toggle('sel', +c.getAttribute('data-l') === l && +c.getAttribute('data-h') === h);
      });
      big.textContent = '';
      big.setAttribute('data-l', l);
      big.setAttribute('data-h', h);
      big.appendChild(el('h5', 'al-big-title', 'head ' + l + '.' + h));
      var strip = el('div', 'al-strip'), toks = [];
      P.tokens.forEach(function (s, t) {
        var sp = el('span', 'al-tok', s);
        sp.setAttribute('data-t', t);
        toks.push(sp);
        strip.appendChild(sp);
      });
      var panel = el('div', 'al-panel'), cap = el('div', 'al-attcap', 'hover a token');
      var to = table('al-to', ['pos', 'token', 'attention']);
      var from = table('al-from', ['pos', 'token', 'attention']);
      var a = el('div', 'al-scroll'), b = el('div', 'al-scroll');
      a.appendChild(el('div', null, 'attends to (its row)'));
      a.appendChild(to);
      b.appendChild(el('div', null, 'attended by (its column)'));
      b.appendChild(from);
      panel.appendChild(a);
      panel.appendChild(b);
      strip.addEventListener('mouseover', function (ev) {
        var t = ev.target.getAttribute('data-t');
        if (t === null) return;
        t = +t;
        cap.textContent = 'head ' + l + '.' + h + ', token ' + t + ' ';
        cap.appendChild(el('code', null, P.tokens[t]));
        to.tBodies[0].textContent = '';
        from.tBodies[0].textContent = '';
        toks.forEach(function (sp, s) {
          var v = s <= t ? at(l, h, t, s) : null;
          sp.classList.toggle('cur', s === t);
          sp.style.background = v === null ? '' : viridis(v);
          sp.style.color = v !== null && v < 0.6 ? '#fff' : '';
        });
        for (var s = 0; s <= t; s++) addRow(to, [s, P.tokens[s], fix4(at(l, h, t, s))]);
        for (var u = t; u < T; u++) addRow(from, [u, P.tokens[u], fix4(at(l, h, u, t))]);
      });
      big.appendChild(strip);
      big.appendChild(cap);
      big.appendChild(panel);
      var rows = [], cells = [];
      for (var t = 0; t < T; t++) {
        rows.push(t + ' ' + P.tokens[t]);
        for (var s = 0; s <= t; s++) cells.push([t, s, at(l, h, t, s)]);
      }
      big.appendChild(heatmap({kind: 'attention', title: 'head ' + l + '.' + h + ': row = query ' +
        '(destination), column = key (source)', row_title: 'query', col_title: 'key', rows: rows,
        cols: rows, cells: cells, fmt: fix4}, viridis));
    }
    select(cur.l, cur.h);
  }

  /* ---- the prompt's tokens coloured by their loss */
  function loss(x, P) {
    x.appendChild(el('h4', null, 'Loss on the prompt'));
    x.appendChild(el('p', 'meta', 'Each token coloured by its loss, \u2212ln p(token | the tokens ' +
      'before it): white 0, red the largest on the prompt. Hover a token for its probability and ' +
      'the model\u2019s top-5 predictions at that position.'));
    x.appendChild(el('p', 'al-prompt', 'Prompt: ' + P.text));
    var m = 0;
    P.loss.forEach(function (v) { if (typeof v === 'number') m = Math.max(m, v); });
    var strip = el('div', 'al-strip al-lossstrip'), info = el('div', 'al-lossinfo');
    var toks = P.tokens.map(function (s, t) {
      var sp = el('span', 'al-tok', s);
      sp.setAttribute('data-t', t);
      sp.style.background = diverging(P.loss[t], m);
      strip.appendChild(sp);
      return sp;
    });
    strip.addEventListener('mouseover', function (ev) {
      var t = ev.target.getAttribute('data-t');
      if (t === null) return;
      t = +t;
      toks.forEach(function (sp, s) { sp.classList.toggle('cur', s === t); });
      info.textContent = '';
      info.appendChild(document.createTextNode('token ' + t + ' '));
      info.appendChild(el('code', 'al-ltok', P.tokens[t]));
      if (t === 0) {
        info.appendChild(document.createTextNode(': the first token has no prefix'));
        return;
      }
      info.appendChild(document.createTextNode(': p = '));
      info.appendChild(el('span', 'al-p', fix4(P.p[t])));
      info.appendChild(document.createTextNode(', loss = '));
      info.appendChild(el('span', 'al-loss', fix4(P.loss[t])));
      info.appendChild(document.createTextNode(' nats; predicted here:'));
      var tb = table('al-top', ['rank', 'token', 'p']);
      P.top[t].forEach(function (c, i) { addRow(tb, [i + 1, c[0], fix4(c[1])]); });
      info.appendChild(tb);
    });
    x.appendChild(strip);
    x.appendChild(info);
  }

  /* ---- SAE features: a sortable list and the dashboard of the one clicked */
  var SAE_SORTS = {
    density: function (a, b) { return b.density - a.density || a.feature - b.feature; },
    induction: function (a, b) {
      var x = a.induction_index, y = b.induction_index;
      if ((x === null) !== (y === null)) return x === null ? 1 : -1;
      return (x !== null ? y - x : 0) || b.density - a.density || a.feature - b.feature;
    },
    head: function (a, b) {
      if ((a.top_head === null) !== (b.top_head === null)) return a.top_head === null ? 1 : -1;
      var p = (a.top_head || '0.0').split('.'), q = (b.top_head || '0.0').split('.');
      return p[0] - q[0] || p[1] - q[1] || (b.top_share || 0) - (a.top_share || 0) ||
        a.feature - b.feature;
    }
  };
  function saeRun(x, R) {
    x.appendChild(el('h4', null, 'SAE features, layer ' + R.layer + ' (run ' + R.run + ')'));
    x.appendChild(el('p', 'meta', 'The ' + R.features.length + ' densest of the ' + R.n_live +
      ' live features (of ' + R.d_sae + ') of the SAE on ' + R.hook_name + '. Sort the list by ' +
      'density, induction index or top head; click a feature for its top contexts, the tokens ' +
      'it raises and lowers (per unit of activation) and the share of its pre-activation from ' +
      'each head. Values as stored, to 6 significant digits; a context\u2019s neighbours are ' +
      'read from the run\u2019s token file and coloured by the activation recomputed with its ' +
      'SAE (the outlined token is the stored one).'));
    if (R.context_note) x.appendChild(el('p', 'warn al-sae-note', R.context_note));
    var box = el('div', 'al-sae'), sorts = el('div', 'al-sae-sort'), cur = null;
    box.setAttribute('data-run', R.run);
    var list = table('al-sae-list', ['feature', 'density', 'induction', 'top head', 'share', 'raises most']);
    var scroll = el('div', 'al-scroll'), detail = el('div', 'al-sae-detail');
    var byF = {};
    R.features.forEach(function (f) { byF[f.feature] = f; });
    function render(key) {
      Array.prototype.forEach.call(sorts.children, function (b) {
        b.classList.toggle('sel', b.getAttribute('data-sort') === key);
      });
      var fs = R.features.slice().sort(SAE_SORTS[key]);
      list.tBodies[0].textContent = '';
      fs.forEach(function (f) {
        addRow(list, [f.feature, sig6(f.density), sig6(f.induction_index), f.top_head || '–',
          sig6(f.top_share), f.up.length ? f.up[0][0] : '–']);
        var tr = list.tBodies[0].lastChild;
        tr.className = 'al-feat' + (cur === f.feature ? ' sel' : '');
        tr.setAttribute('data-f', f.feature);
      });
    }
    function show(n) {
      var f = byF[n];
      cur = n;
      Array.prototype.forEach.call(list.tBodies[0].rows, function (tr) {
        tr.classList.toggle('sel', +tr.getAttribute('data-f') === n);
      });
      detail.textContent = '';
      detail.setAttribute('data-f', n);
      detail.appendChild(el('h5', 'al-sae-title', 'feature ' + n));
      detail.appendChild(el('div', 'al-sae-nums', 'density ' + sig6(f.density) + ' (' + f.fired +
        ' of ' + R.positions + ' positions), mean activation ' + sig6(f.mean_act) + ', max ' +
        sig6(f.max_act) + '; induction index ' + sig6(f.induction_index) + ' (probe R ' +
        R.probe_r + ', N ' + R.probe_n + ')'));
      var panel = el('div', 'al-panel');
      var cx = table('al-sae-ctx', ['rank', 'token', 'activation', 'window:pos', 'context']);
      function shade(node, a) {
        var v = f.max_act > 0 ? a / f.max_act : 0;
        node.style.background = viridis(v);
        node.style.color = v < 0.6 ? '#fff' : '';
      }
      f.contexts.forEach(function (c, i) {
        addRow(cx, [i + 1, c[0], sig6(c[1]), c[2] + ':' + c[3], '']);
        var tr = cx.tBodies[0].lastChild, ctx = tr.cells[4];
        shade(tr.cells[2], c[1]);
        ctx.className = 'al-sae-win';
        (c[4] || []).forEach(function (t, k) {
          var sp = el('span', 'al-tok' + (k === c[6] ? ' cur' : ''), t);
          var a = c[5] ? c[5][k] : (k === c[6] ? c[1] : null);
          if (typeof a === 'number' && a > 0) shade(sp, a);
          if (c[5]) sp.title = sig6(c[5][k]);
          ctx.appendChild(sp);
        });
      });
      var up = table('al-sae-up', ['raises', 'logit / act']);
      f.up.forEach(function (u) { addRow(up, [u[0], sig6(u[1])]); });
      var dn = table('al-sae-down', ['lowers', 'logit / act']);
      f.down.forEach(function (u) { addRow(dn, [u[0], sig6(u[1])]); });
      var hs = table('al-sae-heads', ['head', 'DFA share', 'contribution']), m = 0;
      f.heads.forEach(function (h) { if (typeof h[1] === 'number') m = Math.max(m, Math.abs(h[1])); });
      f.heads.forEach(function (h) {
        addRow(hs, [h[0], sig6(h[1]), sig6(h[2])]);
        var td = hs.tBodies[0].lastChild.cells[1];
        td.style.background = diverging(h[1], m);
        td.style.color = typeof h[1] === 'number' && m > 0 && Math.abs(h[1]) / m > 0.6 ? '#fff' : '';
      });
      [['top contexts (the activating token)', cx], ['logit effects', up], ['', dn],
       ['head attribution', hs]].forEach(function (p) {
        var d = el('div');
        d.appendChild(el('div', null, p[0]));
        d.appendChild(p[1]);
        panel.appendChild(d);
      });
      detail.appendChild(panel);
    }
    [['density', 'by density'], ['induction', 'by induction index'], ['head', 'by top head']].forEach(
      function (k) {
        var b = el('button', null, k[1]);
        b.type = 'button';
        b.setAttribute('data-sort', k[0]);
        b.addEventListener('click', render.bind(null, k[0]));
        sorts.appendChild(b);
      });
    list.tBodies[0].addEventListener('click', function (ev) {
      var tr = ev.target.closest('tr');
      if (tr && tr.getAttribute('data-f') !== null) show(+tr.getAttribute('data-f'));
    });
    box.appendChild(sorts);
    scroll.appendChild(list);
    box.appendChild(scroll);
    box.appendChild(detail);
    x.appendChild(box);
    render('density');
    if (R.features.length) show(R.features.slice().sort(SAE_SORTS.density)[0].feature);
  }

  function fill(x, D) {
    if (D.prompt) {
      attention(x, D.prompt);
      loss(x, D.prompt);
    } else if (D.prompt_error) {
      x.appendChild(el('p', 'warn', 'No attention or loss explorer: ' + D.prompt_error));
    } else {
      x.appendChild(el('p', 'none', 'No prompt given (report --prompt): no attention or loss explorer.'));
    }
    var hms = D.heatmaps || [];
    if (hms.length) {
      x.appendChild(el('h4', null, 'Patching and attribution'));
      x.appendChild(el('p', 'meta', 'The rows of the database behind the pictures above, one ' +
        'cell per row (blue negative, red positive, white 0). Hover a cell for its value as stored.'));
    }
    hms.forEach(function (s) {
      s.fmt = sig6;
      var m = signedMax(s.cells, 2);
      x.appendChild(heatmap(s, function (v) { return diverging(v, m); }));
    });
    (D.sae || []).forEach(function (R) { saeRun(x, R); });
  }

  function init() {
    var data = document.querySelectorAll('script[type="application/json"][id^="al-data-"]');
    Array.prototype.forEach.call(data, function (d) {
      var x = document.getElementById('al-x-' + d.id.slice(8));
      if (!x) return;
      fill(x, JSON.parse(d.textContent));
      x.hidden = false;
    });
    document.documentElement.setAttribute('data-al-viewer', 'ready');
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
