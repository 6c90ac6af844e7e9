/*
 * commprof timeline: the data (docs/web.md). prepare checks the data a
 * page passes to CommprofTimeline.mount and indexes it for drawing; with
 * it, the colours of operations and of the bandwidth ramp, and the binary
 * searches over sorted starts. Pure: no DOM, no view.
 *
 * Defines CommprofTimelineParts.data; timeline.js says how the parts fit.
 */
(function (root) {
  'use strict';

  const P = root.CommprofTimelineParts || (root.CommprofTimelineParts = {});

  const MAX_LEVELS = 3; // levels in a row whose events overlap

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

  P.data = { MAX_LEVELS, GREY, RAMP, ramp, lowerBound, upperBound, prepare };
})(typeof window !== 'undefined' ? window : globalThis);
