/*
 * commprof timeline: the view. What is shown — the span of time [v0, v1],
 * the ranks scrolled into view, the colouring — and where things are on
 * the canvas: the layout of rows, time ↔ x, the rows in view, the spans
 * where every event is known, an event's rect. Changing the view asks for
 * a frame (timeline-draw.js).
 *
 * Defines CommprofTimelineParts.view; timeline.js says how the parts fit.
 */
(function (root) {
  'use strict';

  const P = root.CommprofTimelineParts;
  const { lowerBound } = P.data;

  const AXIS_H = 30; // px, the time axis
  const GROUP_GAP = 6; // px between ranks

  // ---------------------------------------------------------------- layout

  // The heights of the widget, fixed at mount: a row (rank, lane) is laneH
  // px, a rank's group of rows groupH, everything contentH, and the
  // viewport viewH, which scrolls when contentH is taller.
  function layout(opt, m) {
    const laneH = opt.laneHeight;
    const groupH = m.nl * laneH + GROUP_GAP;
    const contentH = AXIS_H + m.ranks.length * groupH + 2;
    const viewH = Math.max(AXIS_H + groupH, Math.min(contentH, opt.maxHeight));
    return { laneH: laneH, groupH: groupH, contentH: contentH, viewH: viewH, gutter: opt.gutter };
  }

  // Time (ns) to x and back, in CSS px of the canvas.
  const X = (s, t) => s.gutter + ((t - s.v0) / (s.v1 - s.v0)) * s.plotW;
  const T = (s, x) => s.v0 + ((x - s.gutter) / s.plotW) * (s.v1 - s.v0);

  // The top of a row (rank position × lanes + lane) on the canvas.
  const rowY = (s, row) => AXIS_H + Math.floor(row / s.m.nl) * s.groupH + (row % s.m.nl) * s.laneH + GROUP_GAP / 2 - s.scrollY;

  function rowAt(s, y) {
    const cy = y + s.scrollY - AXIS_H - GROUP_GAP / 2;
    if (cy < 0 || y < AXIS_H) return -1;
    const g = Math.floor(cy / s.groupH);
    const l = Math.floor((cy - g * s.groupH) / s.laneH);
    if (g >= s.m.ranks.length || l >= s.m.nl) return -1;
    return g * s.m.nl + l;
  }

  // The rows [r0, r1) of the ranks scrolled into view.
  function visibleRows(s) {
    const st = s.scrollY;
    const g0 = Math.max(0, Math.floor((st - GROUP_GAP) / s.groupH));
    const g1 = Math.min(s.m.ranks.length - 1, Math.floor((st + s.viewH - AXIS_H) / s.groupH));
    return [g0 * s.m.nl, (g1 + 1) * s.m.nl];
  }

  // The canvases' size: the viewport's width at the device's pixel ratio.
  function resize(s) {
    const ui = s.ui;
    const w = Math.max(s.gutter + 50, ui.viewport.clientWidth);
    const r = window.devicePixelRatio || 1;
    if (w === s.cssW && r === s.dpr && ui.canvas.width) return;
    s.cssW = w;
    s.dpr = r;
    s.plotW = s.cssW - s.gutter - 8;
    for (const c of [ui.canvas, ui.overlay]) {
      c.width = Math.round(s.cssW * s.dpr);
      c.height = Math.round(s.viewH * s.dpr);
      c.style.width = s.cssW + 'px';
      c.style.height = s.viewH + 'px';
    }
  }

  // ---------------------------------------------------------------- frames

  // A frame, or only the overlay's, at the next animation frame; several
  // changes before it share it.
  function invalidate(s) {
    if (!s.raf) s.raf = requestAnimationFrame(() => {
      s.raf = 0;
      P.draw.draw(s);
    });
  }

  function invalidateOverlay(s) {
    if (!s.overlayRaf) s.overlayRaf = requestAnimationFrame(() => {
      s.overlayRaf = 0;
      P.draw.drawOverlay(s);
    });
  }

  // ---------------------------------------------------------------- span

  function clampView(s, a, b) {
    const minSpan = 10;
    let span = Math.max(minSpan, Math.min(s.m.t1, b - a));
    a = Math.max(0, Math.min(a, s.m.t1 - span));
    return [a, a + span];
  }

  function setView(s, a, b) {
    [s.v0, s.v1] = clampView(s, a, b);
    invalidate(s);
  }

  function zoomAround(s, t, factor) {
    setView(s, t - (t - s.v0) * factor, t + (s.v1 - t) * factor);
  }

  function zoomTo(s, a, b) {
    [s.v0, s.v1] = clampView(s, +a, +b);
    P.draw.draw(s);
  }

  function setColorBy(s, v) {
    s.colorBy = v === 'bandwidth' ? 'bandwidth' : 'name';
    s.ui.select.value = s.colorBy;
    P.widget.buildLegend(s);
    P.draw.draw(s);
  }

  // Intersections of the view with the windows, where every event is known.
  function coveredSegments(s) {
    const out = [];
    for (const w of s.m.windows) {
      const a = Math.max(s.v0, w[0]);
      const b = Math.min(s.v1, w[1]);
      if (b > a) out.push([a, b]);
    }
    return out;
  }

  function uncoveredSegments(s, cov) {
    const out = [];
    let t = s.v0;
    for (const [a, b] of cov) {
      if (a > t) out.push([t, a]);
      t = b;
    }
    if (t < s.v1) out.push([t, s.v1]);
    return out;
  }

  // The events of rows [r0, r1) that the view's span holds.
  function countVisible(s, r0, r1) {
    const m = s.m;
    const v0 = s.v0;
    const v1 = s.v1;
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

  // ---------------------------------------------------------------- events

  // The vertical middle of event k's band, in canvas coordinates.
  function eventMidY(s, k) {
    const m = s.m;
    const row = m.rowOfEvent[m.ID[k]];
    const dk = m.depth[k];
    const sh = (s.laneH - 2 - (dk - 1)) / dk;
    return rowY(s, row) + 1 + m.level[k] * (sh + 1) + sh / 2;
  }

  // An event's rect in canvas coordinates, or null when it is not drawn.
  function eventRect(s, k) {
    if (s.mode !== 'events') return null;
    const m = s.m;
    const laneH = s.laneH;
    const se = m.S[k];
    const e = m.E[k];
    let a = Math.max(se, s.v0);
    let b = Math.min(e, s.v1);
    let inside = false;
    for (const [ca, cb] of s.covered) {
      if (e >= ca && se <= cb) {
        a = Math.max(a, ca);
        b = Math.min(b, cb);
        inside = true;
        break;
      }
    }
    if (!inside || b < a) return null;
    const row = m.rowOfEvent[m.ID[k]];
    const y = rowY(s, row);
    if (y + laneH <= AXIS_H || y >= s.viewH) return null;
    const x = X(s, a);
    const dk = m.depth[k];
    const sh = (laneH - 2 - (dk - 1)) / dk;
    return { x: x, y: y + 1 + m.level[k] * (sh + 1), w: Math.max(X(s, b) - x, 1 / s.dpr), h: sh };
  }

  function screenPositionOf(s, i) {
    if (!(i >= 0 && i < s.m.n)) return null;
    const r = eventRect(s, s.m.pos[i]);
    if (!r) return null;
    const y = r.y + r.h / 2;
    if (y < AXIS_H || y > s.viewH) return null;
    const box = s.ui.canvas.getBoundingClientRect();
    return { x: box.left + r.x + r.w / 2, y: box.top + y };
  }

  // reveal zooms to event i (original index) with context on both sides,
  // close enough that every event is drawn, and scrolls to its rank.
  function reveal(s, i) {
    const m = s.m;
    if (!(i >= 0 && i < m.n)) return false;
    const viewport = s.ui.viewport;
    const k = m.pos[i];
    const row = m.rowOfEvent[i];
    const g = Math.floor(row / m.nl);
    const top = AXIS_H + g * s.groupH;
    const st = viewport.scrollTop;
    if (top - AXIS_H < st || top + s.groupH > st + s.viewH) viewport.scrollTop = Math.max(0, top - AXIS_H - s.groupH);
    s.scrollY = viewport.scrollTop;
    const mid = (m.S[k] + m.E[k]) / 2;
    let span = Math.max(3 * (m.E[k] - m.S[k]), 1000);
    for (let tries = 0; tries < 60; tries++) {
      [s.v0, s.v1] = clampView(s, mid - span / 2, mid + span / 2);
      const [r0, r1] = visibleRows(s);
      s.covered = coveredSegments(s);
      if (countVisible(s, r0, r1) <= s.opt.detailLimit || span <= 10) break;
      span /= 2;
    }
    P.draw.draw(s);
    return eventRect(s, k) !== null;
  }

  P.view = {
    AXIS_H, GROUP_GAP, layout, X, T, rowY, rowAt, visibleRows, resize,
    invalidate, invalidateOverlay, clampView, setView, zoomAround, zoomTo, setColorBy,
    coveredSegments, uncoveredSegments, countVisible, eventMidY, eventRect, screenPositionOf, reveal,
  };
})(typeof window !== 'undefined' ? window : globalThis);
