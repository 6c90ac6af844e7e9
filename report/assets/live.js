// commprof serve: the live page of a run being recorded. Every interval it
// fetches live.json (beside the page) and updates the page with
// textContent only: nothing from the trace is ever parsed as HTML. Once
// the run's status leaves "running" it stops and links to the report.
// window.commprofLive ({polls, events, status, done, errors}) is for tests.
(function () {
  "use strict";
  var main = document.querySelector("main");
  var interval = Number(main.getAttribute("data-interval-ms")) || 2000;
  var state = { polls: 0, events: 0, status: "", done: false, errors: 0, history: [] };
  window.commprofLive = state;
  var last = null; // {events, at}

  function $(id) { return document.getElementById(id); }
  function setText(id, s) { var el = $(id); if (el && el.textContent !== s) el.textContent = s; }
  var F = window.CommprofFormat; // format.js
  function cell(text, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    return td;
  }

  function render(d) {
    state.events = d.events;
    state.status = d.status;
    state.history.push(d.events);
    setText("title", d.name);
    var st = $("status");
    st.setAttribute("data-status", d.status || "");
    setText("status", d.status || "no manifest");
    setText("elapsed", F.elapsed(d.elapsed_ns));
    setText("started", d.start ? "started " + new Date(d.start).toLocaleString() : "start unknown");
    setText("events", F.int(d.events));
    setText("disk", F.bytes(d.disk_bytes));
    var at = Date.now();
    if (last && at - last.at >= 500) {
      var secs = (at - last.at) / 1000;
      var rate = Math.max(0, Math.round((d.events - last.events) / secs));
      setText("rate", rate > 0 ? F.int(rate) + " events/s over the last " + secs.toFixed(1) + "s" : "no new events in the last " + secs.toFixed(1) + "s");
      last = { events: d.events, at: at };
    } else if (!last) {
      last = { events: d.events, at: at };
    }
    var writing = 0, most = 1;
    d.ranks.forEach(function (r) { if (r.bytes > 0) writing++; most = Math.max(most, r.events); });
    setText("ranks-writing", String(writing));
    setText("world", "of " + d.world_size);

    var body = $("ranks-body");
    var rows = document.createDocumentFragment();
    d.ranks.forEach(function (r) {
      var tr = document.createElement("tr");
      tr.appendChild(cell(String(r.rank), "num"));
      tr.appendChild(cell(r.host || "—"));
      tr.appendChild(cell(F.int(r.events), "num"));
      tr.appendChild(cell(F.bytes(r.bytes), "num"));
      var td = document.createElement("td"), bar = document.createElement("div"), fill = document.createElement("span");
      bar.className = "cp-bar";
      fill.style.width = (100 * r.events / most).toFixed(1) + "%";
      bar.appendChild(fill);
      td.appendChild(bar);
      tr.appendChild(td);
      rows.appendChild(tr);
    });
    body.replaceChildren(rows);

    var list = $("findings");
    var items = document.createDocumentFragment();
    (d.findings.length ? d.findings : ["None yet."]).forEach(function (f) {
      var li = document.createElement("li");
      li.className = "cp-finding";
      li.textContent = f;
      items.appendChild(li);
    });
    list.replaceChildren(items);

    var problem = $("problem");
    problem.hidden = !d.problem;
    setText("problem", d.problem || "");
    setText("updated", "Updated " + new Date(d.updated).toLocaleTimeString());

    if (!d.running) {
      state.done = true;
      var text = d.status === "abandoned" ? "The recording was abandoned." : "The run has finished: " + (d.status || "no status") + ".";
      if (d.error) text += " " + d.error;
      setText("done-text", text);
      $("report-link").setAttribute("href", d.report);
      $("done").hidden = false;
      setText("subtitle", "recorded " + F.elapsed(d.elapsed_ns) + " · " + F.int(d.events) + " events");
      setText("findings-title", "Findings");
      setText("rate", "the recording has ended");
      if (d.status === "abandoned") $("done").setAttribute("data-tone", "bad");
    }
  }

  function poll() {
    fetch("live.json", { cache: "no-store", credentials: "same-origin" })
      .then(function (res) {
        if (!res.ok) throw new Error("HTTP " + res.status);
        return res.json();
      })
      .then(function (d) {
        state.polls++;
        render(d);
        if (!state.done) setTimeout(poll, interval);
      })
      .catch(function (e) {
        state.errors++;
        var problem = $("problem");
        problem.hidden = false;
        problem.textContent = "Cannot read the progress from the server (" + e.message + "); trying again.";
        setTimeout(poll, interval);
      });
  }

  render(JSON.parse($("live-data").textContent));
  state.polls = 0;
  state.history = [state.events];
  if (!state.done) setTimeout(poll, interval);
})();
