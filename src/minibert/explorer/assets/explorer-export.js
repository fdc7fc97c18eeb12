// The exports of the open head (PNG, SVG, JSON), and the start: decode the data (explorer-data.js),
// draw the panels (explorer-panels.js, explorer-hidden.js), then mark the page ready for scripts and tests.
"use strict";

const MinibertExport = (function () {
  function download(blob, name) {
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob); link.download = name;
    document.body.appendChild(link); link.click(); link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  }

  function escapeXml(text) {
    return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c]);
  }

  function headSvg() {  // the open head as lines (token columns) or a matrix, as vector graphics
    const view = MinibertPanels.current();
    const m = window.minibert, T = view.data.T, weights = m.attention(view.layer, view.head), parts = [];
    const row = 18, label = 150, gap = 260, width = view.mode === "lines" ? 2 * label + gap : label + T * 12;
    const height = view.mode === "lines" ? T * row + 8 : label + T * 12;
    parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`);
    parts.push(`<title>${escapeXml(`${m.model}: layer ${view.layer}, head ${view.head}`)}</title>`);
    for (let i = 0; i < T; i++) {
      for (let j = 0; j < T; j++) {
        const w = weights[i * T + j];
        if (w < 0.005) continue;
        if (view.mode === "lines") {
          parts.push(`<line x1="${label}" y1="${4 + (i + 0.5) * row}" x2="${label + gap}" y2="${4 + (j + 0.5) * row}" stroke="rgb(${view.accent})" stroke-opacity="${MinibertPanels.format(w, 4)}"/>`);
        } else {
          parts.push(`<rect x="${label + j * 12}" y="${label + i * 12}" width="12" height="12" fill="rgb(${view.accent})" fill-opacity="${MinibertPanels.format(w, 4)}"/>`);
        }
      }
    }
    m.tokens.forEach((token, t) => {
      const text = escapeXml(token);
      if (view.mode === "lines") {
        parts.push(`<text x="${label - 6}" y="${4 + (t + 0.5) * row}" text-anchor="end" dominant-baseline="middle">${text}</text>`);
        parts.push(`<text x="${label + gap + 6}" y="${4 + (t + 0.5) * row}" dominant-baseline="middle">${text}</text>`);
      } else {
        parts.push(`<text x="${label - 4}" y="${label + t * 12 + 6}" text-anchor="end" dominant-baseline="middle">${text}</text>`);
        parts.push(`<text transform="translate(${label + t * 12 + 6},${label - 4}) rotate(-90)" dominant-baseline="middle">${text}</text>`);
      }
    });
    parts.push("</svg>");
    return parts.join("\n");
  }

  function dataJson() {
    const view = MinibertPanels.current();
    const m = window.minibert, T = view.data.T, weights = m.attention(view.layer, view.head), rows = [];
    for (let i = 0; i < T; i++) rows.push(Array.from(weights.subarray(i * T, (i + 1) * T)));
    const predictions = view.data.K ? Array.from({ length: view.data.L + 1 }, (_, l) => m.predictions(l)) : null;
    return JSON.stringify({
      format: m.format, model: m.model, tokens: m.tokens, inputIds: m.inputIds, tokenTypeIds: m.tokenTypeIds,
      wordIds: m.wordIds, offsets: m.offsets, maskPositions: m.maskPositions, layers: m.layers, heads: m.heads,
      layerNumbering: "as hidden_states: 0 = the embeddings' output (norms[0], predictions[0]), 1 … L = the encoder " +
        "layers (openHead.layer; its weights are transformers' attentions[layer - 1])",
      attentionBits: m.attentionBits, openHead: { layer: view.layer, head: view.head, attention: rows },
      headStatistics: m.headStatistics(), predictions, leadLayers: m.leadLayers,
      norms: Array.from({ length: view.data.L + 1 }, (_, l) => Array.from(m.norms(l))),
    });
  }

  function fileStem(view) {  // never a hidden file (".x") nor a name that starts with "-": "minibert" for a name that gives none
    const name = window.minibert.model.replace(/[^\w.-]+/g, "_").replace(/^[.-]+/, "");
    return `${name || "minibert"}-layer${view.layer}-head${view.head}`;
  }

  function wire() {
    const canvas = document.getElementById("head-canvas");
    const stem = () => fileStem(MinibertPanels.current());
    document.getElementById("export-png").addEventListener("click", () => canvas.toBlob((blob) => download(blob, stem() + ".png")));
    document.getElementById("export-svg").addEventListener("click", () => download(new Blob([headSvg()], { type: "image/svg+xml" }), stem() + ".svg"));
    document.getElementById("export-json").addEventListener("click", () => download(new Blob([dataJson()], { type: "application/json" }), stem() + ".json"));
  }

  return { wire, headSvg, dataJson };
})();

(function start() {
  let markReady, markFailed;
  const ready = new Promise((resolve, reject) => { markReady = resolve; markFailed = reject; });
  ready.catch(() => {});  // (the error is shown on the page and logged once, below)
  window.minibert = { isReady: false, ready };
  const status = document.getElementById("status");
  try {
    const raw = JSON.parse(document.getElementById("minibert-data").textContent);
    MinibertData.decode(raw).then((decoded) => {
      MinibertPanels.draw(decoded);
      MinibertHidden.draw(decoded);
      MinibertExport.wire();
      window.minibert.isReady = true;
      document.documentElement.dataset.ready = "true";
      status.textContent = "";
      markReady(window.minibert);
    }).catch(fail);
  } catch (error) {
    fail(error);
  }

  function fail(error) {
    status.textContent = `This page could not be drawn: ${error && error.message ? error.message : error}`;
    status.classList.add("error");
    document.documentElement.dataset.ready = "failed";
    console.error(error);
    markFailed(error);
  }
})();
