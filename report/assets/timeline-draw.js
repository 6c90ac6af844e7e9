/*
 * commprof timeline: drawing. draw paints one frame of the view on the
 * canvas — rank backgrounds, grid, occupancy bins or events with their
 * labels and message lines, the gutter of rank and lane names, the time
 * axis — and updates the status line and the hook; drawOverlay paints the
 * hovered and pinned events on the canvas above it. Strings from the data
 * reach the canvas only through fillText.
 *
 * The drawing loops allocate nothing per event: rects go into the
 * per-colour arrays of s.batches, reused from frame to frame, and are
 * filled one colour at a time.
 *
 * Defines CommprofTimelineParts.draw; timeline.js says how the parts fit.
 */
(function (root) {
  'use strict';

  const P = root.CommprofTimelineParts;
  const F = root.CommprofFormat;
  const { MAX_LEVELS, lowerBound } = P.data;
  const { AXIS_H, GROUP_GAP, X, rowY, visibleRows, resize, coveredSegments, uncoveredSegments, countVisible, eventMidY, eventRect } = P.view;

  // ---------------------------------------------------------------- axis

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

  // ---------------------------------------------------------------- frame

  function draw(s) {
    if (s.raf) {
      cancelAnimationFrame(s.raf);
      s.raf = 0;
    }
    const t0 = performance.now();
    resize(s);
    const ui = s.ui;
    const ctx = ui.ctx;
    const m = s.m;
    const { v0, v1, plotW, gutter, viewH, groupH } = s;
    s.scrollY = ui.viewport.scrollTop;
    const W = s.cssW;
    ctx.setTransform(s.dpr, 0, 0, s.dpr, 0, 0);
    ctx.clearRect(0, 0, W, viewH);
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, W, viewH);
    const [r0, r1] = visibleRows(s);

    // Rank groups on alternating backgrounds.
    for (let g = r0 / m.nl; g < r1 / m.nl; g++) {
      const y = rowY(s, g * m.nl) - GROUP_GAP / 2;
      ctx.fillStyle = g % 2 ? '#f6f7f9' : '#ffffff';
      ctx.fillRect(0, y, W, groupH);
    }

    // Grid lines at the ticks.
    const step = niceStep(Math.max(1, ((v1 - v0) * 110) / plotW));
    const fmt = tickFormat(step, v1);
    const firstTick = Math.ceil(v0 / step) * step;
    ctx.fillStyle = '#e4e7eb';
    for (let t = firstTick; t <= v1; t += step) ctx.fillRect(Math.round(X(s, t)) - 0.5, AXIS_H, 1, viewH - AXIS_H);

    s.covered = coveredSegments(s);
    const covered = s.covered;
    const nVisible = countVisible(s, r0, r1);
    const canDetail = covered.length > 0 && (nVisible <= s.opt.detailLimit || !m.bins);
    const mode = canDetail ? 'events' : 'bins';
    s.mode = mode;
    let drawn = 0;
    let links = 0;
    ctx.save();
    ctx.beginPath();
    ctx.rect(gutter, AXIS_H, plotW, viewH - AXIS_H);
    ctx.clip();
    if (mode === 'bins') {
      drawBins(s, r0, r1);
    } else {
      const unc = uncoveredSegments(s, covered);
      if (unc.length) {
        // Summary-only stretches: a grey wash, then the bins.
        ctx.save();
        ctx.fillStyle = 'rgba(110,119,129,0.08)';
        for (const [a, b] of unc) ctx.fillRect(X(s, a), AXIS_H, X(s, b) - X(s, a), viewH - AXIS_H);
        clipTo(s, ctx, unc, AXIS_H);
        drawBins(s, r0, r1);
        ctx.restore();
      }
      ctx.save();
      clipTo(s, ctx, covered, AXIS_H);
      s.linkCands.length = 0;
      s.linkOverflow = false;
      drawn = drawEvents(s, r0, r1, covered);
      links = drawLinks(s, s.linkCands, s.linkOverflow);
      ctx.restore();
    }
    ctx.restore();

    drawGutter(s, r0, r1);
    drawAxis(s, step, fmt, firstTick);

    const hook = s.hook;
    hook.drawnEvents = drawn;
    hook.mode = mode;
    ui.range.textContent = F.duration(v0) + ' – ' + F.duration(v1) + '  (' + F.duration(v1 - v0) + ')';
    let text;
    if (mode === 'bins') {
      text = covered.length ? F.int(nVisible) + ' events in view: showing occupancy; zoom in for each event' : 'occupancy only: every event is kept only in the marked windows';
    } else {
      text = F.int(drawn) + ' events';
      if (links > 0) text += ', ' + F.int(links) + ' messages';
      else if (links < 0) text += '; zoom in for message lines';
    }
    if (m.truncated > 0) text += ' · ' + F.int(m.truncated) + ' events outside the windows are summarised only';
    P.detail.wantDetail(s);
    if (s.fetching) text += ' · loading every event of this span…';
    else if (s.detailError) text += ' · ' + s.detailError;
    ui.status.textContent = text;
    drawOverlay(s);
    hook.lastDrawMs = performance.now() - t0;
    hook.ready = true;
  }

  function clipTo(s, c, segs, top) {
    c.beginPath();
    for (const [a, b] of segs) c.rect(X(s, a), top, X(s, b) - X(s, a), s.viewH - top);
    c.clip();
  }

  function flushBatches(s, c) {
    const pal = s.m.palette;
    const batches = s.batches;
    for (let ci = 0; ci < batches.length; ci++) {
      const b = batches[ci];
      if (!b.length) continue;
      c.fillStyle = pal[ci];
      for (let j = 0; j < b.length; j += 4) c.fillRect(b[j], b[j + 1], b[j + 2], b[j + 3]);
      b.length = 0;
    }
  }

  // ---------------------------------------------------------------- bins

  // Bins: per device pixel column, the mean occupancy as bar height and
  // the busiest bin's name as colour; equal neighbours share one rect.
  function drawBins(s, r0, r1) {
    const m = s.m;
    const bins = m.bins;
    if (!bins) return;
    const { v0, v1, plotW, gutter, laneH, viewH, dpr, batches } = s;
    const bw = bins.width;
    const b0 = Math.max(0, Math.floor(v0 / bw));
    const b1 = Math.min(bins.n, Math.ceil(v1 / bw));
    const scale = plotW / (v1 - v0);
    const hMax = laneH - 2;
    for (let row = r0; row < r1; row++) {
      const br = bins.rows[row];
      if (!br) continue;
      const y0 = rowY(s, row);
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
    flushBatches(s, s.ui.ctx);
  }

  // ---------------------------------------------------------------- events

  // Events: every event in the visible rows and time, with sub-pixel
  // events merged into one rect per pixel run. In a row whose events
  // overlap, each event keeps to its level (a thinner band). Returns how
  // many it drew; the ones with a link go into s.linkCands for drawLinks.
  function drawEvents(s, r0, r1, cov) {
    const m = s.m;
    const { v0, v1, plotW, gutter, laneH, viewH, dpr, batches, linkCands } = s;
    const ctx = s.ui.ctx;
    const S = m.S;
    const E = m.E;
    const level = m.level;
    const colour = s.colorBy === 'bandwidth' ? m.colBw : m.colName;
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
    const cap = 2 * s.opt.linkLimit + 2;
    let drawn = 0;
    let lastColour = -1;
    for (let row = r0; row < r1; row++) {
      const off = m.rowOff[row];
      const end = m.rowOff[row + 1];
      if (off === end) continue;
      const y0 = rowY(s, row);
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
        const st = S[k];
        if (!one) {
          let inside = false;
          for (let j = 0; j < cov.length; j++) {
            if (e >= cov[j][0] && st <= cov[j][1]) {
              inside = true;
              break;
            }
          }
          if (!inside) continue;
        }
        drawn++;
        if (partner[ID[k]] >= 0 && !s.linkOverflow) {
          if (linkCands.length < cap) linkCands.push(k);
          else s.linkOverflow = true;
        }
        const l = level[k];
        const dk = depth[k];
        const sh = (laneH - 2 - (dk - 1)) / dk;
        const y = y0 + 1 + l * (sh + 1);
        const x0 = gutter + (st - v0) * scale;
        const x1 = gutter + (e - v0) * scale;
        const w = x1 - x0;
        if (w < 1 && x0 - px1[l] < 1 && py[l] === y && ph[l] === sh) {
          if (x1 > px1[l]) px1[l] = x1;
          if (e - st > pd[l]) {
            pd[l] = e - st;
            pc[l] = colour[k];
          }
          continue;
        }
        put(l);
        px0[l] = x0;
        py[l] = y;
        ph[l] = sh;
        pd[l] = e - st;
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
    flushBatches(s, ctx);
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
        let text = eventLabel(m, k);
        const maxChars = Math.floor((w - 6) / 5.6);
        if (maxChars < 2) continue;
        if (text.length > maxChars) text = text.slice(0, maxChars - 1) + '…';
        ctx.fillStyle = m.textOn[colour[k]];
        ctx.fillText(text, x0 + 3, labels[j + 3] + 0.5);
      }
    }
    return drawn;
  }

  function eventLabel(m, k) {
    const i = m.ID[k];
    const nm = m.names[m.cName[i]];
    const name = nm === undefined ? '?' : nm;
    const stepCol = m.col.step;
    if (m.lanes[m.cLane[i]] === 'step' && stepCol && stepCol[i] >= 0) return name === 'step' ? 'step ' + stepCol[i] : name + ' ' + stepCol[i];
    return name;
  }

  // ---------------------------------------------------------------- links

  // Links of the events drawn (cands, sorted indices), when few enough
  // are in view to be told apart: from the start of the send to the end
  // of its receive. Returns how many, or -1 when there are too many.
  function drawLinks(s, cands, overflow) {
    if (overflow) return -1;
    if (!cands.length) return 0;
    const m = s.m;
    const ctx = s.ui.ctx;
    const viewH = s.viewH;
    const drawnIDs = new Set();
    for (const k of cands) drawnIDs.add(m.ID[k]);
    const pairs = [];
    for (const k of cands) {
      const i = m.ID[k];
      const p = m.partner[i];
      if (m.isSend[i]) pairs.push(k, m.pos[p]);
      else if (!drawnIDs.has(p)) pairs.push(m.pos[p], k);
    }
    if (pairs.length / 2 > s.opt.linkLimit) return -1;
    ctx.save();
    ctx.strokeStyle = 'rgba(45,50,60,0.45)';
    ctx.fillStyle = 'rgba(45,50,60,0.7)';
    ctx.lineWidth = 1;
    ctx.beginPath();
    const heads = [];
    for (let j = 0; j < pairs.length; j += 2) {
      const a = pairs[j];
      const b = pairs[j + 1];
      const ya = eventMidY(s, a);
      const yb = eventMidY(s, b);
      if ((ya < AXIS_H && yb < AXIS_H) || (ya > viewH && yb > viewH)) continue;
      const xa = X(s, m.S[a]);
      const xb = X(s, m.E[b]);
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

  // ---------------------------------------------------------------- gutter

  // fit shortens text with an ellipsis to at most w px in ctx's font.
  function fit(ctx, text, w) {
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
  function measureGutter(s) {
    const ctx = s.ui.ctx;
    ctx.font = '9.5px system-ui, -apple-system, "Segoe UI", sans-serif';
    const lanesW = s.laneH >= 9 ? Math.max(0, ...s.m.lanes.map((l) => ctx.measureText(l).width)) : 0;
    s.hostW = Math.max(20, s.gutter - 8 - 8 - lanesW - 6);
  }

  function drawGutter(s, r0, r1) {
    if (!s.hostW) measureGutter(s);
    const m = s.m;
    const ctx = s.ui.ctx;
    const { gutter, laneH, viewH, groupH } = s;
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, AXIS_H, gutter, viewH - AXIS_H);
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, AXIS_H, gutter, viewH - AXIS_H);
    ctx.clip();
    for (let g = r0 / m.nl; g < r1 / m.nl; g++) {
      const y = rowY(s, g * m.nl);
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
        ctx.fillText(fit(ctx, host, s.hostW), 8, y + laneH * 1.5);
      }
      if (laneH >= 9) {
        ctx.textAlign = 'right';
        ctx.fillStyle = '#8c959f';
        ctx.font = '9.5px system-ui, -apple-system, "Segoe UI", sans-serif';
        for (let l = 0; l < m.nl; l++) ctx.fillText(m.lanes[l], gutter - 8, y + l * laneH + laneH / 2);
      }
      ctx.fillStyle = '#d0d7de';
      ctx.fillRect(0, y + m.nl * laneH + GROUP_GAP / 2 - 0.5, s.cssW, 0.5);
    }
    ctx.restore();
    ctx.fillStyle = '#d0d7de';
    ctx.fillRect(gutter - 0.5, AXIS_H, 1, viewH - AXIS_H);
  }

  function drawAxis(s, step, fmt, firstTick) {
    const ctx = s.ui.ctx;
    const { cssW, gutter, plotW } = s;
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, cssW, AXIS_H);
    // Where every event is known.
    ctx.fillStyle = 'rgba(9,105,218,0.28)';
    for (const [a, b] of coveredSegments(s)) {
      const xa = Math.max(gutter, X(s, a));
      const xb = Math.min(gutter + plotW, X(s, b));
      if (xb > xa) ctx.fillRect(xa, AXIS_H - 5, Math.max(1, xb - xa), 4);
    }
    ctx.fillStyle = '#d0d7de';
    ctx.fillRect(0, AXIS_H - 0.5, cssW, 1);
    ctx.fillStyle = '#57606a';
    ctx.font = '10.5px system-ui, -apple-system, "Segoe UI", sans-serif';
    ctx.textBaseline = 'alphabetic';
    ctx.textAlign = 'center';
    for (let t = firstTick; t <= s.v1; t += step) {
      const x = Math.round(X(s, t)) - 0.5;
      ctx.fillRect(x, AXIS_H - 9, 1, 4);
      if (x > gutter + 20 && x < cssW - 20) ctx.fillText(fmt(t), x, 14);
    }
    ctx.textAlign = 'left';
    ctx.fillStyle = '#8c959f';
    ctx.fillText('time since start', 8, 14);
  }

  // ---------------------------------------------------------------- overlay

  // The overlay: hovered and pinned events, and the hovered message's link.
  function drawOverlay(s) {
    const m = s.m;
    const octx = s.ui.octx;
    const hover = s.hover;
    const { gutter, plotW, viewH } = s;
    octx.setTransform(s.dpr, 0, 0, s.dpr, 0, 0);
    octx.clearRect(0, 0, s.cssW, viewH);
    octx.save();
    octx.beginPath();
    octx.rect(gutter, AXIS_H, plotW, viewH - AXIS_H);
    octx.clip();
    const outline = (k, colour, width) => {
      const r = eventRect(s, k);
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
        const xa = X(s, m.S[ks]);
        const ya = eventMidY(s, ks);
        const xb = X(s, m.E[kr]);
        const yb = eventMidY(s, kr);
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
      const x0 = X(s, hover.bin * m.bins.width);
      const x1 = X(s, (hover.bin + 1) * m.bins.width);
      octx.strokeStyle = '#1f2328';
      octx.lineWidth = 1;
      octx.strokeRect(x0, rowY(s, hover.row) + 0.5, Math.max(1, x1 - x0), s.laneH - 1);
    }
    if (s.pinned >= 0) outline(s.pinned, '#cf222e', 2);
    octx.restore();
  }

  P.draw = { draw, drawOverlay };
})(typeof window !== 'undefined' ? window : globalThis);
