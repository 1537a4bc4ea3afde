// Cuvil's profile report: reads the cuvil-profile JSON in <script id="cuvil-profile"> and draws the summary, the
// sortable kernel table (fused kernels expand into their IR nodes), the roofline and the time per op with
// Chart.js (inlined before this script). Sets body[data-rendered] when done, or fills #errors when something failed.
(function () {
  "use strict";
  const errors = [];
  function report(msg) {
    errors.push(String(msg));
    const box = document.getElementById("errors");
    box.textContent = errors.join("\n");
    box.hidden = false;
    document.body.dataset.rendered = "error";
  }
  window.addEventListener("error", (e) => report(e.message));

  const fmt = (x, d = 3) => (x === undefined || x === null || x < 0 ? "" : Number(x).toFixed(d));
  const big = (x) => {
    if (x === undefined || x < 0) return "";
    const units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "K"]];
    for (const [v, u] of units) if (x >= v) return (x / v).toFixed(2) + " " + u;
    return String(Math.round(x));
  };
  const el = (tag, attrs = {}, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k === undefined ? "" : String(k)));
    return e;
  };

  function summary(p) {
    const lat = p.latency_ms.median, sum = p.kernel_sum_ms, un = p.unattributed_ms;
    const unPct = lat > 0 ? (100 * un) / lat : 0;
    const items = [
      ["model", p.model || p.graph],
      ["end-to-end latency (median / p90)", `${fmt(lat)} / ${fmt(p.latency_ms.p90)} ms`],
      ["sum of kernel times (medians)", `${fmt(sum)} ms`],
      ["unattributed (a run's wall time - its kernels)", `${fmt(un)} ms (${unPct.toFixed(1)} %)`],
      ["profiled run (wall, median)", `${fmt(p.profiled_run_ms)} ms`],
      ["latency - sum of kernel medians", p.latency_minus_kernels_ms === undefined ? "-" :
        `${fmt(p.latency_minus_kernels_ms)} ms (${lat > 0 ? (100 * p.latency_minus_kernels_ms / lat).toFixed(1) : 0} %)`],
      ["precision / threads", `${p.precision} / ${p.machine.threads} of ${p.machine.cores} cores`],
      ["machine", p.machine.cpu],
      ["runs", `${p.iters} profiled, ${p.iters} unprofiled`],
    ];
    if (p.roofs)
      items.push(["roofs (measured)", `${fmt(p.roofs.fma_gflops, 1)} GFLOP/s fp32 FMA (${p.roofs.isa}), ` +
        `${fmt(p.roofs.dram_gbps, 1)} GB/s DRAM, ${fmt(p.roofs.cache_gbps, 1)} GB/s L2`]);
    const dl = el("dl", { id: "summary-list" });
    for (const [k, v] of items) dl.append(el("dt", {}, k), el("dd", {}, v));
    const node = document.getElementById("summary");
    node.append(dl);
    if (Math.abs(unPct) > 5)
      node.append(el("p", { class: "warn" }, `Unattributed time is ${unPct.toFixed(1)} % of the latency ` +
        "(input checks, planning, allocation and the gaps between kernels; noise when negative)."));
  }

  const BASE_COLUMNS = [
    ["#", (k) => k.id, "num"], ["kernel", (k) => k.label], ["value", (k) => "%" + k.value],
    ["implementation", (k) => k.impl], ["median ms", (k) => k.median_ms, "num", 4], ["p90 ms", (k) => k.p90_ms, "num", 4],
    ["share %", (k) => (k.share >= 0 ? 100 * k.share : -1), "num", 1],
    ["shapes", (k) => k.inputs.join(", ") + " \u2192 " + k.outputs.join(", ")],
    ["FLOPs", (k) => k.flops, "big"], ["bytes", (k) => k.bytes, "big"],
    ["GFLOP/s", (k) => (k.flops_exact ? k.gflops_s : -1), "num", 1], ["GB/s", (k) => k.gbytes_s, "num", 1],
    ["% of roof", (k) => k.roof_pct, "num", 1], ["source", (k) => k.location.stack || k.location.text],
    ["fallback", (k) => k.fallback],
  ];

  // With perf samples folded in (cuvil profile REPORT --perf-data): their share and where they landed.
  const PERF_COLUMNS = [
    ["perf samples %", (k) => (k.perf ? 100 * k.perf.share : -1), "num", 1],
    ["perf symbols", (k) => (k.perf ? k.perf.symbols.map(([s, n]) => `${s} ${n}`).join(", ") : "")],
  ];

  function table(p) {
    const COLUMNS = p.perf ? BASE_COLUMNS.concat(PERF_COLUMNS) : BASE_COLUMNS;
    const kernels = p.kernels.filter((k) => k.parent < 0);
    const children = {};
    for (const k of p.kernels) if (k.parent >= 0) (children[k.parent] = children[k.parent] || []).push(k);
    const tbl = el("table", { id: "kernels" });
    const head = el("tr");
    let sortCol = 4, sortDesc = true;
    COLUMNS.forEach(([name], i) => head.append(el("th", { "data-col": i, onclick: () => {
      sortDesc = sortCol === i ? !sortDesc : true;
      sortCol = i;
      draw();
    } }, name)));
    tbl.append(el("thead", {}, head));
    const body = el("tbody");
    tbl.append(body);
    const cell = ([, get, kind, digits], k) => {
      const v = get(k);
      if (kind === "num") return el("td", { class: "num" }, fmt(v, digits === undefined ? 0 : digits));
      if (kind === "big") return el("td", { class: "num" }, big(v));
      return el("td", {}, v);
    };
    function draw() {
      const get = COLUMNS[sortCol][1];
      const rows = kernels.slice().sort((a, b) => {
        const x = get(a), y = get(b);
        const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return sortDesc ? -c : c;
      });
      body.replaceChildren();
      for (const k of rows) {
        const tr = el("tr", { class: "kernel" + (k.fallback ? " fallback" : "") });
        COLUMNS.forEach((c) => tr.append(cell(c, k)));
        body.append(tr);
        if (k.body.length || children[k.id]) {
          const detail = el("tr", { class: "body", hidden: "" });
          const inner = el("td", { colspan: COLUMNS.length });
          const list = el("table", { class: "ir-nodes" },
            el("tr", {}, el("th", {}, "IR node"), el("th", {}, "value"), el("th", {}, "output"),
              el("th", {}, "source"), el("th", {}, "ms (op by op)")));
          const times = {};
          for (const c of children[k.id] || []) times[c.value] = c;
          const nodes = k.body.length ? k.body : (children[k.id] || []).map((c) => ({
            op: c.op, value: c.value, outputs: c.outputs, location: c.location }));
          for (const n of nodes)
            list.append(el("tr", {}, el("td", {}, n.op), el("td", {}, "%" + n.value), el("td", {}, n.outputs.join(", ")),
              el("td", {}, n.location.stack || n.location.text),
              el("td", { class: "num" }, times[n.value] ? fmt(times[n.value].median_ms, 4) : "")));
          inner.append(list);
          detail.append(inner);
          const toggle = el("button", { class: "expand", onclick: () => { detail.hidden = !detail.hidden; } },
            `${nodes.length} IR nodes`);
          tr.children[1].append(" ", toggle);
          body.append(detail);
        }
      }
      tbl.querySelectorAll("th").forEach((th, i) => {
        th.dataset.sorted = i === sortCol ? (sortDesc ? "desc" : "asc") : "";
      });
    }
    draw();
    document.getElementById("table").append(tbl);
    return kernels.length;
  }

  function roofline(p) {
    const canvas = document.getElementById("roofline-chart");
    if (!p.roofs) {
      canvas.replaceWith(el("p", {}, "No roofs measured (cuvil roofs)."));
      return 0;
    }
    const pts = p.kernels.filter((k) => k.parent < 0 && k.flops > 0 && k.bytes > 0 && k.median_ms > 0)
      .map((k) => ({ x: k.intensity, y: k.flops / (k.median_ms * 1e6), k }));
    const lo = Math.min(0.01, ...pts.map((q) => q.x)) / 2, hi = Math.max(1000, ...pts.map((q) => q.x)) * 2;
    const ridge = p.roofs.fma_gflops / p.roofs.dram_gbps;
    const roof = [lo, ridge, hi].map((x) => ({ x, y: Math.min(p.roofs.fma_gflops, p.roofs.dram_gbps * x) }));
    const l2 = [lo, p.roofs.fma_gflops / p.roofs.cache_gbps, hi]
      .map((x) => ({ x, y: Math.min(p.roofs.fma_gflops, p.roofs.cache_gbps * x) }));
    const chart = new Chart(canvas, {
      type: "scatter",
      data: { datasets: [
        { label: "kernels (exact FLOPs: Conv, MatMul, Gemm)", data: pts.filter((q) => q.k.flops_exact),
          backgroundColor: "#d6336c" },
        { label: "kernels (estimated FLOPs)", data: pts.filter((q) => !q.k.flops_exact), backgroundColor: "#1c7ed6" },
        { label: `DRAM roof ${fmt(p.roofs.dram_gbps, 1)} GB/s, FMA ${fmt(p.roofs.fma_gflops, 0)} GFLOP/s`,
          data: roof, showLine: true, borderColor: "#343a40", pointRadius: 0, borderWidth: 2 },
        { label: `L2 roof ${fmt(p.roofs.cache_gbps, 1)} GB/s`, data: l2, showLine: true, borderColor: "#adb5bd",
          borderDash: [6, 4], pointRadius: 0, borderWidth: 1 },
      ] },
      options: {
        animation: false, responsive: false,
        scales: {
          x: { type: "logarithmic", title: { display: true, text: "arithmetic intensity (FLOP/byte)" } },
          y: { type: "logarithmic", title: { display: true, text: "GFLOP/s" } },
        },
        plugins: { tooltip: { callbacks: { label: (c) => c.raw.k ?
          `${c.raw.k.label} %${c.raw.k.value}: ${fmt(c.raw.y, 1)} GFLOP/s at ${fmt(c.raw.x, 2)} FLOP/B, ` +
          `${fmt(c.raw.k.median_ms, 4)} ms` : c.dataset.label } } },
      },
    });
    return chart.data.datasets[0].data.length + chart.data.datasets[1].data.length;
  }

  function byOp(p) {
    const acc = {};
    for (const k of p.kernels) if (k.parent < 0) acc[k.label] = (acc[k.label] || 0) + k.median_ms;
    const ops = Object.entries(acc).sort((a, b) => b[1] - a[1]).slice(0, 25);
    new Chart(document.getElementById("ops-chart"), {
      type: "bar",
      data: { labels: ops.map((o) => o[0]), datasets: [{ label: "ms (sum of medians)", data: ops.map((o) => o[1]),
        backgroundColor: "#5c7cfa" }] },
      options: { indexAxis: "y", animation: false, responsive: false, plugins: { legend: { display: false } } },
    });
    return ops.length;
  }

  try {
    const p = JSON.parse(document.getElementById("cuvil-profile").textContent);
    if (p.format !== "cuvil-profile" || p.version !== 1) throw new Error("not a cuvil-profile version 1 document");
    document.title = `Cuvil profile: ${p.model || p.graph}`;
    summary(p);
    const rows = table(p);
    const points = roofline(p);
    const ops = byOp(p);
    document.body.dataset.kernelRows = rows;
    document.body.dataset.rooflinePoints = points;
    document.body.dataset.opBars = ops;
    if (!errors.length) document.body.dataset.rendered = "ok";
  } catch (e) {
    report(e && e.stack ? e.stack : e);
  }
})();
