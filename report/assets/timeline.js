/*
 * commprof timeline: every rank's steps, compute, collectives and messages
 * on one canvas, with no library. A page calls
 *
 *     CommprofTimeline.mount(element, data, options)
 *
 * where data is the JSON object described in docs/web.md. Strings that come
 * from traces (names, hosts, algorithms) reach the page only through
 * textContent or canvas fillText, never as HTML.
 *
 * The timeline is several plain scripts, each defining one part of the
 * global CommprofTimelineParts; a page runs them in this order (report/
 * assets.go joins them into one script), this file last:
 *
 *     timeline-data.js      data: checks the data and indexes it (prepare),
 *                           colours, binary searches
 *     timeline-view.js      view: the span shown, zoom, layout of rows,
 *                           time ↔ x, event rects, reveal
 *     timeline-widget.js    widget: the elements, the legend
 *     timeline-draw.js      draw: a frame (bins, events, links, gutter,
 *                           axis) and the overlay
 *     timeline-detail.js    detail: fetching the events of a span
 *     timeline-interact.js  interact: hit testing, tooltip, pinning, input
 *     timeline.js           mount: the state, the hook, CommprofTimeline
 *
 * The parts keep no state of their own: each function takes the state
 * of one mounted timeline, s, which mount builds below. A part uses the
 * parts before it directly and the ones after it (a view change asks for a
 * frame) through CommprofTimelineParts when called.
 */
(function (root) {
  'use strict';

  const P = root.CommprofTimelineParts;

  // Sizes, durations and rates as every commprof page prints them
  // (format.js, which a page inlines before the timeline).
  const F = root.CommprofFormat;

  function mount(element, data, options) {
    const mountStart = performance.now();
    const opt = Object.assign({ laneHeight: 14, maxHeight: 640, gutter: 132, detailLimit: 5000, linkLimit: 200, colorBy: 'name' }, options || {});
    let m;
    try {
      if (!F) throw new Error('commprof timeline: CommprofFormat is not defined: the page must load format.js before timeline.js');
      m = P.data.prepare(data);
    } catch (err) {
      element.textContent = String(err.message || err);
      element.classList.add('cp-tl-error');
      throw err;
    }

    const lay = P.view.layout(opt, m);
    if (getComputedStyle(element).position === 'static') element.style.position = 'relative';
    const ui = P.widget.build(element, lay);

    // The state of this timeline, which every part's functions take.
    const s = {
      element: element,
      opt: opt,
      m: m, // the data, prepared (timeline-data.js); replaced by detail fetched
      ui: ui, // the widget's elements and the canvases' contexts
      hook: null, // element.commprofTimeline

      // Layout, fixed at mount (timeline-view.js).
      laneH: lay.laneH,
      groupH: lay.groupH,
      viewH: lay.viewH,
      gutter: lay.gutter,

      // The view.
      v0: 0, // the span shown, ns
      v1: m.t1,
      colorBy: opt.colorBy === 'bandwidth' ? 'bandwidth' : 'name',
      cssW: 0, // canvas width, CSS px
      dpr: 1,
      scrollY: 0, // viewport.scrollTop, read once per change
      plotW: 1, // px right of the gutter
      mode: 'bins', // what the last frame drew: 'bins' or 'events'
      covered: [], // the last frame's spans where every event is known

      // The pointer.
      hover: null, // {k} sorted event index, or {row, bin}
      pinned: -1, // sorted event index
      tooltipLines: [],
      drag: null,

      // Frames.
      raf: 0,
      overlayRaf: 0,
      batches: m.palette.map(() => []), // per colour, rects to fill: x, y, w, h
      linkCands: [], // events drawn that have a link, for drawLinks
      linkOverflow: false,
      hostW: 0, // px for a host name in the gutter; 0 until measured

      // Detail on demand (timeline-detail.js).
      fetchTimer: 0,
      fetching: false,
      asked: null, // [from, to] of the last request
      detailError: '',
    };
    ui.select.value = s.colorBy;
    s.hook = {
      ready: false,
      drawnEvents: 0,
      mode: 'bins',
      lastDrawMs: 0,
      mountMs: 0,
      zoomTo: (a, b) => P.view.zoomTo(s, a, b),
      screenPositionOf: (i) => P.view.screenPositionOf(s, i),
      tooltipText: () => s.tooltipLines.join('\n'),
      reveal: (i) => P.view.reveal(s, i),
      view: () => [s.v0, s.v1],
      setColorBy: (v) => P.view.setColorBy(s, v),
      redraw: () => P.draw.draw(s),
      loading: false, // a span's events are being fetched (fetchDetail)
      detailLoads: 0, // spans of detail fetched so far
    };
    element.commprofTimeline = s.hook;

    P.interact.listen(s);
    P.widget.buildLegend(s);
    P.draw.draw(s);
    s.hook.mountMs = performance.now() - mountStart;
    return s.hook;
  }

  root.CommprofTimeline = {
    mount: mount,
    format: F && { duration: F.duration, bytes: F.bytes, bandwidth: F.bandwidth },
  };
})(typeof window !== 'undefined' ? window : globalThis);
