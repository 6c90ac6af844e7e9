// commprof report: draws the charts whose go-echarts options the page
// carries as JSON, mounts the timeline, and exposes
// window.commprofReport for tests ({ready, charts, drawn, errors}).
(function () {
  "use strict";
  var state = { ready: false, charts: 0, drawn: 0, errors: [] };
  window.commprofReport = state;

  var F = window.CommprofFormat; // format.js
  var formats = {
    ns: F.duration,
    bytes: F.bytes,
    gbps: F.gbps,
    count: F.number,
    pct: F.percent
  };
  var esc = function (s) { return echarts.format.encodeHTML(String(s)); };

  function cellValue(p) { return Array.isArray(p.value) ? p.value[2] : p.value; }

  function decorate(v, option) {
    var f = formats[v.format] || formats.count;
    option.tooltip = option.tooltip || {};
    var axes = [].concat(option.yAxis || []);
    var valueAxes = axes.filter(function (a) { return a && (a.type === "value" || a.type === "log"); });
    valueAxes.forEach(function (a) {
      a.axisLabel = Object.assign({}, a.axisLabel, { formatter: function (x) { return f(x); } });
      // Durations and sizes are whole ns and bytes: an axis of small or
      // zero values would otherwise tick at 0.2 ns, every label "0 ns".
      if ((v.format === "ns" || v.format === "bytes") && a.type === "value" && a.minInterval === undefined) a.minInterval = 1;
    });
    [].concat(option.visualMap || []).forEach(function (m) {
      if (m && m.dimension === undefined) m.formatter = function (x) { return f(x); };
    });
    switch (v.tooltip) {
      case "matrix":
        option.tooltip.formatter = function (p) {
          return "rank " + p.value[1] + " → rank " + p.value[0] + "<br><b>" + esc(f(cellValue(p))) + "</b> (" + esc(v.label) + ")";
        };
        break;
      case "namedmatrix":
        option.tooltip.formatter = function (p) {
          return esc(option.yAxis[0].data[p.value[1]]) + " → " + esc(option.xAxis[0].data[p.value[0]]) + "<br><b>" + esc(f(cellValue(p))) + "</b> (" + esc(v.label) + ")";
        };
        break;
      case "skew":
        option.tooltip.formatter = function (p) {
          var op = (v.labels || [])[p.value[0]] || "";
          return esc(op) + " #" + esc(option.xAxis[0].data[p.value[0]]) + "<br>rank " + p.value[1] + " arrived <b>" + esc(F.duration(cellValue(p))) + "</b> after the first";
        };
        break;
      case "opsize":
        option.tooltip.formatter = function (p) {
          return esc(option.yAxis[0].data[p.value[1]]) + " · " + esc(option.xAxis[0].data[p.value[0]]) + "<br><b>" + esc(F.duration(cellValue(p))) + "</b> in total";
        };
        break;
      case "busbw":
        option.tooltip.formatter = function (p) {
          return esc(p.seriesName) + "<br>" + esc(F.bytes(p.value[0])) + ": <b>" + esc(F.gbps(p.value[1])) + "</b>";
        };
        [].concat(option.xAxis || []).forEach(function (a) {
          a.logBase = 2; // ticks at powers of two: 1 KiB, 1 MiB, ...
          a.axisLabel = { formatter: function (x) { return F.bytes(x); } };
        });
        break;
      case "graph":
        option.tooltip.formatter = function (p) {
          return p.dataType === "edge" ? "rank " + esc(p.data.source) + " → rank " + esc(p.data.target) : "rank " + esc(p.name);
        };
        break;
      default:
        // Sections that bring their own tooltip (waiting.js) register it here.
        var own = (window.CommprofTooltips || {})[v.tooltip];
        if (own) own(v, option, F, esc);
        else option.tooltip.valueFormatter = function (x) { return x == null ? "" : f(x); };
    }
    return option;
  }

  // layout keeps axis names and legends inside the chart's box: an
  // x-axis name goes under the middle of the axis, a y-axis name above
  // it, and a legend wraps onto as many lines as it needs, the plot
  // moving down to make room.
  function layout(el, option) {
    var width = el.clientWidth || 600;
    var grids = [].concat(option.grid || []);
    if (!grids.length || option.series && [].concat(option.series).some(function (s) { return s && s.type === "graph"; })) return option;
    var legendRows = 0;
    [].concat(option.legend || []).forEach(function (lg) {
      if (!lg || lg.show === false) return;
      var names = lg.data || [].concat(option.series || []).map(function (s) { return s && s.name; }).filter(Boolean);
      var px = 0;
      names.forEach(function (n) { px += String(n && n.name || n).length * 6.5 + 34; });
      lg.type = "plain";
      lg.left = "center";
      legendRows = Math.max(legendRows, Math.ceil(px / Math.max(width - 40, 100)));
    });
    var slider = [].concat(option.dataZoom || []).some(function (z) { return z && z.type === "slider"; });
    var xNamed = false, yNamed = false;
    [].concat(option.xAxis || []).forEach(function (a) {
      if (a && a.type === "log" && !a.logBase) a.logBase = 2; // sizes and batches: powers of two
      if (!a || !a.name) return;
      xNamed = true;
      a.nameLocation = "middle";
      a.nameGap = 26;
      a.nameTextStyle = Object.assign({ color: "#6b7280" }, a.nameTextStyle);
    });
    [].concat(option.yAxis || []).forEach(function (a) {
      if (!a || !a.name) return;
      yNamed = true;
      a.nameLocation = "end";
      a.nameTextStyle = Object.assign({ align: "left", color: "#6b7280" }, a.nameTextStyle);
    });
    grids.forEach(function (g) {
      var top = 10 + legendRows * 24 + (yNamed ? 22 : 0);
      var bottom = (xNamed ? 34 : 12) + (slider ? 42 : 0);
      g.top = Math.max(parseInt(g.top, 10) || 0, top);
      g.bottom = Math.max(parseInt(g.bottom, 10) || 0, bottom);
      g.left = Math.max(parseInt(g.left, 10) || 0, 12);
      g.right = Math.max(parseInt(g.right, 10) || 0, option.visualMap ? 90 : 24);
      g.containLabel = true;
    });
    [].concat(option.dataZoom || []).forEach(function (z) { if (z && z.type === "slider") z.bottom = 6; });
    return option;
  }

  // Tables: a click on a header sorts by that column (numbers by their
  // raw values), and a long table shows its first rows, slowest first,
  // with a button for the rest.
  function tables() {
    document.querySelectorAll("table[data-sortable]").forEach(function (table) {
      var body = table.tBodies[0];
      var heads = table.tHead ? table.tHead.rows[0].cells : [];
      var n = Number(table.getAttribute("data-collapse")) || 0;
      var button = null;
      var collapse = function () {
        var rows = body.rows;
        for (var i = 0; i < rows.length; i++) rows[i].classList.toggle("cp-hidden", n > 0 && i >= n);
        if (button) button.textContent = n > 0 ? "Show all " + rows.length + " rows" : "Show the first " + Number(table.getAttribute("data-collapse")) + " rows";
      };
      if (n > 0) {
        button = document.createElement("button");
        button.type = "button";
        button.className = "cp-more-rows";
        button.addEventListener("click", function () {
          n = n > 0 ? 0 : Number(table.getAttribute("data-collapse"));
          collapse();
        });
        table.parentNode.insertAdjacentElement("afterend", button);
      }
      Array.prototype.forEach.call(heads, function (th, col) {
        th.setAttribute("data-sortable-col", "");
        th.addEventListener("click", function (e) {
          if (e.target.closest("a")) return; // the definition link
          var desc = th.getAttribute("data-sorted") !== "desc";
          var key = function (tr) {
            var td = tr.cells[col];
            var v = td && td.getAttribute("data-v");
            var x = v != null ? Number(v) : NaN;
            return isNaN(x) ? (td ? td.textContent : "") : x;
          };
          var rows = Array.prototype.slice.call(body.rows);
          rows.sort(function (a, b) {
            var ka = key(a), kb = key(b);
            var c = typeof ka === "number" && typeof kb === "number" ? ka - kb : String(ka).localeCompare(String(kb), undefined, { numeric: true });
            return desc ? -c : c;
          });
          rows.forEach(function (r) { body.appendChild(r); });
          Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("data-sorted"); });
          th.setAttribute("data-sorted", desc ? "desc" : "asc");
          collapse();
        });
      });
      collapse();
    });
  }

  function draw(el) {
    var specEl = document.querySelector('script[data-spec-for="' + el.id + '"]');
    var variants = JSON.parse(specEl.textContent);
    var chart = echarts.init(el, null, { renderer: "canvas" });
    var current = 0;
    var show = function (i) {
      current = i;
      chart.setOption(layout(el, decorate(variants[i], JSON.parse(JSON.stringify(variants[i].option)))), true);
    };
    var sel = document.querySelector('select[data-variants-for="' + el.id + '"]');
    if (variants.length > 1 && sel) {
      variants.forEach(function (v, i) {
        var o = document.createElement("option");
        o.value = String(i);
        o.textContent = v.label;
        sel.appendChild(o);
      });
      sel.hidden = false;
      sel.addEventListener("change", function () { show(Number(sel.value)); });
    }
    chart.on("finished", function once() {
      chart.off("finished", once);
      el.setAttribute("data-drawn", "true");
    });
    show(0);
    // Follow the box, not only the window: a grid that settles after the
    // first draw, a collapsed table opened above, would leave the chart
    // drawn for a box it no longer has.
    if (window.ResizeObserver) {
      new ResizeObserver(function () {
        if (Math.abs(chart.getWidth() - el.clientWidth) > 1 || Math.abs(chart.getHeight() - el.clientHeight) > 1) {
          chart.resize();
          show(current); // the legend's lines depend on the width
        }
      }).observe(el);
    } else {
      window.addEventListener("resize", function () { chart.resize(); });
    }
    return chart;
  }

  function start() {
    try {
      tables();
    } catch (e) {
      state.errors.push("tables: " + e.message);
      console.error("commprof: tables: " + e.message);
    }
    var els = document.querySelectorAll("[data-chart]");
    state.charts = els.length;
    els.forEach(function (el) {
      try {
        draw(el);
        state.drawn++;
      } catch (e) {
        state.errors.push(el.id + ": " + e.message);
        console.error("commprof: chart " + el.id + ": " + e.message);
      }
    });
    var tl = document.getElementById("timeline");
    var data = document.getElementById("timeline-data");
    if (tl && data) {
      try {
        var opts = {};
        var url = tl.getAttribute("data-detail-url");
        if (url) {
          // Served with its run: fetch the events of a span on demand.
          opts.fetchDetail = function (from, to) {
            var q = url + (url.indexOf("?") < 0 ? "?" : "&") + "from=" + Math.floor(from) + "&to=" + Math.ceil(to);
            return fetch(q, { credentials: "same-origin" }).then(function (r) {
              if (!r.ok) throw new Error(r.status + " " + r.statusText);
              return r.json();
            });
          };
        }
        CommprofTimeline.mount(tl, JSON.parse(data.textContent), opts);
      } catch (e) {
        state.errors.push("timeline: " + e.message);
        console.error("commprof: timeline: " + e.message);
      }
    }
    state.ready = true;
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
