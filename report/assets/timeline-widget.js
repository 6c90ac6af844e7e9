/*
 * commprof timeline: the widget's elements. build makes the toolbar (zoom
 * buttons, colour choice, the span shown, the status line), the legend,
 * the scrolling viewport with the canvas and its overlay, the tooltip and
 * the pinned event's details; buildLegend fills the legend for the
 * colouring chosen. Strings from the data reach the page only through
 * textContent.
 *
 * Defines CommprofTimelineParts.widget; timeline.js says how the parts fit.
 */
(function (root) {
  'use strict';

  const P = root.CommprofTimelineParts;
  const F = root.CommprofFormat;
  const { GREY, RAMP, ramp } = P.data;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // build empties element and builds the widget in it, lay.viewH high
  // (timeline-view.js's layout), and returns the elements the other parts
  // use, with the canvases' contexts.
  function build(element, lay) {
    const viewH = lay.viewH;
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
    spacer.style.height = Math.max(0, lay.contentH - viewH) + 'px';
    viewport.append(stage, spacer);
    const tooltip = el('div', 'cp-tl-tooltip');
    tooltip.hidden = true;
    const details = el('div', 'cp-tl-details');
    details.hidden = true;
    element.append(toolbar, legend, viewport, tooltip, details);
    const ctx = canvas.getContext('2d');
    const octx = overlay.getContext('2d');
    return { btnOut, btnIn, btnReset, select, range, status, legend, viewport, canvas, overlay, tooltip, details, ctx, octx };
  }

  // buildLegend shows the names of the run, most frequent first, in their
  // colours; or, coloured by bandwidth, the ramp and its range.
  function buildLegend(s) {
    const m = s.m;
    const legend = s.ui.legend;
    legend.textContent = '';
    if (s.colorBy === 'bandwidth') {
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

  P.widget = { el, build, buildLegend };
})(typeof window !== 'undefined' ? window : globalThis);
