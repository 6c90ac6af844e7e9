// commprof serve: the list of runs. It sorts the table by the column
// whose name is clicked, shows and hides the runs of a sweep, and keeps the
// diff form and the ticked rows in step: the first run ticked is A, the
// second B; a third unticks the oldest. Without this script the page still
// lists everything and the form still compares any two runs.
// window.commprofIndex ({order(), sort(col, dir), picks(), ready}) is for
// tests.
(function () {
  "use strict";
  var table = document.getElementById("runs-table");
  var formA = document.getElementById("diff-a");
  var formB = document.getElementById("diff-b");
  var state = { ready: false };
  window.commprofIndex = state;
  if (!table) {
    state.ready = true;
    return;
  }

  // ---------------------------------------------------------------- sort
  // Each tbody is one entry (a run, or a sweep and its runs) and moves as
  // one; a sweep's runs are sorted among themselves under it. Cells with
  // no value (data-v="") go last whichever the direction.
  function key(row, col, type) {
    var td = row.querySelector('td[data-col="' + col + '"]');
    var v = td ? td.getAttribute("data-v") : "";
    if (v === null || v === "") return null;
    if (type === "num") {
      var n = Number(v);
      return isNaN(n) ? null : n;
    }
    return v.toLowerCase();
  }
  function compare(a, b, dir) {
    if (a === null && b === null) return 0;
    if (a === null) return 1;
    if (b === null) return -1;
    if (a < b) return -dir;
    if (a > b) return dir;
    return 0;
  }
  function sortBy(col, dir) {
    var th = table.querySelector('th[data-col="' + col + '"]');
    if (!th) return false;
    var type = th.getAttribute("data-type");
    var d = dir === "ascending" ? 1 : -1;
    var groups = Array.prototype.slice.call(table.tBodies);
    groups.forEach(function (g, i) { g._i = i; });
    groups.sort(function (x, y) {
      return compare(key(x.rows[0], col, type), key(y.rows[0], col, type), d) || x._i - y._i;
    });
    groups.forEach(function (g) {
      var kids = Array.prototype.slice.call(g.rows, 1);
      kids.forEach(function (r, i) { r._i = i; });
      kids.sort(function (x, y) { return compare(key(x, col, type), key(y, col, type), d) || x._i - y._i; });
      kids.forEach(function (r) { g.appendChild(r); });
      table.appendChild(g);
    });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    state.sorted = [col, dir];
    return true;
  }
  Array.prototype.forEach.call(table.querySelectorAll("th.cp-sortable"), function (th) {
    th.querySelector("button").addEventListener("click", function () {
      var cur = th.getAttribute("aria-sort");
      // Numbers start from the largest, names from A.
      var first = th.getAttribute("data-type") === "num" ? "descending" : "ascending";
      var next = cur ? (cur === "ascending" ? "descending" : "ascending") : first;
      sortBy(th.getAttribute("data-col"), next);
    });
  });

  // ------------------------------------------------------------- sweeps
  function setOpen(button, open) {
    button.setAttribute("aria-expanded", open ? "true" : "false");
    var name = button.getAttribute("data-sweep");
    Array.prototype.forEach.call(table.querySelectorAll("tr.cp-child"), function (r) {
      if (r.getAttribute("data-sweep") === name) r.hidden = !open;
    });
  }
  Array.prototype.forEach.call(table.querySelectorAll("button.cp-toggle"), function (b) {
    var name = b.getAttribute("data-sweep");
    var first = table.querySelector('tr.cp-child[data-sweep="' + CSS.escape(name) + '"]');
    b.setAttribute("aria-expanded", first && !first.hidden ? "true" : "false");
    b.addEventListener("click", function () { setOpen(b, b.getAttribute("aria-expanded") !== "true"); });
  });

  // -------------------------------------------------------------- picks
  var boxes = Array.prototype.slice.call(table.querySelectorAll("input.cp-pick"));
  var picks = [];
  function show() {
    boxes.forEach(function (b) {
      var i = picks.indexOf(b.value);
      b.checked = i >= 0;
      var row = b.closest("tr");
      var old = row.querySelector(".cp-pickbadge");
      if (old) old.remove();
      if (i < 0) {
        row.removeAttribute("data-pick");
        return;
      }
      row.setAttribute("data-pick", i === 0 ? "A" : "B");
      if (row.hidden) {
        var t = table.querySelector('button.cp-toggle[data-sweep="' + CSS.escape(row.getAttribute("data-sweep")) + '"]');
        if (t) setOpen(t, true);
      }
      var badge = document.createElement("span");
      badge.className = "cp-pickbadge";
      badge.textContent = i === 0 ? "A" : "B";
      var name = row.querySelector("td.cp-name");
      name.insertBefore(badge, name.firstChild);
    });
    if (formA && picks[0]) formA.value = picks[0];
    if (formB && picks[1]) formB.value = picks[1];
    var hint = document.getElementById("diff-hint");
    if (hint) {
      hint.textContent = picks.length === 2
        ? "Compare A, " + picks[0] + ", with B, " + picks[1] + ": press Compare, or tick another run to replace A."
        : picks.length === 1
          ? "A is " + picks[0] + ": tick the run to compare it with."
          : "Compare two runs: tick them in the list, or choose them here.";
    }
  }
  boxes.forEach(function (b) {
    b.addEventListener("change", function () {
      var i = picks.indexOf(b.value);
      if (b.checked && i < 0) {
        picks.push(b.value);
        if (picks.length > 2) picks.shift();
      } else if (!b.checked && i >= 0) {
        picks.splice(i, 1);
      }
      show();
    });
  });
  function fromForm() {
    picks = [];
    if (formA && formA.value) picks.push(formA.value);
    if (formB && formB.value && formB.value !== formA.value) picks.push(formB.value);
    show();
  }
  if (formA && formB) {
    formA.addEventListener("change", fromForm);
    formB.addEventListener("change", fromForm);
    var swap = document.getElementById("diff-swap");
    if (swap) swap.addEventListener("click", function () {
      var a = formA.value;
      formA.value = formB.value;
      formB.value = a;
      fromForm();
    });
    fromForm();
  }

  state.order = function () {
    return Array.prototype.map.call(table.querySelectorAll("tbody tr"), function (r) { return r.getAttribute("data-run"); });
  };
  state.sort = sortBy;
  state.picks = function () { return picks.slice(); };
  state.ready = true;
})();
