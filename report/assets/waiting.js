// commprof report: the tooltip of the chart "Skew over time, by the rank
// that came last" (report/waiting.go). Each point's value is [time since
// the run began (ns), skew (ns), index of its label in the variant's
// labels]; its series is the rank that came last. report.js calls the
// functions of the global CommprofTooltips for the chart tooltips it does
// not draw itself, with the chart's variant, its option, the formatters
// (format.js) and an HTML escaper.
(function (root) {
  "use strict";
  var tips = root.CommprofTooltips = root.CommprofTooltips || {};
  tips.waiting = function (v, option, F, esc) {
    [].concat(option.xAxis || []).forEach(function (a) {
      a.axisLabel = Object.assign({}, a.axisLabel, { formatter: function (x) { return F.duration(x); } });
    });
    option.tooltip = option.tooltip || {};
    option.tooltip.formatter = function (p) {
      var label = (v.labels || [])[p.value[2]];
      return (label ? esc(label) + "<br>" : "") + "at " + esc(F.duration(p.value[0])) + ": the last rank arrived <b>" +
        esc(F.duration(p.value[1])) + "</b> after the first<br>last: " + esc(p.seriesName);
    };
  };
})(window);
