/*
 * commprof timeline: detail on demand. A page served with its run
 * (commprof serve) passes options.fetchDetail(from, to), which resolves to
 * the timeline data of that span with every event in it; when the view
 * holds stretches known only as occupancy, the span around it is fetched
 * and replaces the detail the page had.
 *
 * Defines CommprofTimelineParts.detail; timeline.js says how the parts fit.
 */
(function (root) {
  'use strict';

  const P = root.CommprofTimelineParts;
  const { prepare } = P.data;
  const { coveredSegments, invalidate } = P.view;

  // wantDetail, called by every frame, asks for the view's span 250 ms
  // after the view settles, unless every event of the view is known or
  // already asked for.
  function wantDetail(s) {
    if (typeof s.opt.fetchDetail !== 'function' || s.fetching || s.v1 - s.v0 >= s.m.t1 * 0.999) return;
    let known = 0;
    for (const [a, b] of coveredSegments(s)) known += b - a;
    if (known >= (s.v1 - s.v0) * 0.999 || (s.asked && s.asked[0] <= s.v0 && s.asked[1] >= s.v1)) return;
    clearTimeout(s.fetchTimer);
    s.fetchTimer = setTimeout(() => fetchDetail(s), 250);
  }

  // fetchDetail asks for the view and half a view either side.
  function fetchDetail(s) {
    const span = s.v1 - s.v0;
    const from = Math.max(0, s.v0 - span / 2);
    const to = Math.min(s.m.t1, s.v1 + span / 2);
    s.fetching = true;
    s.hook.loading = true;
    s.asked = [from, to];
    s.detailError = '';
    invalidate(s);
    Promise.resolve()
      .then(() => s.opt.fetchDetail(from, to))
      .then((d) => reload(s, d))
      .catch((err) => {
        s.detailError = 'could not load the span’s events: ' + (err && err.message ? err.message : String(err));
      })
      .finally(() => {
        s.fetching = false;
        s.hook.loading = false;
        invalidate(s);
      });
  }

  // reload replaces the data with d, of the same ranks and lanes.
  function reload(s, d) {
    const next = prepare(d);
    if (next.ranks.length !== s.m.ranks.length || next.nl !== s.m.nl) throw new Error('the detail is of another run');
    P.interact.pin(s, -1);
    s.hover = null;
    P.interact.hideTooltip(s);
    s.m = next;
    s.batches = s.m.palette.map(() => []);
    P.widget.buildLegend(s);
    s.hook.detailLoads++;
  }

  P.detail = { wantDetail };
})(typeof window !== 'undefined' ? window : globalThis);
