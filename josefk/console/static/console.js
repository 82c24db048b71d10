// josefk console: the pages' script. Fills each server-rendered frame from /api/, draws the
// charts as SVG, and runs the actions behind a confirmation dialog. No framework, no build.
"use strict";

(function () {
  const body = document.body;
  const page = body.dataset.page;

  // ------------------------------------------------------------------ helpers

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function link(href, text) {
    return el("a", { href: href }, text);
  }

  function enc(name) {
    return encodeURIComponent(name);
  }

  function fmtNum(n) {
    if (n === null || n === undefined) return "–";
    return Number(n).toLocaleString("en-US");
  }

  function fmtBytes(n) {
    if (n === null || n === undefined) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let value = Number(n);
    let i = 0;
    while (Math.abs(value) >= 1024 && i < units.length - 1) {
      value /= 1024;
      i += 1;
    }
    return (i === 0 ? value.toFixed(0) : value.toFixed(1)) + " " + units[i];
  }

  function fmtRate(n) {
    if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(1) + "M";
    if (Math.abs(n) >= 1e3) return (n / 1e3).toFixed(1) + "k";
    if (Math.abs(n) >= 10 || Number.isInteger(n)) return n.toFixed(0);
    return n.toFixed(Math.abs(n) < 1 ? 2 : 1);
  }

  function fmtTime(ms) {
    if (ms === null || ms === undefined || ms < 0) return "–";
    const d = new Date(ms);
    const pad = (x, w) => String(x).padStart(w || 2, "0");
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }

  function flash(message, kind) {
    const box = document.getElementById("flash");
    box.textContent = message;
    box.className = "flash " + (kind || "error");
    box.hidden = false;
    box.scrollIntoView({ block: "nearest" });
  }

  function clearFlash() {
    const box = document.getElementById("flash");
    box.hidden = true;
    box.textContent = "";
  }

  class ApiError extends Error {
    constructor(message, code, status) {
      super(message);
      this.code = code;
      this.status = status;
    }
  }

  async function api(path, options) {
    const opts = Object.assign({ headers: {} }, options || {});
    if (opts.json !== undefined) {
      opts.body = JSON.stringify(opts.json);
      opts.headers["Content-Type"] = "application/json";
      delete opts.json;
    }
    let response;
    try {
      response = await fetch(path, opts);
    } catch (err) {
      throw new ApiError("The console does not answer: is `josefk console` still running?", "NETWORK", 0);
    }
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      throw new ApiError(data.error || `HTTP ${response.status}`, data.code || "", response.status);
    }
    return data;
  }

  // Show a failed read in the flash box instead of an exception in the browser's console.
  function guarded(fn) {
    return async function (...args) {
      try {
        return await fn(...args);
      } catch (err) {
        if (err instanceof ApiError) flash(err.message, "error");
        else flash(String(err && err.message ? err.message : err), "error");
        return undefined;
      }
    };
  }

  function table(node, headers, rows, empty) {
    node.replaceChildren();
    const head = el("tr", {}, headers.map((h) => el("th", {}, h)));
    node.append(el("thead", {}, head));
    const tbody = el("tbody");
    if (!rows.length) {
      tbody.append(el("tr", {}, el("td", { colspan: headers.length, class: "empty" }, empty || "Nothing here yet.")));
    }
    for (const row of rows) {
      const cells = row.cells || row;
      const tr = el("tr", { class: row.class || null }, cells.map((c) => el("td", {}, c)));
      tbody.append(tr);
    }
    node.append(tbody);
  }

  function cards(node, items) {
    node.replaceChildren(
      ...items.map(([label, value, kind]) =>
        el("div", { class: "card" + (kind ? " " + kind : "") },
          el("div", { class: "card-value" }, value), el("div", { class: "card-label" }, label)))
    );
  }

  function every(ms, fn) {
    fn();
    return setInterval(fn, ms);
  }

  function debounce(fn, ms) {
    let timer = null;
    return (...args) => {
      clearTimeout(timer);
      timer = setTimeout(() => fn(...args), ms);
    };
  }

  function parsePairs(text) {
    const out = {};
    for (const part of (text || "").split(",")) {
      const trimmed = part.trim();
      if (!trimmed) continue;
      const at = trimmed.indexOf("=");
      if (at <= 0) throw new ApiError(`"${trimmed}" is not NAME=VALUE`, "INVALID", 400);
      out[trimmed.slice(0, at).trim()] = trimmed.slice(at + 1).trim();
    }
    return out;
  }

  // ------------------------------------------------------------------ confirmation

  function confirmAction(title, content, confirmLabel, danger) {
    const dialog = document.getElementById("dialog");
    document.getElementById("dialog-title").textContent = title;
    const bodyNode = document.getElementById("dialog-body");
    bodyNode.replaceChildren(content instanceof Node ? content : el("p", {}, content));
    const ok = document.getElementById("dialog-confirm");
    const cancel = document.getElementById("dialog-cancel");
    ok.textContent = confirmLabel || "Confirm";
    ok.className = danger === false ? "primary" : "danger";
    dialog.hidden = false;
    ok.focus();
    return new Promise((resolve) => {
      function done(answer) {
        dialog.hidden = true;
        ok.removeEventListener("click", yes);
        cancel.removeEventListener("click", no);
        resolve(answer);
      }
      function yes() { done(true); }
      function no() { done(false); }
      ok.addEventListener("click", yes);
      cancel.addEventListener("click", no);
    });
  }

  // Run an action after the person confirmed; report its answer or its refusal.
  async function perform(title, content, label, request, onDone, danger) {
    clearFlash();
    if (!(await confirmAction(title, content, label, danger))) return;
    try {
      const result = await request();
      if (onDone) await onDone(result);
    } catch (err) {
      flash(err.message || String(err), "error");
    }
  }

  // ------------------------------------------------------------------ charts

  const COLORS = ["#2563eb", "#16a34a", "#d97706", "#9333ea"];

  // series: [{name, points: [[time_ms, value], ...]}]; draws into an SVG 180 pixels high.
  function drawChart(id, series, format, floor) {
    const svg = document.getElementById(id);
    if (!svg) return;
    const ns = "http://www.w3.org/2000/svg";
    // Drawn in the element's own pixels, so that text is never stretched with the chart.
    const W = Math.max(200, Math.round(svg.getBoundingClientRect().width) || 600);
    const H = 180, left = 56, right = 10, top = 10, bottom = 22;
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const mk = (tag, attrs, text) => {
      const node = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
      if (text !== undefined) node.textContent = text;
      return node;
    };
    svg.replaceChildren();
    const all = series.flatMap((s) => s.points);
    const legend = document.getElementById(id + "-legend");
    if (legend) {
      legend.replaceChildren(...series.map((s, i) => {
        const last = s.points.length ? s.points[s.points.length - 1][1] : null;
        return el("span", { class: "key" },
          el("i", { style: `background:${COLORS[i % COLORS.length]}` }),
          `${s.name}: ${last === null ? "–" : (format || fmtRate)(last)}`);
      }));
    }
    if (all.length < 1) {
      svg.append(mk("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "chart-empty" },
        "Collecting samples…"));
      return;
    }
    let t0 = Math.min(...all.map((p) => p[0]));
    const t1 = Math.max(...all.map((p) => p[0]));
    if (t1 === t0) t0 = t1 - 1000;
    let vmax = Math.max(...all.map((p) => p[1]));
    // An idle cluster still gets a readable scale (1 record/s, 1 KiB/s) instead of 0..0.
    vmax = Math.max(vmax, floor || 1);
    // Bytes get round binary steps (256 KiB, not 97.7 KiB).
    const unit = floor === 1024 ? Math.pow(1024, Math.floor(Math.log(vmax) / Math.log(1024))) : 1;
    vmax = niceCeil(vmax / unit) * unit;
    const x = (t) => left + ((t - t0) / (t1 - t0)) * (W - left - right);
    const y = (v) => top + (1 - v / vmax) * (H - top - bottom);
    for (let i = 0; i <= 4; i += 1) {
      const v = (vmax * i) / 4;
      svg.append(mk("line", { x1: left, x2: W - right, y1: y(v), y2: y(v), class: "grid-line" }));
      svg.append(mk("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", class: "axis" },
        (format || fmtRate)(v)));
    }
    const span = (t1 - t0) / 1000;
    svg.append(mk("text", { x: left, y: H - 5, class: "axis" }, `-${Math.round(span)}s`));
    svg.append(mk("text", { x: W - right, y: H - 5, "text-anchor": "end", class: "axis" }, "now"));
    series.forEach((s, i) => {
      if (!s.points.length) return;
      const color = COLORS[i % COLORS.length];
      const line = s.points.map((p, j) => `${j ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
      const first = s.points[0], last = s.points[s.points.length - 1];
      const area = `${line} L${x(last[0]).toFixed(1)},${y(0)} L${x(first[0]).toFixed(1)},${y(0)} Z`;
      svg.append(mk("path", { d: area, fill: color, "fill-opacity": "0.08", stroke: "none", class: "area" }));
      svg.append(mk("path", { d: line, fill: "none", stroke: color, "stroke-width": "2",
        "vector-effect": "non-scaling-stroke", class: "line" }));
    });
  }

  function niceCeil(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  // ------------------------------------------------------------------ pages

  async function overviewPage() {
    const data = await api("/api/overview");
    document.getElementById("cluster-id").textContent = data.cluster_id ? `cluster ${data.cluster_id}` : "";
    const down = data.errors.find((e) => e.step === "cluster" || e.step === "topics");
    if (down) flash(`No answer from the cluster at ${data.bootstrap}: ${down.error}`, "error");
    else if (document.getElementById("flash").classList.contains("error")) clearFlash();
    const states = data.groups_by_state;
    cards(document.getElementById("cards"), [
      ["Brokers", fmtNum(data.brokers.length)],
      ["Controller", data.controller === null || data.controller < 0 ? "none" : `broker ${data.controller}`],
      ["Topics", fmtNum(data.topics)],
      ["Partitions", fmtNum(data.partitions)],
      ["Under-replicated", fmtNum(data.under_replicated), data.under_replicated ? "warn" : "good"],
      ["Offline", fmtNum(data.offline), data.offline ? "bad" : "good"],
      ["Consumer groups", fmtNum(data.groups)],
    ]);
    const cardNodes = document.querySelectorAll("#cards .card");
    cardNodes[4].id = "card-under-replicated";
    cardNodes[5].id = "card-offline";
    table(document.getElementById("brokers"), ["Broker", "Address", "Rack", "Role", "Leaders", "Replicas"],
      data.brokers.map((b) => [link(`/brokers/${b.id}`, String(b.id)), `${b.host}:${b.port}`, b.rack || "–",
        b.controller ? el("span", { class: "badge" }, "controller") : "", fmtNum(b.leaders), fmtNum(b.replicas)]),
      "No broker answered.");
    table(document.getElementById("group-states"), ["State", "Groups"],
      Object.entries(states).map(([s, n]) => [el("span", { class: "state state-" + s.toLowerCase() }, s), fmtNum(n)]),
      "No consumer groups.");
    const urp = data.under_replicated_partitions;
    document.getElementById("urp-section").hidden = !urp.length;
    table(document.getElementById("urp"), ["Topic", "Partition", "Replicas", "ISR"],
      urp.map((p) => [link(`/topics/${enc(p.topic)}`, p.topic), String(p.partition), p.replicas.join(", "), p.isr.join(", ") || "none"]));
    drawChart("chart-records", [
      { name: "in", points: data.rates.records_in },
      { name: "consumed", points: data.rates.records_out },
    ]);
    const bytes = [{ name: "in", points: data.rates.bytes_in }];
    if (data.metrics) bytes.push({ name: "out", points: data.rates.bytes_out });
    drawChart("chart-bytes", bytes, (v) => fmtBytes(v), 1024);
    if (!data.metrics) {
      document.getElementById("chart-bytes-legend").append(
        el("span", { class: "muted" }, "bytes in from log sizes; bytes out needs --metrics-url"));
    }
  }

  let topicsPageIndex = 0;
  function renderTopics(data) {
    const first = data.page * data.per_page;
    const last = Math.min(first + data.topics.length, data.matched);
    const filtered = data.matched === data.total ? "" : ` (${fmtNum(data.matched)} match)`;
    document.getElementById("topic-count").textContent = data.matched
      ? `${fmtNum(first + 1)}–${fmtNum(last)} of ${fmtNum(data.total)} topics${filtered}`
      : `${fmtNum(data.total)} topics, none matching`;
    document.getElementById("topics-prev").disabled = data.page === 0;
    document.getElementById("topics-next").disabled = last >= data.matched;
    table(document.getElementById("topics"), ["Topic", "Partitions", "Replication", "Under-replicated", "Records", "Size"],
      data.topics.map((t) => ({
        class: t.offline ? "bad" : t.under_replicated ? "warn" : null,
        cells: [link(`/topics/${enc(t.name)}`, t.name), fmtNum(t.partitions), fmtNum(t.replication_factor),
          fmtNum(t.under_replicated), fmtNum(t.records), fmtBytes(t.size)],
      })), "No topics yet.");
  }

  // One page of topics at a time: the filter and the paging ask the server.
  async function topicsPage() {
    const params = new URLSearchParams({
      q: document.getElementById("topic-filter").value.trim(),
      internal: document.getElementById("show-internal").checked ? "1" : "0",
      page: String(topicsPageIndex),
    });
    renderTopics(await api(`/api/topics?${params}`));
  }

  function initTopics() {
    const reload = guarded(topicsPage);
    document.getElementById("topic-filter").addEventListener("input", debounce(() => { topicsPageIndex = 0; reload(); }, 150));
    document.getElementById("show-internal").addEventListener("change", () => { topicsPageIndex = 0; reload(); });
    document.getElementById("topics-prev").addEventListener("click", () => { topicsPageIndex = Math.max(0, topicsPageIndex - 1); reload(); });
    document.getElementById("topics-next").addEventListener("click", () => { topicsPageIndex += 1; reload(); });
    const form = document.getElementById("create-topic");
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const f = new FormData(form);
      let configs;
      try {
        configs = parsePairs(f.get("configs"));
      } catch (err) {
        flash(err.message);
        return;
      }
      const name = String(f.get("name")).trim();
      const spec = { name, partitions: Number(f.get("partitions")), replication_factor: Number(f.get("replication_factor")), configs };
      perform("Create topic", `Create topic "${name}" with ${spec.partitions} partition(s)?`, "Create",
        () => api("/api/topics", { method: "POST", json: spec }),
        async () => { flash(`Topic "${name}" created.`, "ok"); form.reset(); await guarded(topicsPage)(); }, false);
    });
  }

  async function topicPage() {
    const name = body.dataset.topic;
    const data = await api(`/api/topics/${enc(name)}`);
    const parts = data.partitions;
    const records = parts.reduce((n, p) => n + Math.max(0, (p.log_end || 0) - (p.log_start || 0)), 0);
    const size = parts.reduce((n, p) => n + (p.size || 0), 0);
    const urp = parts.filter((p) => p.isr.length < p.replicas.length).length;
    cards(document.getElementById("cards"), [
      ["Partitions", fmtNum(parts.length)],
      ["Records", fmtNum(records)],
      ["Size", fmtBytes(size)],
      ["Under-replicated", fmtNum(urp), urp ? "warn" : "good"],
    ]);
    table(document.getElementById("partitions"), ["Partition", "Leader", "Replicas", "ISR", "Log start", "Log end", "Records", "Size"],
      parts.map((p) => ({
        class: p.leader < 0 ? "bad" : p.isr.length < p.replicas.length ? "warn" : null,
        cells: [String(p.partition), p.leader < 0 ? "none" : link(`/brokers/${p.leader}`, String(p.leader)),
          p.replicas.join(", "), p.isr.join(", "), fmtNum(p.log_start), fmtNum(p.log_end),
          fmtNum(Math.max(0, (p.log_end || 0) - (p.log_start || 0))), fmtBytes(p.size)],
      })));
    if (typeof data.configs === "string") {
      table(document.getElementById("configs"), ["Config"], [[data.configs]]);
    } else {
      table(document.getElementById("configs"), ["Config", "Value", "Source"],
        data.configs.map((c) => ({
          class: c.source === "DEFAULT_CONFIG" ? "muted-row" : null,
          cells: [c.name, c.sensitive ? "(sensitive)" : c.value === null ? "–" : c.value,
            el("span", { class: "source source-" + c.source.toLowerCase() }, c.source.replace(/_/g, " ").toLowerCase())],
        })));
    }
    drawChart("chart-produce", [{ name: "records/s", points: data.produce_rate }]);
  }

  function initTopic() {
    const name = body.dataset.topic;
    const base = `/api/topics/${enc(name)}`;
    const reload = guarded(topicPage);
    const produce = document.getElementById("produce");
    produce.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const f = new FormData(produce);
      let headers;
      try {
        headers = parsePairs(f.get("headers"));
      } catch (err) {
        flash(err.message);
        return;
      }
      const spec = { partition: f.get("partition") === "" ? null : Number(f.get("partition")),
        key: f.get("key") === "" ? null : f.get("key"), value: f.get("value"), headers };
      perform("Produce a record", `Produce this record to "${name}"${spec.partition === null ? "" : ` partition ${spec.partition}`}?`, "Produce",
        () => api(`${base}/records`, { method: "POST", json: spec }),
        async (r) => { flash(`Produced to partition ${r.partition} at offset ${r.offset}.`, "ok"); await reload(); }, false);
    });
    const add = document.getElementById("add-partitions");
    add.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const count = Number(new FormData(add).get("count"));
      perform("Add partitions", `Grow "${name}" to ${count} partitions? Keys will map to other partitions from now on.`, "Add partitions",
        () => api(`${base}/partitions`, { method: "POST", json: { count } }),
        async () => { flash(`"${name}" now has ${count} partitions.`, "ok"); await reload(); });
    });
    const del = document.getElementById("delete-records");
    del.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const f = new FormData(del);
      const partition = Number(f.get("partition")), offset = Number(f.get("offset"));
      perform("Delete records", `Delete the records of "${name}" partition ${partition} before offset ${offset === -1 ? "the end" : offset}? This cannot be undone.`, "Delete records",
        () => api(`${base}/delete-records`, { method: "POST", json: { partition, offset } }),
        async (r) => { flash(`Partition ${partition} now starts at offset ${r.log_start}.`, "ok"); await reload(); });
    });
    document.getElementById("delete-topic").addEventListener("submit", (ev) => {
      ev.preventDefault();
      perform("Delete topic", `Delete topic "${name}" and all its records? This cannot be undone.`, "Delete topic",
        () => api(base, { method: "DELETE" }),
        () => { window.location.assign("/topics"); });
    });
    const alter = document.getElementById("alter-config");
    alter.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const f = new FormData(alter);
      const key = String(f.get("name")).trim();
      const value = f.get("value") === "" ? null : String(f.get("value"));
      perform("Alter config", value === null ? `Set ${key} of "${name}" back to its default?` : `Set ${key}=${value} on "${name}"?`, "Set",
        () => api(`${base}/configs`, { method: "POST", json: { name: key, value } }),
        async () => { flash(`${key} of "${name}" is now ${value === null ? "its default" : value}.`, "ok"); await reload(); });
    });
  }

  // ---- messages

  function bytesOf(b64) {
    const raw = atob(b64);
    const out = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i += 1) out[i] = raw.charCodeAt(i);
    return out;
  }

  const decoder = new TextDecoder("utf-8");

  function render(b64, format) {
    if (b64 === null || b64 === undefined) return el("span", { class: "null" }, "null");
    const bytes = bytesOf(b64);
    if (format === "hex") {
      const lines = [];
      for (let i = 0; i < bytes.length; i += 16) {
        const chunk = Array.from(bytes.slice(i, i + 16));
        lines.push(i.toString(16).padStart(6, "0") + "  " + chunk.map((b) => b.toString(16).padStart(2, "0")).join(" ").padEnd(48) +
          "  " + chunk.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join(""));
      }
      return el("pre", { class: "hex" }, lines.join("\n"));
    }
    const text = decoder.decode(bytes);
    if (format === "json") {
      try {
        return el("pre", { class: "json" }, JSON.stringify(JSON.parse(text), null, 2));
      } catch (err) {
        return el("pre", { class: "text" }, text);
      }
    }
    return el("pre", { class: "text" }, text);
  }

  let lastRecords = [];
  function renderRecords() {
    const format = document.querySelector("#browse [name=format]").value;
    const box = document.getElementById("records");
    box.replaceChildren();
    const t = el("table", { class: "grid records" });
    table(t, ["Partition", "Offset", "Timestamp", "Key", "Value", "Headers"],
      lastRecords.map((r) => ({
        class: "record",
        cells: [String(r.partition), fmtNum(r.offset), fmtTime(r.timestamp), render(r.key, format === "hex" ? "hex" : "text"),
          render(r.value, format),
          r.headers.length ? el("div", { class: "headers" }, r.headers.map(([k, v]) => el("div", {}, el("b", {}, k + ":"), " ",
            format === "hex" ? render(v, "hex") : el("code", {}, v === null ? "null" : decoder.decode(bytesOf(v)))))) : ""],
      })), "No records match.");
    box.append(t);
  }

  async function messagesPage() {
    const name = body.dataset.topic;
    const form = document.getElementById("browse");
    const f = new FormData(form);
    const params = new URLSearchParams();
    params.set("partition", f.get("partition"));
    params.set("from", f.get("from"));
    params.set("limit", f.get("limit") || "50");
    if (f.get("from") === "offset") params.set("offset", f.get("offset") || "0");
    if (f.get("from") === "time") {
      const when = f.get("time") ? new Date(f.get("time")).getTime() : Date.now();
      params.set("time", String(when));
    }
    if (f.get("key")) params.set("key", f.get("key"));
    if (f.get("q")) params.set("q", f.get("q"));
    document.getElementById("browse-summary").textContent = "Reading…";
    const data = await api(`/api/topics/${enc(name)}/messages?${params}`);
    const select = form.querySelector("[name=partition]");
    if (select.options.length === 1) {
      for (const p of data.partitions) select.append(el("option", { value: p.partition }, String(p.partition)));
      if (data.partitions.length === 1) select.value = "all";
    }
    lastRecords = data.records;
    const ranges = data.partitions.map((p) => `p${p.partition}: ${fmtNum(p.log_start)}–${fmtNum(p.log_end)}`).join(", ");
    document.getElementById("browse-summary").textContent = `${fmtNum(data.records.length)} record(s) shown. Offsets ${ranges}.`;
    renderRecords();
  }

  function initMessages() {
    const form = document.getElementById("browse");
    const sync = () => {
      const from = form.querySelector("[name=from]").value;
      form.querySelector(".from-offset").hidden = from !== "offset";
      form.querySelector(".from-time").hidden = from !== "time";
    };
    form.querySelector("[name=from]").addEventListener("change", sync);
    form.querySelector("[name=format]").addEventListener("change", renderRecords);
    form.addEventListener("submit", (ev) => { ev.preventDefault(); clearFlash(); guarded(messagesPage)(); });
    sync();
  }

  // ---- groups

  let groupRows = [];
  function renderGroups() {
    const filter = document.getElementById("group-filter").value.trim().toLowerCase();
    const shown = groupRows.filter((g) => g.group.toLowerCase().includes(filter));
    document.getElementById("group-count").textContent = `${fmtNum(shown.length)} of ${fmtNum(groupRows.length)} groups`;
    table(document.getElementById("groups"), ["Group", "Type", "State", "Total lag"],
      shown.map((g) => [link(`/groups/${enc(g.group)}`, g.group), g.type,
        el("span", { class: "state state-" + (g.state || "unknown").toLowerCase() }, g.state || "unknown"), fmtNum(g.lag)]),
      "No consumer groups.");
  }

  async function groupsPage() {
    groupRows = (await api("/api/groups")).groups;
    renderGroups();
  }

  async function groupPage() {
    const id = body.dataset.group;
    const data = await api(`/api/groups/${enc(id)}`);
    cards(document.getElementById("cards"), [
      ["State", data.state],
      ["Type", data.type],
      ["Members", fmtNum(data.members.length)],
      ["Total lag", fmtNum(data.total_lag), data.total_lag ? "warn" : "good"],
    ]);
    document.getElementById("cards").lastChild.id = "total-lag";
    table(document.getElementById("lag"), ["Topic", "Partition", "Committed offset", "Log end offset", "Lag", "Member"],
      data.partitions.map((p) => ({
        class: "lag-row",
        cells: [link(`/topics/${enc(p.topic)}`, p.topic), String(p.partition), fmtNum(p.committed_offset),
          fmtNum(p.log_end_offset), el("span", { class: "lag" }, fmtNum(p.lag)), p.member_id || "–"],
      })), "No committed offsets.");
    table(document.getElementById("members"), ["Member", "Client", "Host", "Partitions"],
      data.members.map((m) => [m.member_id, m.client_id, m.client_host,
        m.assignment.map(([t, p]) => `${t}-${p}`).join(", ") || "none"]), "No active members.");
    drawChart("chart-lag", [{ name: "lag", points: data.lag_history }], fmtNum);
  }

  function initGroup() {
    const id = body.dataset.group;
    const form = document.getElementById("reset-offsets");
    const sync = () => {
      const to = form.querySelector("[name=to]").value;
      form.querySelector(".to-offset").hidden = to !== "offset";
      form.querySelector(".to-time").hidden = to !== "time";
    };
    form.querySelector("[name=to]").addEventListener("change", sync);
    sync();
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      clearFlash();
      const f = new FormData(form);
      const spec = { to: f.get("to"), topic: f.get("topic") || null, dry_run: true };
      if (spec.to === "offset") spec.offset = Number(f.get("offset"));
      if (spec.to === "time") spec.time = f.get("time") ? new Date(f.get("time")).getTime() : Date.now();
      let preview;
      try {
        preview = await api(`/api/groups/${enc(id)}/reset-offsets`, { method: "POST", json: spec });
      } catch (err) {
        flash(err.message);
        return;
      }
      const t = el("table", { class: "grid", id: "reset-preview" });
      table(t, ["Topic", "Partition", "Current", "New"],
        preview.partitions.map((p) => [p.topic, String(p.partition), fmtNum(p.current), fmtNum(p.new)]));
      const content = el("div", {}, el("p", {}, `Dry run: group "${id}" would commit these offsets.`), t);
      perform("Reset offsets", content, "Reset offsets",
        () => api(`/api/groups/${enc(id)}/reset-offsets`, { method: "POST", json: Object.assign({}, spec, { dry_run: false }) }),
        async () => { flash(`Offsets of "${id}" reset.`, "ok"); await guarded(groupPage)(); });
    });
  }

  // ---- broker, ACLs, users

  let brokerConfigs = [];
  function renderBrokerConfigs() {
    const filter = document.getElementById("config-filter").value.trim().toLowerCase();
    table(document.getElementById("configs"), ["Config", "Value", "Source"],
      brokerConfigs.filter((c) => c.name.includes(filter)).map((c) => ({
        class: c.source === "DEFAULT_CONFIG" ? "muted-row" : null,
        cells: [c.name, c.sensitive ? "(sensitive)" : c.value === null ? "–" : c.value,
          el("span", { class: "source source-" + c.source.toLowerCase() }, c.source.replace(/_/g, " ").toLowerCase())],
      })));
  }

  async function brokerPage() {
    const id = body.dataset.broker;
    const data = await api(`/api/brokers/${enc(id)}`);
    const b = data.broker;
    cards(document.getElementById("cards"), [
      ["Address", `${b.host}:${b.port}`],
      ["Role", b.controller ? "controller" : "broker"],
      ["Leaders", fmtNum(b.leaders)],
      ["Replicas", fmtNum(b.replicas)],
    ]);
    table(document.getElementById("log-dirs"), ["Path", "Partitions", "Size", "Usable", "Total", "Error"],
      data.log_dirs.map((d) => [d.path, fmtNum(d.partitions), fmtBytes(d.size), d.usable_bytes >= 0 ? fmtBytes(d.usable_bytes) : "–",
        d.total_bytes >= 0 ? fmtBytes(d.total_bytes) : "–", d.error || "none"]));
    brokerConfigs = data.configs;
    renderBrokerConfigs();
  }

  async function aclsPage() {
    const data = await api("/api/acls");
    document.getElementById("acl-summary").textContent = data.authorizer
      ? `${fmtNum(data.acls.length)} ACL(s).`
      : "No authorizer runs on this cluster: every authenticated user may do everything.";
    table(document.getElementById("acls"), ["Principal", "Host", "Operation", "Permission", "Resource", "Name", "Pattern"],
      data.acls.map((a) => [a.principal, a.host, a.operation, a.permission, a.resource_type, a.resource_name, a.pattern_type]),
      data.authorizer ? "No ACLs." : "ACLs need an authorizer (authorizer.class.name).");
  }

  async function usersPage() {
    const data = await api("/api/users");
    document.getElementById("user-summary").textContent = `${fmtNum(data.users.length)} SCRAM user(s).`;
    table(document.getElementById("users"), ["User", "Credentials"],
      data.users.map((u) => [u.user, u.error ? u.error : u.credentials.map((c) => `${c.mechanism} (${fmtNum(c.iterations)} iterations)`).join(", ")]),
      "No SCRAM users.");
  }

  // ------------------------------------------------------------------ start

  const pages = {
    overview: { load: overviewPage, refresh: 3000 },
    topics: { load: topicsPage, init: initTopics, refresh: 10000 },
    topic: { load: topicPage, init: initTopic, refresh: 5000 },
    messages: { load: messagesPage, init: initMessages },
    groups: { load: groupsPage, init: () => document.getElementById("group-filter").addEventListener("input", debounce(renderGroups, 100)), refresh: 5000 },
    group: { load: groupPage, init: initGroup, refresh: 5000 },
    broker: { load: brokerPage, init: () => document.getElementById("config-filter").addEventListener("input", debounce(renderBrokerConfigs, 100)) },
    acls: { load: aclsPage },
    users: { load: usersPage },
  };
  const current = pages[page];
  if (current) {
    if (current.init) current.init();
    const load = guarded(current.load);
    if (current.refresh) every(current.refresh, () => { if (document.getElementById("dialog").hidden) load(); });
    else load();
  }
})();
