// Live charts: every chart element names the JSON it is drawn from (data-src) and its chart there
// (data-chart); each source is asked every few seconds and its charts redrawn with uPlot, without reloading.
"use strict";
(function () {
  const REFRESH_MS = 2000;
  const COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];
  const plots = new Map();

  function draw(element, chart) {
    const lines = chart ? chart.labels.length : 0;
    element.dataset.points = chart ? String(chart.times.length) : "0";
    if (!lines) {
      element.classList.add("empty");
      element.textContent = "Waiting for samples…";
      plots.delete(element);
      return;
    }
    element.classList.remove("empty");
    // Each line's latest value, for whoever reads the page without looking at the canvas (tests, scripts).
    const last = {};
    chart.labels.forEach((label, i) => {
      const known = chart.values[i].filter((v) => v !== null);
      if (known.length) last[label] = known[known.length - 1];
    });
    element.dataset.last = JSON.stringify(last);
    const data = [chart.times, ...chart.values];
    const key = chart.labels.join("\u0000");
    const known = plots.get(element);
    if (known && known.key === key) {
      known.plot.setData(data);
      return;
    }
    if (known) known.plot.destroy();
    element.textContent = "";
    const options = {
      title: chart.title,
      width: Math.max(element.clientWidth, 320),
      height: 220,
      series: [{}, ...chart.labels.map((label, i) => ({ label: label, stroke: COLOURS[i % COLOURS.length], width: 2, spanGaps: true }))],
      axes: [{}, { size: 70 }],
    };
    plots.set(element, { key: key, plot: new uPlot(options, data, element) });
  }

  async function refresh(src, elements) {
    try {
      const response = await fetch(src, { credentials: "same-origin" });
      if (!response.ok) return;
      const body = await response.json();
      for (const element of elements) draw(element, body.charts[element.dataset.chart]);
    } catch (error) {
      // The console restarting or the network gone: the next turn tries again.
    }
  }

  function start() {
    const bySource = new Map();
    for (const element of document.querySelectorAll(".chart[data-src]")) {
      if (!bySource.has(element.dataset.src)) bySource.set(element.dataset.src, []);
      bySource.get(element.dataset.src).push(element);
    }
    for (const [src, elements] of bySource) {
      refresh(src, elements);
      setInterval(() => refresh(src, elements), REFRESH_MS);
    }
  }

  // Destructive forms ask first (their question in data-confirm: no inline script, which the CSP refuses).
  document.addEventListener("submit", (event) => {
    const question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });
  document.addEventListener("DOMContentLoaded", start);
})();
