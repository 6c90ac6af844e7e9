/*
 * commprof timeline: interaction. Which event or bin is under the
 * pointer, its tooltip, the pinned event's details under the timeline, and
 * the handlers of the pointer, wheel, keys and toolbar that change the
 * view. Strings from the data reach the page only through textContent.
 *
 * Defines CommprofTimelineParts.interact; timeline.js says how the parts fit.
 */
(function (root) {
  'use strict';

  const P = root.CommprofTimelineParts;
  const F = root.CommprofFormat;
  const { lowerBound, upperBound } = P.data;
  const { T, rowY, rowAt, eventRect, invalidate, invalidateOverlay, setView, zoomAround, setColorBy } = P.view;
  const { el } = P.widget;

  // ---------------------------------------------------------------- hit

  // hitEvent finds the event of a row at time t (within tol ns), in
  // whose band y (px below the row's top) falls if one is there: the
  // shortest that contains t, else the nearest.
  function hitEvent(s, row, t, tol, y) {
    const m = s.m;
    const off = m.rowOff[row];
    const end = m.rowOff[row + 1];
    if (off === end) return -1;
    let k = lowerBound(m.S, off, end, t - tol - m.rowMaxDur[row]);
    const hi = upperBound(m.S, k, end, t + tol);
    let best = -1;
    let bestScore = Infinity;
    for (; k < hi; k++) {
      const st = m.S[k];
      const e = m.E[k];
      if (e < t - tol) continue;
      const d = t < st ? st - t : t > e ? t - e : 0;
      const dk = m.depth[k];
      const band = Math.max(0, Math.min(dk - 1, Math.floor(((y - 1) * dk) / (s.laneH - 1))));
      const score = (m.level[k] === band ? 0 : 1e36) + (d > 0 ? 1e18 + d : e - st);
      if (score < bestScore) {
        bestScore = score;
        best = k;
      }
    }
    if (best >= 0 && !eventRect(s, best)) return -1;
    return best;
  }

  // hitTest finds what is drawn at a client position: {k}, a sorted event
  // index, {row, bin}, a busy bin, or null.
  function hitTest(s, clientX, clientY) {
    const m = s.m;
    const box = s.ui.canvas.getBoundingClientRect();
    const x = clientX - box.left;
    const y = clientY - box.top;
    if (x < s.gutter || x > s.gutter + s.plotW) return null;
    const row = rowAt(s, y);
    if (row < 0) return null;
    const t = T(s, x);
    const inCovered = s.covered.some(([a, b]) => t >= a && t <= b);
    if (s.mode === 'events' && inCovered) {
      const k = hitEvent(s, row, t, (3 * (s.v1 - s.v0)) / s.plotW, y - rowY(s, row));
      return k >= 0 ? { k: k } : null;
    }
    if (m.bins) {
      const b = Math.floor(t / m.bins.width);
      const br = m.bins.rows[row];
      if (br && b >= 0 && b < m.bins.n && br.busy[b] > 0) return { row: row, bin: b };
    }
    return null;
  }

  // ---------------------------------------------------------------- fields

  // What the tooltip and the details say of sorted event k, and of bin b
  // of a row.
  function eventFields(m, k) {
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

  function binFields(m, row, b) {
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

  // ---------------------------------------------------------------- tooltip

  function showTooltip(s, h, clientX, clientY) {
    const tooltip = s.ui.tooltip;
    const f = h.k !== undefined ? eventFields(s.m, h.k) : binFields(s.m, h.row, h.bin);
    fill(tooltip, f);
    s.tooltipLines = [f.title].concat(f.rows.map(([k, v]) => k + ': ' + v));
    tooltip.hidden = false;
    const box = s.element.getBoundingClientRect();
    const tw = tooltip.offsetWidth;
    const th = tooltip.offsetHeight;
    let x = clientX - box.left + 14;
    let y = clientY - box.top + 14;
    if (x + tw > box.width) x = Math.max(0, clientX - box.left - tw - 14);
    if (y + th > box.height && clientY - box.top - th - 10 > 0) y = clientY - box.top - th - 10;
    tooltip.style.left = x + 'px';
    tooltip.style.top = y + 'px';
  }

  function hideTooltip(s) {
    s.ui.tooltip.hidden = true;
    s.tooltipLines = [];
  }

  // setHover shows h's tooltip (null: none) and outlines it.
  function setHover(s, h, clientX, clientY) {
    const hover = s.hover;
    const same = h && hover && h.k === hover.k && h.bin === hover.bin && h.row === hover.row;
    s.hover = h;
    if (h) showTooltip(s, h, clientX, clientY);
    else hideTooltip(s);
    if (!same) invalidateOverlay(s);
  }

  // ---------------------------------------------------------------- pin

  // pin shows sorted event k's details, with its matching send or
  // receive, under the timeline; -1 unpins.
  function pin(s, k) {
    const m = s.m;
    const details = s.ui.details;
    s.pinned = k;
    if (k < 0) {
      details.hidden = true;
      details.textContent = '';
    } else {
      const f = eventFields(m, k);
      const p = m.partner[m.ID[k]];
      if (p >= 0) {
        const pf = eventFields(m, m.pos[p]);
        const lane = m.lanes[m.cLane[p]];
        f.rows.push(['matching ' + lane, pf.rows.filter(([key]) => key === 'rank')[0][1] + ' at ' + F.duration(m.S[m.pos[p]]) + ', ' + F.duration(m.cDur[p])]);
      }
      f.rows.push(['event index', String(m.ID[k])]);
      fill(details, f);
      const close = el('button', 'cp-tl-btn cp-tl-close', '×');
      close.type = 'button';
      close.title = 'Unpin';
      close.addEventListener('click', () => pin(s, -1));
      details.prepend(close);
      details.hidden = false;
    }
    invalidateOverlay(s);
  }

  // ---------------------------------------------------------------- input

  // listen attaches the handlers of the pointer, wheel, scroll, keys,
  // toolbar and resizing.
  function listen(s) {
    const { viewport, canvas, btnIn, btnOut, btnReset, select } = s.ui;
    viewport.addEventListener('pointerdown', (e) => {
      if (e.button !== 0) return;
      s.drag = { x: e.clientX, y: e.clientY, v0: s.v0, v1: s.v1, top: viewport.scrollTop, moved: false };
      try {
        viewport.setPointerCapture(e.pointerId);
      } catch {
        // not an active pointer (a synthetic event): no capture needed
      }
      viewport.focus({ preventScroll: true });
    });
    viewport.addEventListener('pointermove', (e) => {
      const drag = s.drag;
      if (drag) {
        const dx = e.clientX - drag.x;
        const dy = e.clientY - drag.y;
        if (!drag.moved && Math.abs(dx) + Math.abs(dy) > 3) {
          drag.moved = true;
          viewport.classList.add('cp-tl-dragging');
          setHover(s, null);
        }
        if (drag.moved) {
          const dt = (dx / s.plotW) * (drag.v1 - drag.v0);
          setView(s, drag.v0 - dt, drag.v1 - dt);
          viewport.scrollTop = drag.top - dy;
        }
        return;
      }
      setHover(s, hitTest(s, e.clientX, e.clientY), e.clientX, e.clientY);
    });
    const endDrag = (e) => {
      if (!s.drag) return;
      const click = !s.drag.moved;
      s.drag = null;
      viewport.classList.remove('cp-tl-dragging');
      if (click && e.type === 'pointerup') {
        const h = hitTest(s, e.clientX, e.clientY);
        pin(s, h && h.k !== undefined ? h.k : -1);
      }
    };
    viewport.addEventListener('pointerup', endDrag);
    viewport.addEventListener('pointercancel', endDrag);
    viewport.addEventListener('pointerleave', () => {
      if (!s.drag) setHover(s, null);
    });
    viewport.addEventListener('wheel', (e) => {
      const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? s.viewH : 1;
      const dx = e.deltaX * unit;
      const dy = e.deltaY * unit;
      e.preventDefault();
      if (Math.abs(dx) > Math.abs(dy)) {
        const dt = (dx / s.plotW) * (s.v1 - s.v0);
        setView(s, s.v0 + dt, s.v1 + dt);
      } else if (e.altKey) {
        viewport.scrollTop += dy;
      } else {
        const box = canvas.getBoundingClientRect();
        const x = Math.max(s.gutter, Math.min(s.gutter + s.plotW, e.clientX - box.left));
        zoomAround(s, T(s, x), Math.exp(Math.max(-3, Math.min(3, dy * 0.0015))));
      }
      setHover(s, null);
    }, { passive: false });
    viewport.addEventListener('dblclick', (e) => {
      e.preventDefault();
      setView(s, 0, s.m.t1);
    });
    viewport.addEventListener('scroll', () => {
      s.scrollY = viewport.scrollTop;
      setHover(s, null);
      invalidate(s);
    });
    viewport.addEventListener('keydown', (e) => {
      const mid = (s.v0 + s.v1) / 2;
      const span = s.v1 - s.v0;
      if (e.key === '+' || e.key === '=') zoomAround(s, mid, 0.5);
      else if (e.key === '-' || e.key === '_') zoomAround(s, mid, 2);
      else if (e.key === '0') setView(s, 0, s.m.t1);
      else if (e.key === 'ArrowLeft') setView(s, s.v0 - span / 5, s.v1 - span / 5);
      else if (e.key === 'ArrowRight') setView(s, s.v0 + span / 5, s.v1 + span / 5);
      else if (e.key === 'Escape') pin(s, -1);
      else return;
      e.preventDefault();
    });
    btnIn.addEventListener('click', () => zoomAround(s, (s.v0 + s.v1) / 2, 0.5));
    btnOut.addEventListener('click', () => zoomAround(s, (s.v0 + s.v1) / 2, 2));
    btnReset.addEventListener('click', () => setView(s, 0, s.m.t1));
    select.addEventListener('change', () => setColorBy(s, select.value));
    if (typeof ResizeObserver === 'function') new ResizeObserver(() => invalidate(s)).observe(viewport);
    else window.addEventListener('resize', () => invalidate(s));
  }

  P.interact = { pin, hideTooltip, listen };
})(typeof window !== 'undefined' ? window : globalThis);
