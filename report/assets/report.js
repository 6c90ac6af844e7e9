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
    valueAxes.forEach(function (a) { a.axisLabel = Object.assign({}, a.axisLabel, { formatter: function (x) { return f(x); } }); });
    [].concat(option.visualMap || []).forEach(function (m) {
      if (m && m.dimension === undefined) m.formatter = function (x) { return f(x); };
    });
    switch (v.tooltip) {
      case "matrix":
        option.tooltip.formatter = function (p) {
          return "rank " + p.value[1] + " → rank " + p.value[0] + "<br><b>" + esc(f(cellValue(p))) + "</b> (" + esc(v.label) + ")";
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
        option.tooltip.valueFormatter = function (x) { return x == null ? "" : f(x); };
    }
    return option;
  }

  function draw(el) {
    var specEl = document.querySelector('script[data-spec-for="' + el.id + '"]');
    var variants = JSON.parse(specEl.textContent);
    var chart = echarts.init(el, null, { renderer: "canvas" });
    var show = function (i) {
      chart.setOption(decorate(variants[i], JSON.parse(JSON.stringify(variants[i].option))), true);
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
    window.addEventListener("resize", function () { chart.resize(); });
    return chart;
  }

  function start() {
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
