/*
 * commprof timeline: every rank's steps, compute, collectives and messages
 * on one canvas, with no library. A page calls
 *
 *     CommprofTimeline.mount(element, data, options)
 *
 * where data is the JSON object described in docs/web.md. Strings that come
 * from traces (names, hosts, algorithms) reach the page only through
 * textContent or canvas fillText, never as HTML.
 */
(function (root) {
  'use strict';

  const AXIS_H = 30; // px, the time axis
  const GROUP_GAP = 6; // px between ranks
  const MAX_LEVELS = 3; // levels in a row whose events overlap

  // ---------------------------------------------------------------- format

  // Sizes, durations and rates as every commprof page prints them
  // (format.js, which a page inlines before this file).
  const F = root.CommprofFormat;

  // Axis ticks: a 1-2-5 step close to the wanted spacing, labelled in the
  // largest unit that the view's end reaches, with the decimals the step
  // needs (20 ms, 40 ms; 1.2405 s, 1.2410 s).
  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }

  function tickFormat(step, end) {
    const units = [[1e9, 's'], [1e6, 'ms'], [1e3, 'µs'], [1, 'ns']];
    let [size, name] = units[3];
    for (const u of units) {
      if (end >= u[0]) {
        [size, name] = u;
        break;
      }
    }
    const decimals = Math.max(0, Math.ceil(-Math.log10(step / size) - 1e-9));
    return (t) => (t / size).toFixed(decimals) + ' ' + name;
  }

  // ---------------------------------------------------------------- colour

  // Operations that commprof records get fixed colours, so that the same
  // operation looks the same in every report.
  const KNOWN = {
    allreduce: '#4e79a7',
    broadcast: '#f28e2b',
    allgather: '#59a14f',
    reducescatter: '#76b7b2',
    reduce: '#edc948',
    alltoall: '#b07aa1',
    barrier: '#9c755f',
    gather: '#ff9da7',
    scatter: '#e15759',
    send: '#86bcb6',
    recv: '#a0cbe8',
    compute: '#8fb996',
    forward: '#a3c4a8',
    backward: '#6b9a72',
    optimizer: '#c9a66b',
    data: '#b8b8b8',
    step: '#d5d9de',
  };
  const EXTRA = ['#d37295', '#b6992d', '#499894', '#f1ce63', '#9d7660', '#fabfd2', '#79706e', '#ffbe7d', '#8cd17d', '#d4a6c8'];
  const GREY = '#c8ccd1';
  const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const RAMP = 24;

  function hex(r, g, b) {
    return '#' + [r, g, b].map((v) => Math.round(v).toString(16).padStart(2, '0')).join('');
  }

  function ramp(n) {
    const out = [];
    for (let i = 0; i < n; i++) {
      const f = (i / (n - 1)) * (VIRIDIS.length - 1);
      const k = Math.min(VIRIDIS.length - 2, Math.floor(f));
      const u = f - k;
      const a = VIRIDIS[k];
      const b = VIRIDIS[k + 1];
      out.push(hex(a[0] + (b[0] - a[0]) * u, a[1] + (b[1] - a[1]) * u, a[2] + (b[2] - a[2]) * u));
    }
    return out;
  }

  function luminance(c) {
    const v = parseInt(c.slice(1), 16);
    return (0.299 * ((v >> 16) & 255) + 0.587 * ((v >> 8) & 255) + 0.114 * (v & 255)) / 255;
  }

  function nameColours(names) {
    let extra = 0;
    return names.map((n) => {
      const key = String(n).toLowerCase().replace(/[^a-z]/g, '');
      return KNOWN[key] || EXTRA[extra++ % EXTRA.length];
    });
  }

  // ---------------------------------------------------------------- search

  // First index in a[lo, hi) whose value is >= x (a sorted).
  function lowerBound(a, lo, hi, x) {
    while (lo < hi) {
      const m = (lo + hi) >>> 1;
      if (a[m] < x) lo = m + 1;
      else hi = m;
    }
    return lo;
  }

  // First index in a[lo, hi) whose value is > x.
  function upperBound(a, lo, hi, x) {
    while (lo < hi) {
      const m = (lo + hi) >>> 1;
      if (a[m] <= x) lo = m + 1;
      else hi = m;
    }
    return lo;
  }

  // ---------------------------------------------------------------- model

  function fail(msg) {
    throw new Error('commprof timeline: ' + msg);
  }

  function column(ev, name, n, required, fill) {
    const c = ev[name];
    if (c === undefined || c === null) {
      if (required) fail('events.' + name + ' is missing');
      return null;
    }
    if (!Array.isArray(c) || c.length !== n) fail('events.' + name + ' has ' + (Array.isArray(c) ? c.length : 'no') + ' values, events.rank has ' + n);
    return c;
  }

  // prepare checks the data and builds the per-row arrays the drawing
  // needs: events grouped by row (rank, lane) and sorted by start.
  function prepare(data) {
    if (!data || typeof data !== 'object') fail('no data');
    const ranks = Array.isArray(data.ranks) ? data.ranks : fail('ranks is missing');
    const lanes = Array.isArray(data.lanes) ? data.lanes.map(String) : fail('lanes is missing');
    const names = (data.names || []).map(String);
    const algos = (data.algos || []).map(String);
    const comms = (data.comms || []).map(String);
    const hosts = (data.hosts || []).map(String);
    const nl = lanes.length;
    const rankPos = new Map();
    ranks.forEach((r, i) => rankPos.set(r, i));
    const nRows = ranks.length * nl;

    const ev = data.events || {};
    const n = Array.isArray(ev.rank) ? ev.rank.length : 0;
    const cRank = column(ev, 'rank', n, n > 0);
    const cLane = column(ev, 'lane', n, n > 0);
    const cName = column(ev, 'name', n, n > 0);
    const cStart = column(ev, 'start', n, n > 0);
    const cDur = column(ev, 'dur', n, n > 0);
    const col = {
      bytes: column(ev, 'bytes', n, false),
      peer: column(ev, 'peer', n, false),
      seq: column(ev, 'seq', n, false),
      algo: column(ev, 'algo', n, false),
      step: column(ev, 'step', n, false),
      wait: column(ev, 'wait', n, false),
      comm: column(ev, 'comm', n, false),
    };

    // Rows, absolute starts (undoing the per-row delta encoding) and a
    // counting sort by row.
    const rowOfEvent = new Int32Array(n);
    const start = new Float64Array(n);
    const last = new Float64Array(nRows);
    const counts = new Int32Array(nRows + 1);
    let tMax = 0;
    for (let i = 0; i < n; i++) {
      const g = rankPos.get(cRank[i]);
      const l = cLane[i];
      if (g === undefined) fail('event ' + i + ': rank ' + cRank[i] + ' is not in ranks');
      if (!(l >= 0 && l < nl)) fail('event ' + i + ': lane ' + l + ' is not an index into lanes');
      const row = g * nl + l;
      rowOfEvent[i] = row;
      const s = last[row] + cStart[i];
      last[row] = s;
      start[i] = s;
      counts[row + 1]++;
      const e = s + cDur[i];
      if (e > tMax) tMax = e;
    }
    const rowOff = new Int32Array(nRows + 1);
    for (let r = 0; r < nRows; r++) rowOff[r + 1] = rowOff[r] + counts[r + 1];
    const fillAt = rowOff.slice(0, nRows);
    const ID = new Int32Array(n);
    for (let i = 0; i < n; i++) ID[fillAt[rowOfEvent[i]]++] = i;
    for (let r = 0; r < nRows; r++) {
      const a = rowOff[r];
      const b = rowOff[r + 1];
      let sorted = true;
      for (let k = a + 1; k < b && sorted; k++) sorted = start[ID[k - 1]] <= start[ID[k]];
      if (!sorted) {
        const part = Array.from(ID.subarray(a, b)).sort((x, y) => start[x] - start[y]);
        ID.set(part, a);
      }
    }
    const S = new Float64Array(n);
    const E = new Float64Array(n);
    const pos = new Int32Array(n);
    const rowMaxDur = new Float64Array(nRows);
    const rowDepth = new Uint8Array(nRows).fill(1);
    const level = new Uint8Array(n);
    const nameIdx = new Int32Array(n);
    for (let r = 0; r < nRows; r++) {
      for (let k = rowOff[r]; k < rowOff[r + 1]; k++) {
        const i = ID[k];
        const d = Math.max(0, cDur[i]);
        S[k] = start[i];
        E[k] = start[i] + d;
        pos[i] = k;
        nameIdx[k] = cName[i];
        if (d > rowMaxDur[r]) rowMaxDur[r] = d;
      }
    }
    // Events that overlap others in their row share the row's height in
    // up to MAX_LEVELS levels: each goes on the first level free at its
    // start (or the one that frees first). depth[k] is the number of levels
    // of event k's cluster (the run of events that overlap it, directly or
    // not); an event that overlaps nothing has the whole height.
    const depth = new Uint8Array(n);
    for (let r = 0; r < nRows; r++) {
      let overlaps = false;
      let maxEnd = -Infinity;
      for (let k = rowOff[r]; k < rowOff[r + 1] && !overlaps; k++) {
        overlaps = S[k] < maxEnd;
        if (E[k] > maxEnd) maxEnd = E[k];
      }
      if (!overlaps) {
        depth.fill(1, rowOff[r], rowOff[r + 1]);
        continue;
      }
      let ends = [];
      let from = rowOff[r];
      let clusterEnd = -Infinity;
      const close = (to) => {
        depth.fill(Math.max(1, ends.length), from, to);
        if (ends.length > rowDepth[r]) rowDepth[r] = ends.length;
      };
      for (let k = rowOff[r]; k < rowOff[r + 1]; k++) {
        if (S[k] >= clusterEnd) {
          close(k);
          ends = [];
          from = k;
        }
        let l = ends.findIndex((t) => t <= S[k]);
        if (l < 0 && ends.length < MAX_LEVELS) l = ends.push(-Infinity) - 1;
        if (l < 0) l = ends.indexOf(Math.min(...ends));
        level[k] = l;
        ends[l] = Math.max(ends[l], E[k]);
        clusterEnd = Math.max(clusterEnd, E[k]);
      }
      close(rowOff[r + 1]);
    }

    // Links: each send's receive and the other way round.
    const partner = new Int32Array(n).fill(-1);
    const isSend = new Uint8Array(n);
    for (const l of data.links || []) {
      if (!Array.isArray(l) || l.length < 2) continue;
      const a = l[0];
      const b = l[1];
      if (!(a >= 0 && a < n && b >= 0 && b < n)) fail('link [' + a + ', ' + b + '] names an event that is not there');
      partner[a] = b;
      partner[b] = a;
      isSend[a] = 1;
    }

    // Bins: one row per (rank, lane) that has any.
    let bins = null;
    if (data.bins && data.bins.n > 0 && data.bins.width > 0) {
      const nb = data.bins.n;
      const rows = new Array(nRows).fill(null);
      for (const br of data.bins.rows || []) {
        const g = rankPos.get(br.rank);
        if (g === undefined || !(br.lane >= 0 && br.lane < nl)) fail('bins row for rank ' + br.rank + ' lane ' + br.lane + ' names no rank or lane');
        if (!Array.isArray(br.busy) || br.busy.length !== nb) fail('bins row for rank ' + br.rank + ' lane ' + br.lane + ' has ' + (br.busy || []).length + ' busy values, bins.n is ' + nb);
        const nm = Array.isArray(br.name) && br.name.length === nb ? br.name : null;
        const busy = new Uint16Array(nb);
        const name = new Int32Array(nb).fill(-1);
        for (let b = 0; b < nb; b++) {
          const v = br.busy[b] | 0;
          busy[b] = v < 0 ? 0 : v > 1000 ? 1000 : v;
          if (nm && nm[b] >= 0 && nm[b] < names.length) name[b] = nm[b];
        }
        rows[g * nl + br.lane] = { busy: busy, name: name };
      }
      bins = { n: nb, width: +data.bins.width, rows: rows };
      tMax = Math.max(tMax, nb * data.bins.width);
    }

    let t1 = +data.t1 > 0 ? +data.t1 : tMax;
    if (!(t1 > 0)) t1 = 1;

    // Windows: merged and sorted. Without the key every event is known.
    let windows;
    if (Array.isArray(data.windows)) {
      windows = data.windows
        .filter((w) => Array.isArray(w) && w[1] > w[0])
        .map((w) => [+w[0], +w[1]])
        .sort((a, b) => a[0] - b[0]);
      const merged = [];
      for (const w of windows) {
        const prev = merged[merged.length - 1];
        if (prev && w[0] <= prev[1]) prev[1] = Math.max(prev[1], w[1]);
        else merged.push(w);
      }
      windows = merged;
    } else {
      windows = [[0, t1]];
    }

    // Bandwidth range over the events that carry bytes: the 2nd to 98th
    // percentile of log10(GB/s), so that outliers do not flatten the ramp.
    const logBw = [];
    if (col.bytes) {
      for (let i = 0; i < n; i++) {
        const b = col.bytes[i];
        const d = cDur[i];
        if (b > 0 && d > 0) logBw.push(Math.log10(b / d));
      }
    }
    let bwLo = 0;
    let bwHi = 1;
    if (logBw.length) {
      const sorted = Float64Array.from(logBw).sort();
      bwLo = sorted[Math.floor((sorted.length - 1) * 0.02)];
      bwHi = sorted[Math.ceil((sorted.length - 1) * 0.98)];
      if (bwHi - bwLo < 1e-6) {
        bwLo -= 0.5;
        bwHi += 0.5;
      }
    }

    // Colour indices: names first, then the bandwidth ramp, then grey.
    const palette = nameColours(names).concat(ramp(RAMP), [GREY]);
    const greyIdx = palette.length - 1;
    const colName = new Int32Array(n);
    const colBw = new Int32Array(n);
    for (let k = 0; k < n; k++) {
      const i = ID[k];
      const nm = nameIdx[k];
      colName[k] = nm >= 0 && nm < names.length ? nm : greyIdx;
      const b = col.bytes ? col.bytes[i] : 0;
      const d = cDur[i];
      if (b > 0 && d > 0) {
        const f = (Math.log10(b / d) - bwLo) / (bwHi - bwLo);
        colBw[k] = names.length + Math.max(0, Math.min(RAMP - 1, Math.round(f * (RAMP - 1))));
      } else {
        colBw[k] = greyIdx;
      }
    }

    // How often each name occurs, for the legend.
    const nameCount = new Float64Array(names.length);
    for (let k = 0; k < n; k++) if (nameIdx[k] >= 0 && nameIdx[k] < names.length) nameCount[nameIdx[k]]++;
    if (bins) {
      for (const r of bins.rows) {
        if (!r) continue;
        for (let b = 0; b < r.name.length; b++) if (r.name[b] >= 0 && r.name[b] < names.length) nameCount[r.name[b]] += r.busy[b] / 1000;
      }
    }

    return {
      n, ranks, hosts, lanes, names, algos, comms, nl, nRows,
      cRank, cLane, cName, cDur, col,
      S, E, ID, pos, rowOff, rowMaxDur, rowDepth, level, depth, rowOfEvent, colName, colBw, nameCount,
      partner, isSend,
      bins, t1, windows, bwLo, bwHi, palette, greyIdx,
      truncated: +data.truncated || 0,
      textOn: palette.map((c) => (luminance(c) > 0.55 ? '#1f2328' : '#ffffff')),
    };
  }

  // ---------------------------------------------------------------- DOM

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // ---------------------------------------------------------------- mount


  function mount(element, data, options) {
    const mountStart = performance.now();
    const opt = Object.assign({ laneHeight: 14, maxHeight: 640, gutter: 132, detailLimit: 5000, linkLimit: 200, colorBy: 'name' }, options || {});
    let m;
    try {
      if (!F) throw new Error('commprof timeline: CommprofFormat is not defined: the page must load format.js before timeline.js');
      m = prepare(data);
    } catch (err) {
      element.textContent = String(err.message || err);
      element.classList.add('cp-tl-error');
      throw err;
    }

    const laneH = opt.laneHeight;
    const groupH = m.nl * laneH + GROUP_GAP;
    const contentH = AXIS_H + m.ranks.length * groupH + 2;
    const viewH = Math.max(AXIS_H + groupH, Math.min(contentH, opt.maxHeight));
    const gutter = opt.gutter;
    if (getComputedStyle(element).position === 'static') element.style.position = 'relative';

    // Build the widget.
    element.textContent = '';
    element.classList.add('cp-tl');
    element.setAttribute('data-commprof-timeline', '');
    const toolbar = el('div', 'cp-tl-toolbar');
    const btnOut = el('button', 'cp-tl-btn', '−');
    const btnIn = el('button', 'cp-tl-btn', '+');
    const btnReset = el('button', 'cp-tl-btn', 'Reset');
    btnOut.title = 'Zoom out (-)';
    btnIn.title = 'Zoom in (+)';
    btnReset.title = 'Show the whole run (double click, 0)';
    for (const b of [btnOut, btnIn, btnReset]) b.type = 'button';
    const colourLabel = el('label', 'cp-tl-colour', 'Colour by ');
    const select = el('select');
    for (const [v, t] of [['name', 'operation'], ['bandwidth', 'bandwidth']]) {
      const o = el('option', null, t);
      o.value = v;
      select.appendChild(o);
    }
    colourLabel.appendChild(select);
    const range = el('span', 'cp-tl-range');
    const status = el('span', 'cp-tl-status');
    const buttons = el('span', 'cp-tl-buttons');
    buttons.append(btnOut, btnIn, btnReset);
    toolbar.append(buttons, colourLabel, range, status);
    const legend = el('div', 'cp-tl-legend');
    const viewport = el('div', 'cp-tl-viewport');
    viewport.tabIndex = 0;
    viewport.style.height = viewH + 'px';
    const stage = el('div', 'cp-tl-stage');
    stage.style.height = viewH + 'px';
    const canvas = el('canvas', 'cp-tl-canvas');
    const overlay = el('canvas', 'cp-tl-overlay');
    stage.append(canvas, overlay);
    const spacer = el('div', 'cp-tl-spacer');
    spacer.style.height = Math.max(0, contentH - viewH) + 'px';
    viewport.append(stage, spacer);
    const tooltip = el('div', 'cp-tl-tooltip');
    tooltip.hidden = true;
    const details = el('div', 'cp-tl-details');
    details.hidden = true;
    element.append(toolbar, legend, viewport, tooltip, details);
    const ctx = canvas.getContext('2d');
    const octx = overlay.getContext('2d');

    // View state.
    let v0 = 0;
    let v1 = m.t1;
    let colorBy = opt.colorBy === 'bandwidth' ? 'bandwidth' : 'name';
    select.value = colorBy;
    let cssW = 0;
    let dpr = 1;
    let scrollY = 0; // viewport.scrollTop, read once per change
    let plotW = 1;
    let mode = 'bins';
    let covered = [];
    let hover = null; // {k} sorted event index, or {row, bin}
    let pinned = -1; // sorted event index
    let tooltipLines = [];
    let raf = 0;
    let overlayRaf = 0;
    let batches = m.palette.map(() => []);
    const linkCands = []; // events drawn that have a link, for drawLinks
    let linkOverflow = false;
    const hook = {
      ready: false,
      drawnEvents: 0,
      mode: 'bins',
      lastDrawMs: 0,
      mountMs: 0,
      zoomTo: zoomTo,
      screenPositionOf: screenPositionOf,
      tooltipText: () => tooltipLines.join('\n'),
      reveal: reveal,
      view: () => [v0, v1],
      setColorBy: setColorBy,
      redraw: () => draw(),
      loading: false, // a span's events are being fetched (fetchDetail)
      detailLoads: 0, // spans of detail fetched so far
    };
    element.commprofTimeline = hook;

    const X = (t) => gutter + ((t - v0) / (v1 - v0)) * plotW;
    const T = (x) => v0 + ((x - gutter) / plotW) * (v1 - v0);
    const rowY = (row) => AXIS_H + Math.floor(row / m.nl) * groupH + (row % m.nl) * laneH + GROUP_GAP / 2 - scrollY;

    function rowAt(y) {
      const cy = y + scrollY - AXIS_H - GROUP_GAP / 2;
      if (cy < 0 || y < AXIS_H) return -1;
      const g = Math.floor(cy / groupH);
      const l = Math.floor((cy - g * groupH) / laneH);
      if (g >= m.ranks.length || l >= m.nl) return -1;
      return g * m.nl + l;
    }

    function visibleRows() {
      const st = scrollY;
      const g0 = Math.max(0, Math.floor((st - GROUP_GAP) / groupH));
      const g1 = Math.min(m.ranks.length - 1, Math.floor((st + viewH - AXIS_H) / groupH));
      return [g0 * m.nl, (g1 + 1) * m.nl];
    }

    function invalidate() {
      if (!raf) raf = requestAnimationFrame(() => {
        raf = 0;
        draw();
      });
    }

    function invalidateOverlay() {
      if (!overlayRaf) overlayRaf = requestAnimationFrame(() => {
        overlayRaf = 0;
        drawOverlay();
      });
    }

    function clampView(a, b) {
      const minSpan = 10;
      let span = Math.max(minSpan, Math.min(m.t1, b - a));
      a = Math.max(0, Math.min(a, m.t1 - span));
      return [a, a + span];
    }

    function setView(a, b) {
      [v0, v1] = clampView(a, b);
      invalidate();
    }

    function zoomAround(t, factor) {
      setView(t - (t - v0) * factor, t + (v1 - t) * factor);
    }

    function zoomTo(a, b) {
      [v0, v1] = clampView(+a, +b);
      draw();
    }

    function setColorBy(v) {
      colorBy = v === 'bandwidth' ? 'bandwidth' : 'name';
      select.value = colorBy;
      buildLegend();
      draw();
    }

    function resize() {
      const w = Math.max(gutter + 50, viewport.clientWidth);
      const r = window.devicePixelRatio || 1;
      if (w === cssW && r === dpr && canvas.width) return;
      cssW = w;
      dpr = r;
      plotW = cssW - gutter - 8;
      for (const c of [canvas, overlay]) {
        c.width = Math.round(cssW * dpr);
        c.height = Math.round(viewH * dpr);
        c.style.width = cssW + 'px';
        c.style.height = viewH + 'px';
      }
    }

    // Intersections of the view with the windows, where every event is known.
    function coveredSegments() {
      const out = [];
      for (const w of m.windows) {
        const a = Math.max(v0, w[0]);
        const b = Math.min(v1, w[1]);
        if (b > a) out.push([a, b]);
      }
      return out;
    }

    function uncoveredSegments(cov) {
      const out = [];
      let t = v0;
      for (const [a, b] of cov) {
        if (a > t) out.push([t, a]);
        t = b;
      }
      if (t < v1) out.push([t, v1]);
      return out;
    }

    function clipTo(c, segs, top) {
      c.beginPath();
      for (const [a, b] of segs) c.rect(X(a), top, X(b) - X(a), viewH - top);
      c.clip();
    }

    function countVisible(r0, r1) {
      let total = 0;
      for (let row = r0; row < r1; row++) {
        const off = m.rowOff[row];
        const end = m.rowOff[row + 1];
        if (off === end) continue;
        const lo = lowerBound(m.S, off, end, v0 - m.rowMaxDur[row]);
        total += lowerBound(m.S, lo, end, v1) - lo;
      }
      return total;
    }

    function flushBatches(c) {
      const pal = m.palette;
      for (let ci = 0; ci < batches.length; ci++) {
        const b = batches[ci];
        if (!b.length) continue;
        c.fillStyle = pal[ci];
        for (let j = 0; j < b.length; j += 4) c.fillRect(b[j], b[j + 1], b[j + 2], b[j + 3]);
        b.length = 0;
      }
    }

    // Bins: per device pixel column, the mean occupancy as bar height and
    // the busiest bin's name as colour; equal neighbours share one rect.
    function drawBins(r0, r1) {
      const bins = m.bins;
      if (!bins) return;
      const bw = bins.width;
      const b0 = Math.max(0, Math.floor(v0 / bw));
      const b1 = Math.min(bins.n, Math.ceil(v1 / bw));
      const scale = plotW / (v1 - v0);
      const hMax = laneH - 2;
      for (let row = r0; row < r1; row++) {
        const br = bins.rows[row];
        if (!br) continue;
        const y0 = rowY(row);
        if (y0 + laneH < AXIS_H || y0 > viewH) continue;
        const base = y0 + laneH - 1;
        const busy = br.busy;
        const names = br.name;
        let col = -1;
        let gx0 = 0;
        let gx1 = 0;
        let sum = 0;
        let cnt = 0;
        let best = -1;
        let bestName = -1;
        // The pending rect, extended while colour and height repeat.
        let px0 = 0;
        let px1 = 0;
        let ph = -1;
        let pc = -1;
        const emit = () => {
          if (cnt === 0) return;
          const h = Math.round(((sum / cnt) / 1000) * hMax * dpr) / dpr;
          const ci = bestName >= 0 && bestName < m.names.length ? bestName : m.greyIdx;
          let x1 = Math.max(gx1, gx0 + 1 / dpr);
          if (h <= 0) {
            // empty column: ends any pending rect
          } else if (h === ph && ci === pc && gx0 - px1 < 0.01) {
            px1 = x1;
            return;
          }
          if (ph > 0) batches[pc].push(px0, base - ph, px1 - px0, ph);
          if (h > 0) {
            px0 = gx0;
            px1 = x1;
            ph = h;
            pc = ci;
          } else {
            ph = -1;
          }
        };
        for (let b = b0; b < b1; b++) {
          const x0 = gutter + (b * bw - v0) * scale;
          const c = Math.floor(x0 * dpr);
          if (c !== col) {
            emit();
            col = c;
            gx0 = x0;
            sum = 0;
            cnt = 0;
            best = -1;
            bestName = -1;
          }
          const v = busy[b];
          sum += v;
          cnt++;
          if (v > best) {
            best = v;
            bestName = names[b];
          }
          gx1 = x0 + bw * scale;
        }
        emit();
        if (ph > 0) batches[pc].push(px0, base - ph, px1 - px0, ph);
      }
      flushBatches(ctx);
    }

    // Events: every event in the visible rows and time, with sub-pixel
    // events merged into one rect per pixel run. In a row whose events
    // overlap, each event keeps to its level (a thinner band).
    function drawEvents(r0, r1, cov) {
      const S = m.S;
      const E = m.E;
      const level = m.level;
      const colour = colorBy === 'bandwidth' ? m.colBw : m.colName;
      const scale = plotW / (v1 - v0);
      const minW = 1 / dpr;
      const one = cov.length === 1 && cov[0][0] <= v0 && cov[0][1] >= v1;
      const labels = [];
      const waits = [];
      const waitCol = m.col.wait;
      // Per level: the pending rect (x0, x1, y, height, colour, longest
      // duration) and where the last label ends.
      const px0 = [0, 0, 0];
      const px1 = [0, 0, 0];
      const py = [0, 0, 0];
      const ph = [0, 0, 0];
      const pc = [-1, -1, -1];
      const pd = [0, 0, 0];
      const labelEnd = [0, 0, 0];
      const depth = m.depth;
      const partner = m.partner;
      const ID = m.ID;
      const cap = 2 * opt.linkLimit + 2;
      let drawn = 0;
      let lastColour = -1;
      for (let row = r0; row < r1; row++) {
        const off = m.rowOff[row];
        const end = m.rowOff[row + 1];
        if (off === end) continue;
        const y0 = rowY(row);
        if (y0 + laneH < AXIS_H || y0 > viewH) continue;
        const isRecv = m.lanes[row % m.nl] === 'recv';
        // Rows with overlaps are drawn in start order, so that where more
        // events overlap than there are levels the later lies on top;
        // other rows are batched by colour.
        const direct = m.rowDepth[row] > 1;
        const put = (l) => {
          const ci = pc[l];
          if (ci < 0) return;
          const x = px0[l];
          const w = Math.max(minW, px1[l] - x);
          if (!direct) {
            batches[ci].push(x, py[l], w, ph[l]);
            return;
          }
          if (ci !== lastColour) {
            ctx.fillStyle = m.palette[ci];
            lastColour = ci;
          }
          ctx.fillRect(x, py[l], w, ph[l]);
        };
        for (let l = 0; l < MAX_LEVELS; l++) {
          pc[l] = -1;
          px1[l] = -1e9;
          labelEnd[l] = -Infinity;
        }
        let k = lowerBound(S, off, end, v0 - m.rowMaxDur[row]);
        const hi = lowerBound(S, k, end, v1);
        for (; k < hi; k++) {
          const e = E[k];
          if (e < v0) continue;
          const s = S[k];
          if (!one) {
            let inside = false;
            for (let j = 0; j < cov.length; j++) {
              if (e >= cov[j][0] && s <= cov[j][1]) {
                inside = true;
                break;
              }
            }
            if (!inside) continue;
          }
          drawn++;
          if (partner[ID[k]] >= 0 && !linkOverflow) {
            if (linkCands.length < cap) linkCands.push(k);
            else linkOverflow = true;
          }
          const l = level[k];
          const dk = depth[k];
          const sh = (laneH - 2 - (dk - 1)) / dk;
          const y = y0 + 1 + l * (sh + 1);
          const x0 = gutter + (s - v0) * scale;
          const x1 = gutter + (e - v0) * scale;
          const w = x1 - x0;
          if (w < 1 && x0 - px1[l] < 1 && py[l] === y && ph[l] === sh) {
            if (x1 > px1[l]) px1[l] = x1;
            if (e - s > pd[l]) {
              pd[l] = e - s;
              pc[l] = colour[k];
            }
            continue;
          }
          put(l);
          px0[l] = x0;
          py[l] = y;
          ph[l] = sh;
          pd[l] = e - s;
          pc[l] = colour[k];
          if (w < 4) {
            px1[l] = x1;
            continue;
          }
          // A hairline gap between wide neighbours.
          px1[l] = x1 - 1 / dpr;
          // A receive's wait for its sender is drawn lighter, and its
          // label starts after it.
          let lx = x0;
          if (isRecv && waitCol) {
            const ww = Math.min(w, waitCol[m.ID[k]] * scale);
            if (ww > 0) {
              waits.push(x0, y, ww, sh);
              lx = x0 + ww;
            }
          }
          if (w >= 30 && sh >= 10 && labels.length < 2400 && lx >= labelEnd[l]) {
            // Up to the next event's start, so that labels of events
            // that overlap do not run into each other.
            const avail = (k + 1 < end && S[k + 1] < e && dk === 1 ? gutter + (S[k + 1] - v0) * scale : x1) - lx;
            if (avail >= 30) {
              labels.push(k, lx, avail, y + sh / 2);
              labelEnd[l] = lx + avail;
            }
          }
        }
        for (let l = 0; l < MAX_LEVELS; l++) put(l);
      }
      flushBatches(ctx);
      if (waits.length) {
        // The part of a receive spent waiting for the sender, lighter.
        ctx.fillStyle = 'rgba(255,255,255,0.5)';
        for (let j = 0; j < waits.length; j += 4) ctx.fillRect(waits[j], waits[j + 1], waits[j + 2], waits[j + 3]);
      }
      if (labels.length) {
        ctx.font = '10px system-ui, -apple-system, "Segoe UI", sans-serif';
        ctx.textBaseline = 'middle';
        ctx.textAlign = 'left';
        for (let j = 0; j < labels.length; j += 4) {
          const k = labels[j];
          const x0 = Math.max(labels[j + 1], gutter);
          const w = labels[j + 1] + labels[j + 2] - x0;
          if (w < 30) continue;
          let text = eventLabel(k);
          const maxChars = Math.floor((w - 6) / 5.6);
          if (maxChars < 2) continue;
          if (text.length > maxChars) text = text.slice(0, maxChars - 1) + '…';
          ctx.fillStyle = m.textOn[colour[k]];
          ctx.fillText(text, x0 + 3, labels[j + 3] + 0.5);
        }
      }
      return drawn;
    }

    function eventLabel(k) {
      const i = m.ID[k];
      const nm = m.names[m.cName[i]];
      const name = nm === undefined ? '?' : nm;
      const stepCol = m.col.step;
      if (m.lanes[m.cLane[i]] === 'step' && stepCol && stepCol[i] >= 0) return name === 'step' ? 'step ' + stepCol[i] : name + ' ' + stepCol[i];
      return name;
    }

    // The vertical middle of event k's band, in canvas coordinates.
    function eventMidY(k) {
      const row = m.rowOfEvent[m.ID[k]];
      const dk = m.depth[k];
      const sh = (laneH - 2 - (dk - 1)) / dk;
      return rowY(row) + 1 + m.level[k] * (sh + 1) + sh / 2;
    }

    // Links of the events drawn (cands, sorted indices), when few enough
    // are in view to be told apart: from the start of the send to the end
    // of its receive. Returns how many, or -1 when there are too many.
    function drawLinks(cands, overflow) {
      if (overflow) return -1;
      if (!cands.length) return 0;
      const drawnIDs = new Set();
      for (const k of cands) drawnIDs.add(m.ID[k]);
      const pairs = [];
      for (const k of cands) {
        const i = m.ID[k];
        const p = m.partner[i];
        if (m.isSend[i]) pairs.push(k, m.pos[p]);
        else if (!drawnIDs.has(p)) pairs.push(m.pos[p], k);
      }
      if (pairs.length / 2 > opt.linkLimit) return -1;
      ctx.save();
      ctx.strokeStyle = 'rgba(45,50,60,0.45)';
      ctx.fillStyle = 'rgba(45,50,60,0.7)';
      ctx.lineWidth = 1;
      ctx.beginPath();
      const heads = [];
      for (let j = 0; j < pairs.length; j += 2) {
        const a = pairs[j];
        const b = pairs[j + 1];
        const ya = eventMidY(a);
        const yb = eventMidY(b);
        if ((ya < AXIS_H && yb < AXIS_H) || (ya > viewH && yb > viewH)) continue;
        const xa = X(m.S[a]);
        const xb = X(m.E[b]);
        ctx.moveTo(xa, ya);
        ctx.lineTo(xb, yb);
        heads.push(xa, ya, xb, yb);
      }
      ctx.stroke();
      ctx.beginPath();
      for (let h = 0; h < heads.length; h += 4) arrowHead(ctx, heads[h], heads[h + 1], heads[h + 2], heads[h + 3], 5);
      ctx.fill();
      ctx.restore();
      return pairs.length / 2;
    }

    function arrowHead(c, xa, ya, xb, yb, size) {
      const ang = Math.atan2(yb - ya, xb - xa);
      c.moveTo(xb, yb);
      c.lineTo(xb - size * Math.cos(ang - 0.45), yb - size * Math.sin(ang - 0.45));
      c.lineTo(xb - size * Math.cos(ang + 0.45), yb - size * Math.sin(ang + 0.45));
      c.closePath();
    }

    function draw() {
      if (raf) {
        cancelAnimationFrame(raf);
        raf = 0;
      }
      const t0 = performance.now();
      resize();
      scrollY = viewport.scrollTop;
      const W = cssW;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, W, viewH);
      ctx.fillStyle = '#ffffff';
      ctx.fillRect(0, 0, W, viewH);
      const [r0, r1] = visibleRows();

      // Rank groups on alternating backgrounds.
      for (let g = r0 / m.nl; g < r1 / m.nl; g++) {
        const y = rowY(g * m.nl) - GROUP_GAP / 2;
        ctx.fillStyle = g % 2 ? '#f6f7f9' : '#ffffff';
        ctx.fillRect(0, y, W, groupH);
      }

      // Grid lines at the ticks.
      const step = niceStep(Math.max(1, ((v1 - v0) * 110) / plotW));
      const fmt = tickFormat(step, v1);
      const firstTick = Math.ceil(v0 / step) * step;
      ctx.fillStyle = '#e4e7eb';
      for (let t = firstTick; t <= v1; t += step) ctx.fillRect(Math.round(X(t)) - 0.5, AXIS_H, 1, viewH - AXIS_H);

      covered = coveredSegments();
      const nVisible = countVisible(r0, r1);
      const canDetail = covered.length > 0 && (nVisible <= opt.detailLimit || !m.bins);
      mode = canDetail ? 'events' : 'bins';
      let drawn = 0;
      let links = 0;
      ctx.save();
      ctx.beginPath();
      ctx.rect(gutter, AXIS_H, plotW, viewH - AXIS_H);
      ctx.clip();
      if (mode === 'bins') {
        drawBins(r0, r1);
      } else {
        const unc = uncoveredSegments(covered);
        if (unc.length) {
          // Summary-only stretches: a grey wash, then the bins.
          ctx.save();
          ctx.fillStyle = 'rgba(110,119,129,0.08)';
          for (const [a, b] of unc) ctx.fillRect(X(a), AXIS_H, X(b) - X(a), viewH - AXIS_H);
          clipTo(ctx, unc, AXIS_H);
          drawBins(r0, r1);
          ctx.restore();
        }
        ctx.save();
        clipTo(ctx, covered, AXIS_H);
        linkCands.length = 0;
        linkOverflow = false;
        drawn = drawEvents(r0, r1, covered);
        links = drawLinks(linkCands, linkOverflow);
        ctx.restore();
      }
      ctx.restore();

      drawGutter(r0, r1);
      drawAxis(step, fmt, firstTick);

      hook.drawnEvents = drawn;
      hook.mode = mode;
      range.textContent = F.duration(v0) + ' – ' + F.duration(v1) + '  (' + F.duration(v1 - v0) + ')';
      let s;
      if (mode === 'bins') {
        s = covered.length ? F.int(nVisible) + ' events in view: showing occupancy; zoom in for each event' : 'occupancy only: every event is kept only in the marked windows';
      } else {
        s = F.int(drawn) + ' events';
        if (links > 0) s += ', ' + F.int(links) + ' messages';
        else if (links < 0) s += '; zoom in for message lines';
      }
      if (m.truncated > 0) s += ' · ' + F.int(m.truncated) + ' events outside the windows are summarised only';
      wantDetail();
      if (fetching) s += ' · loading every event of this span…';
      else if (detailError) s += ' · ' + detailError;
      status.textContent = s;
      drawOverlay();
      hook.lastDrawMs = performance.now() - t0;
      hook.ready = true;
    }

    // Detail on demand. A page served with its run (commprof serve) passes
    // options.fetchDetail(from, to), which resolves to the timeline data of
    // that span with every event in it; when the view holds stretches known
    // only as occupancy, the span around it is fetched and replaces the
    // detail the page had.
    let fetchTimer = 0;
    let fetching = false;
    let asked = null; // [from, to] of the last request
    let detailError = '';
    function wantDetail() {
      if (typeof opt.fetchDetail !== 'function' || fetching || v1 - v0 >= m.t1 * 0.999) return;
      let known = 0;
      for (const [a, b] of coveredSegments()) known += b - a;
      if (known >= (v1 - v0) * 0.999 || (asked && asked[0] <= v0 && asked[1] >= v1)) return;
      clearTimeout(fetchTimer);
      fetchTimer = setTimeout(fetchDetail, 250);
    }
    function fetchDetail() {
      const span = v1 - v0;
      const from = Math.max(0, v0 - span / 2);
      const to = Math.min(m.t1, v1 + span / 2);
      fetching = true;
      hook.loading = true;
      asked = [from, to];
      detailError = '';
      invalidate();
      Promise.resolve()
        .then(() => opt.fetchDetail(from, to))
        .then(reload)
        .catch((err) => {
          detailError = 'could not load the span’s events: ' + (err && err.message ? err.message : String(err));
        })
        .finally(() => {
          fetching = false;
          hook.loading = false;
          invalidate();
        });
    }
    function reload(d) {
      const next = prepare(d);
      if (next.ranks.length !== m.ranks.length || next.nl !== m.nl) throw new Error('the detail is of another run');
      pin(-1);
      hover = null;
      hideTooltip();
      m = next;
      batches = m.palette.map(() => []);
      buildLegend();
      hook.detailLoads++;
    }

    // fit shortens text with an ellipsis to at most w px in ctx's font.
    function fit(text, w) {
      if (ctx.measureText(text).width <= w) return text;
      let lo = 0;
      let hi = text.length;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (ctx.measureText(text.slice(0, mid) + '…').width <= w) lo = mid;
        else hi = mid - 1;
      }
      return text.slice(0, lo) + '…';
    }

    // The room for a host name: the gutter less the widest lane name.
    let hostW = 0;
    function measureGutter() {
      ctx.font = '9.5px system-ui, -apple-system, "Segoe UI", sans-serif';
      const lanesW = laneH >= 9 ? Math.max(0, ...m.lanes.map((l) => ctx.measureText(l).width)) : 0;
      hostW = Math.max(20, gutter - 8 - 8 - lanesW - 6);
    }

    function drawGutter(r0, r1) {
      if (!hostW) measureGutter();
      ctx.fillStyle = '#ffffff';
      ctx.fillRect(0, AXIS_H, gutter, viewH - AXIS_H);
      ctx.save();
      ctx.beginPath();
      ctx.rect(0, AXIS_H, gutter, viewH - AXIS_H);
      ctx.clip();
      for (let g = r0 / m.nl; g < r1 / m.nl; g++) {
        const y = rowY(g * m.nl);
        ctx.fillStyle = g % 2 ? '#f6f7f9' : '#ffffff';
        ctx.fillRect(0, y - GROUP_GAP / 2, gutter, groupH);
        ctx.textBaseline = 'middle';
        ctx.textAlign = 'left';
        ctx.fillStyle = '#1f2328';
        ctx.font = '600 11px system-ui, -apple-system, "Segoe UI", sans-serif';
        ctx.fillText('rank ' + m.ranks[g], 8, y + laneH / 2);
        const host = m.hosts[g];
        if (host && m.nl > 1) {
          ctx.fillStyle = '#656d76';
          ctx.font = '10px system-ui, -apple-system, "Segoe UI", sans-serif';
          ctx.fillText(fit(host, hostW), 8, y + laneH * 1.5);
        }
        if (laneH >= 9) {
          ctx.textAlign = 'right';
          ctx.fillStyle = '#8c959f';
          ctx.font = '9.5px system-ui, -apple-system, "Segoe UI", sans-serif';
          for (let l = 0; l < m.nl; l++) ctx.fillText(m.lanes[l], gutter - 8, y + l * laneH + laneH / 2);
        }
        ctx.fillStyle = '#d0d7de';
        ctx.fillRect(0, y + m.nl * laneH + GROUP_GAP / 2 - 0.5, cssW, 0.5);
      }
      ctx.restore();
      ctx.fillStyle = '#d0d7de';
      ctx.fillRect(gutter - 0.5, AXIS_H, 1, viewH - AXIS_H);
    }

    function drawAxis(step, fmt, firstTick) {
      ctx.fillStyle = '#ffffff';
      ctx.fillRect(0, 0, cssW, AXIS_H);
      // Where every event is known.
      ctx.fillStyle = 'rgba(9,105,218,0.28)';
      for (const [a, b] of coveredSegments()) {
        const xa = Math.max(gutter, X(a));
        const xb = Math.min(gutter + plotW, X(b));
        if (xb > xa) ctx.fillRect(xa, AXIS_H - 5, Math.max(1, xb - xa), 4);
      }
      ctx.fillStyle = '#d0d7de';
      ctx.fillRect(0, AXIS_H - 0.5, cssW, 1);
      ctx.fillStyle = '#57606a';
      ctx.font = '10.5px system-ui, -apple-system, "Segoe UI", sans-serif';
      ctx.textBaseline = 'alphabetic';
      ctx.textAlign = 'center';
      for (let t = firstTick; t <= v1; t += step) {
        const x = Math.round(X(t)) - 0.5;
        ctx.fillRect(x, AXIS_H - 9, 1, 4);
        if (x > gutter + 20 && x < cssW - 20) ctx.fillText(fmt(t), x, 14);
      }
      ctx.textAlign = 'left';
      ctx.fillStyle = '#8c959f';
      ctx.fillText('time since start', 8, 14);
    }

    // The overlay: hovered and pinned events, and the hovered message's link.
    function drawOverlay() {
      octx.setTransform(dpr, 0, 0, dpr, 0, 0);
      octx.clearRect(0, 0, cssW, viewH);
      octx.save();
      octx.beginPath();
      octx.rect(gutter, AXIS_H, plotW, viewH - AXIS_H);
      octx.clip();
      const outline = (k, colour, width) => {
        const r = eventRect(k);
        if (!r) return;
        octx.strokeStyle = colour;
        octx.lineWidth = width;
        octx.strokeRect(r.x - width / 2, r.y - width / 2, Math.max(1, r.w) + width, r.h + width);
      };
      if (hover && hover.k !== undefined) {
        outline(hover.k, '#1f2328', 1.5);
        const p = m.partner[m.ID[hover.k]];
        if (p >= 0) {
          const kp = m.pos[p];
          outline(kp, '#1f2328', 1.5);
          const isSend = m.isSend[m.ID[hover.k]] === 1;
          const ks = isSend ? hover.k : kp;
          const kr = isSend ? kp : hover.k;
          const xa = X(m.S[ks]);
          const ya = eventMidY(ks);
          const xb = X(m.E[kr]);
          const yb = eventMidY(kr);
          octx.strokeStyle = '#cf222e';
          octx.fillStyle = '#cf222e';
          octx.lineWidth = 1.5;
          octx.beginPath();
          octx.moveTo(xa, ya);
          octx.lineTo(xb, yb);
          octx.stroke();
          octx.beginPath();
          arrowHead(octx, xa, ya, xb, yb, 6);
          octx.fill();
        }
      } else if (hover && hover.bin !== undefined && m.bins) {
        const x0 = X(hover.bin * m.bins.width);
        const x1 = X((hover.bin + 1) * m.bins.width);
        octx.strokeStyle = '#1f2328';
        octx.lineWidth = 1;
        octx.strokeRect(x0, rowY(hover.row) + 0.5, Math.max(1, x1 - x0), laneH - 1);
      }
      if (pinned >= 0) outline(pinned, '#cf222e', 2);
      octx.restore();
    }

    // An event's rect in canvas coordinates, or null when it is not drawn.
    function eventRect(k) {
      if (mode !== 'events') return null;
      const s = m.S[k];
      const e = m.E[k];
      let a = Math.max(s, v0);
      let b = Math.min(e, v1);
      let inside = false;
      for (const [ca, cb] of covered) {
        if (e >= ca && s <= cb) {
          a = Math.max(a, ca);
          b = Math.min(b, cb);
          inside = true;
          break;
        }
      }
      if (!inside || b < a) return null;
      const row = m.rowOfEvent[m.ID[k]];
      const y = rowY(row);
      if (y + laneH <= AXIS_H || y >= viewH) return null;
      const x = X(a);
      const dk = m.depth[k];
      const sh = (laneH - 2 - (dk - 1)) / dk;
      return { x: x, y: y + 1 + m.level[k] * (sh + 1), w: Math.max(X(b) - x, 1 / dpr), h: sh };
    }

    function screenPositionOf(i) {
      if (!(i >= 0 && i < m.n)) return null;
      const r = eventRect(m.pos[i]);
      if (!r) return null;
      const y = r.y + r.h / 2;
      if (y < AXIS_H || y > viewH) return null;
      const box = canvas.getBoundingClientRect();
      return { x: box.left + r.x + r.w / 2, y: box.top + y };
    }

    // reveal zooms to event i (original index) with context on both sides,
    // close enough that every event is drawn, and scrolls to its rank.
    function reveal(i) {
      if (!(i >= 0 && i < m.n)) return false;
      const k = m.pos[i];
      const row = m.rowOfEvent[i];
      const g = Math.floor(row / m.nl);
      const top = AXIS_H + g * groupH;
      const st = viewport.scrollTop;
      if (top - AXIS_H < st || top + groupH > st + viewH) viewport.scrollTop = Math.max(0, top - AXIS_H - groupH);
      scrollY = viewport.scrollTop;
      const mid = (m.S[k] + m.E[k]) / 2;
      let span = Math.max(3 * (m.E[k] - m.S[k]), 1000);
      for (let tries = 0; tries < 60; tries++) {
        [v0, v1] = clampView(mid - span / 2, mid + span / 2);
        const [r0, r1] = visibleRows();
        covered = coveredSegments();
        if (countVisible(r0, r1) <= opt.detailLimit || span <= 10) break;
        span /= 2;
      }
      draw();
      return eventRect(k) !== null;
    }

    // ------------------------------------------------------------ hover

    // hitEvent finds the event of a row at time t (within tol ns), in
    // whose band y (px below the row's top) falls if one is there: the
    // shortest that contains t, else the nearest.
    function hitEvent(row, t, tol, y) {
      const off = m.rowOff[row];
      const end = m.rowOff[row + 1];
      if (off === end) return -1;
      let k = lowerBound(m.S, off, end, t - tol - m.rowMaxDur[row]);
      const hi = upperBound(m.S, k, end, t + tol);
      let best = -1;
      let bestScore = Infinity;
      for (; k < hi; k++) {
        const s = m.S[k];
        const e = m.E[k];
        if (e < t - tol) continue;
        const d = t < s ? s - t : t > e ? t - e : 0;
        const dk = m.depth[k];
        const band = Math.max(0, Math.min(dk - 1, Math.floor(((y - 1) * dk) / (laneH - 1))));
        const score = (m.level[k] === band ? 0 : 1e36) + (d > 0 ? 1e18 + d : e - s);
        if (score < bestScore) {
          bestScore = score;
          best = k;
        }
      }
      if (best >= 0 && !eventRect(best)) return -1;
      return best;
    }

    function hitTest(clientX, clientY) {
      const box = canvas.getBoundingClientRect();
      const x = clientX - box.left;
      const y = clientY - box.top;
      if (x < gutter || x > gutter + plotW) return null;
      const row = rowAt(y);
      if (row < 0) return null;
      const t = T(x);
      const inCovered = covered.some(([a, b]) => t >= a && t <= b);
      if (mode === 'events' && inCovered) {
        const k = hitEvent(row, t, (3 * (v1 - v0)) / plotW, y - rowY(row));
        return k >= 0 ? { k: k } : null;
      }
      if (m.bins) {
        const b = Math.floor(t / m.bins.width);
        const br = m.bins.rows[row];
        if (br && b >= 0 && b < m.bins.n && br.busy[b] > 0) return { row: row, bin: b };
      }
      return null;
    }

    function eventFields(k) {
      const i = m.ID[k];
      const c = m.col;
      const lane = m.lanes[m.cLane[i]];
      const g = Math.floor(m.rowOfEvent[i] / m.nl);
      const host = m.hosts[g];
      const rows = [['kind', lane], ['rank', m.ranks[g] + (host ? ' (' + host + ')' : '')]];
      const d = m.cDur[i];
      rows.push(['start', F.duration(m.S[k])]);
      rows.push(['duration', F.duration(d)]);
      const bytes = c.bytes ? c.bytes[i] : 0;
      if (bytes > 0) {
        rows.push(['bytes', F.bytes(bytes) + (bytes >= 1024 ? ' (' + F.int(bytes) + ' B)' : '')]);
        if (d > 0) rows.push(['bandwidth', F.bandwidth(bytes, d)]);
      }
      if (c.peer && c.peer[i] >= 0) {
        const pg = m.ranks.indexOf(c.peer[i]);
        const ph = pg >= 0 ? m.hosts[pg] : '';
        rows.push(['peer', 'rank ' + c.peer[i] + (ph && ph !== host ? ' (' + ph + ')' : '')]);
      }
      if (c.wait && (lane === 'recv' || c.wait[i] > 0)) rows.push(['wait', F.duration(c.wait[i] || 0)]);
      if (c.seq && c.seq[i] >= 0 && lane !== 'step' && lane !== 'compute') rows.push(['seq', String(c.seq[i])]);
      if (c.algo && c.algo[i] >= 0 && m.algos[c.algo[i]] !== undefined && m.algos[c.algo[i]] !== '') rows.push(['algo', m.algos[c.algo[i]]]);
      if (c.comm && c.comm[i] >= 0 && m.comms[c.comm[i]] !== undefined) rows.push(['comm', m.comms[c.comm[i]]]);
      if (c.step && c.step[i] >= 0) rows.push(['step', String(c.step[i])]);
      const nm = m.names[m.cName[i]];
      return { title: nm === undefined ? '?' : nm, rows: rows };
    }

    function binFields(row, b) {
      const br = m.bins.rows[row];
      const g = Math.floor(row / m.nl);
      const nm = br.name[b] >= 0 ? m.names[br.name[b]] : undefined;
      const rows = [
        ['kind', m.lanes[row % m.nl] + ' (summary)'],
        ['rank', String(m.ranks[g]) + (m.hosts[g] ? ' (' + m.hosts[g] + ')' : '')],
        ['time', F.duration(b * m.bins.width) + ' – ' + F.duration((b + 1) * m.bins.width)],
        ['busy', F.percent(br.busy[b] / 1000)],
      ];
      if (nm !== undefined) rows.push(['mostly', nm]);
      return { title: nm !== undefined ? nm : m.lanes[row % m.nl], rows: rows };
    }

    function fill(box, f) {
      box.textContent = '';
      box.appendChild(el('div', 'cp-tl-tip-title', f.title));
      const dl = el('dl', 'cp-tl-fields');
      for (const [k, v] of f.rows) {
        dl.appendChild(el('dt', null, k));
        dl.appendChild(el('dd', null, v));
      }
      box.appendChild(dl);
    }

    function showTooltip(h, clientX, clientY) {
      const f = h.k !== undefined ? eventFields(h.k) : binFields(h.row, h.bin);
      fill(tooltip, f);
      tooltipLines = [f.title].concat(f.rows.map(([k, v]) => k + ': ' + v));
      tooltip.hidden = false;
      const box = element.getBoundingClientRect();
      const tw = tooltip.offsetWidth;
      const th = tooltip.offsetHeight;
      let x = clientX - box.left + 14;
      let y = clientY - box.top + 14;
      if (x + tw > box.width) x = Math.max(0, clientX - box.left - tw - 14);
      if (y + th > box.height && clientY - box.top - th - 10 > 0) y = clientY - box.top - th - 10;
      tooltip.style.left = x + 'px';
      tooltip.style.top = y + 'px';
    }

    function hideTooltip() {
      tooltip.hidden = true;
      tooltipLines = [];
    }

    function setHover(h, clientX, clientY) {
      const same = h && hover && h.k === hover.k && h.bin === hover.bin && h.row === hover.row;
      hover = h;
      if (h) showTooltip(h, clientX, clientY);
      else hideTooltip();
      if (!same) invalidateOverlay();
    }

    function pin(k) {
      pinned = k;
      if (k < 0) {
        details.hidden = true;
        details.textContent = '';
      } else {
        const f = eventFields(k);
        const p = m.partner[m.ID[k]];
        if (p >= 0) {
          const pf = eventFields(m.pos[p]);
          const lane = m.lanes[m.cLane[p]];
          f.rows.push(['matching ' + lane, pf.rows.filter(([key]) => key === 'rank')[0][1] + ' at ' + F.duration(m.S[m.pos[p]]) + ', ' + F.duration(m.cDur[p])]);
        }
        f.rows.push(['event index', String(m.ID[k])]);
        fill(details, f);
        const close = el('button', 'cp-tl-btn cp-tl-close', '×');
        close.type = 'button';
        close.title = 'Unpin';
        close.addEventListener('click', () => pin(-1));
        details.prepend(close);
        details.hidden = false;
      }
      invalidateOverlay();
    }

    // ------------------------------------------------------------ input

    let drag = null;
    viewport.addEventListener('pointerdown', (e) => {
      if (e.button !== 0) return;
      drag = { x: e.clientX, y: e.clientY, v0: v0, v1: v1, top: viewport.scrollTop, moved: false };
      try {
        viewport.setPointerCapture(e.pointerId);
      } catch {
        // not an active pointer (a synthetic event): no capture needed
      }
      viewport.focus({ preventScroll: true });
    });
    viewport.addEventListener('pointermove', (e) => {
      if (drag) {
        const dx = e.clientX - drag.x;
        const dy = e.clientY - drag.y;
        if (!drag.moved && Math.abs(dx) + Math.abs(dy) > 3) {
          drag.moved = true;
          viewport.classList.add('cp-tl-dragging');
          setHover(null);
        }
        if (drag.moved) {
          const dt = (dx / plotW) * (drag.v1 - drag.v0);
          setView(drag.v0 - dt, drag.v1 - dt);
          viewport.scrollTop = drag.top - dy;
        }
        return;
      }
      setHover(hitTest(e.clientX, e.clientY), e.clientX, e.clientY);
    });
    const endDrag = (e) => {
      if (!drag) return;
      const click = !drag.moved;
      drag = null;
      viewport.classList.remove('cp-tl-dragging');
      if (click && e.type === 'pointerup') {
        const h = hitTest(e.clientX, e.clientY);
        pin(h && h.k !== undefined ? h.k : -1);
      }
    };
    viewport.addEventListener('pointerup', endDrag);
    viewport.addEventListener('pointercancel', endDrag);
    viewport.addEventListener('pointerleave', () => {
      if (!drag) setHover(null);
    });
    viewport.addEventListener('wheel', (e) => {
      const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? viewH : 1;
      const dx = e.deltaX * unit;
      const dy = e.deltaY * unit;
      e.preventDefault();
      if (Math.abs(dx) > Math.abs(dy)) {
        const dt = (dx / plotW) * (v1 - v0);
        setView(v0 + dt, v1 + dt);
      } else if (e.altKey) {
        viewport.scrollTop += dy;
      } else {
        const box = canvas.getBoundingClientRect();
        const x = Math.max(gutter, Math.min(gutter + plotW, e.clientX - box.left));
        zoomAround(T(x), Math.exp(Math.max(-3, Math.min(3, dy * 0.0015))));
      }
      setHover(null);
    }, { passive: false });
    viewport.addEventListener('dblclick', (e) => {
      e.preventDefault();
      setView(0, m.t1);
    });
    viewport.addEventListener('scroll', () => {
      scrollY = viewport.scrollTop;
      setHover(null);
      invalidate();
    });
    viewport.addEventListener('keydown', (e) => {
      const mid = (v0 + v1) / 2;
      const span = v1 - v0;
      if (e.key === '+' || e.key === '=') zoomAround(mid, 0.5);
      else if (e.key === '-' || e.key === '_') zoomAround(mid, 2);
      else if (e.key === '0') setView(0, m.t1);
      else if (e.key === 'ArrowLeft') setView(v0 - span / 5, v1 - span / 5);
      else if (e.key === 'ArrowRight') setView(v0 + span / 5, v1 + span / 5);
      else if (e.key === 'Escape') pin(-1);
      else return;
      e.preventDefault();
    });
    btnIn.addEventListener('click', () => zoomAround((v0 + v1) / 2, 0.5));
    btnOut.addEventListener('click', () => zoomAround((v0 + v1) / 2, 2));
    btnReset.addEventListener('click', () => setView(0, m.t1));
    select.addEventListener('change', () => setColorBy(select.value));
    if (typeof ResizeObserver === 'function') new ResizeObserver(() => invalidate()).observe(viewport);
    else window.addEventListener('resize', invalidate);

    // ------------------------------------------------------------ legend

    function buildLegend() {
      legend.textContent = '';
      if (colorBy === 'bandwidth') {
        legend.appendChild(el('span', 'cp-tl-legend-label', 'bandwidth'));
        legend.appendChild(el('span', 'cp-tl-legend-value', F.bandwidth(Math.pow(10, m.bwLo), 1)));
        const bar = el('span', 'cp-tl-ramp');
        bar.style.background = 'linear-gradient(to right, ' + ramp(RAMP).join(', ') + ')';
        legend.appendChild(bar);
        legend.appendChild(el('span', 'cp-tl-legend-value', F.bandwidth(Math.pow(10, m.bwHi), 1) + ' (log scale)'));
        const none = el('span', 'cp-tl-legend-item');
        const sw = el('span', 'cp-tl-swatch');
        sw.style.background = GREY;
        none.append(sw, document.createTextNode('no bytes'));
        legend.appendChild(none);
        legend.appendChild(el('span', 'cp-tl-legend-note', 'occupancy bins keep operation colours'));
        return;
      }
      const order = m.names.map((_, j) => j).filter((j) => m.nameCount[j] > 0).sort((a, b) => m.nameCount[b] - m.nameCount[a]);
      const shown = order.slice(0, 16);
      for (const j of shown) {
        const item = el('span', 'cp-tl-legend-item');
        const sw = el('span', 'cp-tl-swatch');
        sw.style.background = m.palette[j];
        item.append(sw, document.createTextNode(m.names[j]));
        legend.appendChild(item);
      }
      if (order.length > shown.length) legend.appendChild(el('span', 'cp-tl-legend-note', '+' + (order.length - shown.length) + ' more'));
    }

    buildLegend();
    draw();
    hook.mountMs = performance.now() - mountStart;
    return hook;
  }

  root.CommprofTimeline = {
    mount: mount,
    format: F && { duration: F.duration, bytes: F.bytes, bandwidth: F.bandwidth },
  };
})(typeof window !== 'undefined' ? window : globalThis);
