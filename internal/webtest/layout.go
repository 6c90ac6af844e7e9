package webtest

// ClippedJS is a JavaScript expression for Options.Eval: the list of
// what a page draws outside the box meant for it, empty when nothing is
// clipped. It checks every ECharts chart (drawn at its box's size, each
// text — axis names, labels, legend items — inside the box) and every
// element of the page's cards and tables that cuts its own text short.
// A test asserts the list is empty at the width it cares about.
const ClippedJS = `(() => {
  const out = [];
  document.querySelectorAll('[data-chart]').forEach(el => {
    const ch = window.echarts && echarts.getInstanceByDom(el);
    if (!ch) return;
    const w = el.clientWidth, h = el.clientHeight;
    if (Math.abs(ch.getWidth() - w) > 2 || Math.abs(ch.getHeight() - h) > 2)
      out.push(el.id + ': drawn ' + ch.getWidth() + 'x' + ch.getHeight() + ' in a box of ' + w + 'x' + h);
    ch.getZr().storage.getDisplayList(true).forEach(d => {
      const txt = d.style && d.style.text;
      if (!txt || d.invisible || d.ignore) return;
      const r = d.getBoundingRect().clone();
      const m = d.getComputedTransform();
      if (m) r.applyTransform(m);
      if (r.x < -1 || r.y < -1 || r.x + r.width > w + 1 || r.y + r.height > h + 1)
        out.push(el.id + ': "' + txt + '" at ' + Math.round(r.x) + ',' + Math.round(r.y) + ' (' + Math.round(r.width) + ' wide) in ' + w + 'x' + h);
    });
  });
  document.querySelectorAll('.cp-card *, .cp-table th, .cp-subtitle, h1, h2, h3').forEach(el => {
    const cs = getComputedStyle(el);
    if (cs.overflow !== 'visible' && el.scrollWidth > el.clientWidth + 1)
      out.push('"' + el.textContent.trim() + '" is cut short (' + el.scrollWidth + ' px in ' + el.clientWidth + ')');
  });
  return out;
})()`
