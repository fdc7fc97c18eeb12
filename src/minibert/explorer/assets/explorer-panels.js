// The page's panels, drawn from MinibertData.decode's result. Every string from the text or the
// vocabulary goes into the page as text (textContent, canvas fillText, escaped SVG), never as HTML.
"use strict";

const MinibertPanels = (function () {
  const ACCENT = [11, 92, 173];
  let data = null, openLayer = 1, openHead = 0, chosen = null, hoverRow = null;

  function $(id) { return document.getElementById(id); }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function shade(value) {  // 0 → white, 1 → the accent colour
    const v = Math.max(0, Math.min(1, value));
    return ACCENT.map((c) => Math.round(255 - (255 - c) * v));
  }

  function diverging(value) {  // -1 → red, 0 → white, 1 → blue
    const v = Math.max(-1, Math.min(1, value));
    return v >= 0 ? [Math.round(255 - 220 * v), Math.round(255 - 150 * v), 255]
                  : [255, Math.round(255 + 170 * v), Math.round(255 + 200 * v)];
  }

  function format(value, digits) { return Number(value).toFixed(digits === undefined ? 3 : digits); }

  // ----------------------------------------------------------------------------- tokens
  function drawTokens() {
    const box = $("tokens"), m = window.minibert, masks = new Set(m.maskPositions);
    m.tokens.forEach((token, t) => {
      const special = m.wordIds[t] === null;
      const chip = el("span", "token" + (special ? " special" : "") + (masks.has(t) ? " mask" : ""));
      chip.dataset.position = String(t);
      chip.appendChild(el("span", "piece", token));
      const [start, end] = m.offsets[t];
      const word = special ? "–" : m.wordIds[t];
      chip.appendChild(el("span", "facts", `#${t} id ${m.inputIds[t]} seg ${m.tokenTypeIds[t]} word ${word}`));
      chip.title = special ? "special token" : `characters ${start}–${end} of its text`;
      chip.addEventListener("click", () => choose(t));
      box.appendChild(chip);
    });
  }

  function choose(position) {
    chosen = chosen === position ? null : position;
    document.querySelectorAll(".token").forEach((chip) => {
      chip.classList.toggle("chosen", Number(chip.dataset.position) === chosen);
    });
    hoverRow = chosen;
    drawHead();
    if (chosen !== null && data.K) showGuesses(data.L, chosen);
  }

  // ----------------------------------------------------------------------------- model view
  function drawModelGrid() {
    const grid = $("model-grid"), { T, L, A } = data, size = Math.min(T, 56);
    grid.style.gridTemplateColumns = `3.5em repeat(${A}, 58px)`;
    grid.appendChild(el("span", "label", ""));
    for (let h = 0; h < A; h++) grid.appendChild(el("span", "label", `head ${h}`));
    for (let l = 1; l <= L; l++) {  // encoder layers 1 … L, as hidden_states numbers them
      grid.appendChild(el("span", "label", `layer ${l}`));
      for (let h = 0; h < A; h++) {
        const canvas = el("canvas", "thumb");
        canvas.width = size; canvas.height = size;
        canvas.dataset.layer = String(l); canvas.dataset.head = String(h);
        canvas.title = `layer ${l}, head ${h}`;
        canvas.addEventListener("click", () => open(l, h));
        drawThumbnail(canvas, l, h, size);
        grid.appendChild(canvas);
      }
    }
  }

  function drawThumbnail(canvas, layer, head, size) {  // max over each block of the T × T picture
    const { T, A } = data, q = data.attention.q, offset = ((layer - 1) * A + head) * T * T;
    const image = canvas.getContext("2d").createImageData(size, size);
    let top = 1;  // the picture's darkest shade is the head's largest weight
    for (let i = offset; i < offset + T * T; i++) if (q[i] > top) top = q[i];
    for (let y = 0; y < size; y++) {
      const r0 = Math.floor(y * T / size), r1 = Math.max(r0 + 1, Math.floor((y + 1) * T / size));
      for (let x = 0; x < size; x++) {
        const c0 = Math.floor(x * T / size), c1 = Math.max(c0 + 1, Math.floor((x + 1) * T / size));
        let best = 0;
        for (let r = r0; r < r1; r++) {
          const row = offset + r * T;
          for (let c = c0; c < c1; c++) if (q[row + c] > best) best = q[row + c];
        }
        const [red, green, blue] = shade(best / top), at = (y * size + x) * 4;
        image.data[at] = red; image.data[at + 1] = green; image.data[at + 2] = blue; image.data[at + 3] = 255;
      }
    }
    canvas.getContext("2d").putImageData(image, 0, 0);
  }

  // ----------------------------------------------------------------------------- head view
  function mode() { return document.querySelector('input[name="head-mode"]:checked').value; }

  function open(layer, head) {
    openLayer = layer; openHead = head;
    document.querySelectorAll("canvas.thumb.open").forEach((c) => c.classList.remove("open"));
    const thumb = document.querySelector(`canvas.thumb[data-layer="${layer}"][data-head="${head}"]`);
    if (thumb) thumb.classList.add("open");
    $("head-title").textContent = `layer ${layer}, head ${head}`;
    $("head-readout").textContent = "";
    drawHead();
  }

  let longestToken = null;  // px: the widest token at the matrix's label size, measured once per size

  function headGeometry() {
    const T = data.T;
    if (mode() === "lines") return { row: 18, label: 150, gap: 260, cell: 0 };
    const cell = Math.max(1, Math.min(22, Math.floor(760 / T))), font = Math.min(13, cell - 1);
    if (cell < 8) return { row: cell, label: 0, gap: 0, cell, font };
    if (longestToken === null || longestToken.font !== font) {
      const ctx = $("head-canvas").getContext("2d");
      ctx.font = `${font}px system-ui, sans-serif`;
      const widest = Math.max(...window.minibert.tokens.map((token) => ctx.measureText(token).width));
      longestToken = { font, width: Math.ceil(widest) };
    }
    return { row: cell, label: Math.min(150, longestToken.width + 10), gap: 0, cell, font };
  }

  function drawHead() {
    if (!data) return;
    const canvas = $("head-canvas"), ctx = canvas.getContext("2d"), T = data.T, g = headGeometry();
    const weights = window.minibert.attention(openLayer, openHead);
    ctx.textBaseline = "middle";
    if (mode() === "lines") {
      canvas.width = 2 * g.label + g.gap; canvas.height = T * g.row + 8;
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
      for (let i = 0; i < T; i++) {
        if (hoverRow !== null && i !== hoverRow) continue;
        for (let j = 0; j < T; j++) {
          const w = weights[i * T + j];
          if (w < 0.005) continue;
          ctx.strokeStyle = `rgba(${ACCENT.join(",")},${Math.min(1, w * (hoverRow === null ? 1 : 1.5))})`;
          ctx.lineWidth = hoverRow === null ? 1.5 : 2.5;
          ctx.beginPath(); ctx.moveTo(g.label, 4 + (i + 0.5) * g.row); ctx.lineTo(g.label + g.gap, 4 + (j + 0.5) * g.row);
          ctx.stroke();
        }
      }
      ctx.font = "13px system-ui, sans-serif";
      for (let t = 0; t < T; t++) {
        ctx.fillStyle = hoverRow === t ? "#0b5cad" : "#1b1f24";
        ctx.textAlign = "right"; ctx.fillText(window.minibert.tokens[t], g.label - 6, 4 + (t + 0.5) * g.row, g.label - 8);
        ctx.textAlign = "left"; ctx.fillText(window.minibert.tokens[t], g.label + g.gap + 6, 4 + (t + 0.5) * g.row, g.label - 8);
      }
      return;
    }
    canvas.width = g.label + T * g.cell + 4; canvas.height = g.label + T * g.cell + 4;
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
    const image = ctx.createImageData(T * g.cell, T * g.cell), width = T * g.cell;
    for (let i = 0; i < T; i++) {
      for (let j = 0; j < T; j++) {
        const dim = hoverRow !== null && i !== hoverRow ? 0.25 : 1;
        const [r, gr, b] = shade(weights[i * T + j] * dim);
        for (let y = i * g.cell; y < (i + 1) * g.cell; y++) {
          for (let x = j * g.cell; x < (j + 1) * g.cell; x++) {
            const at = (y * width + x) * 4;
            image.data[at] = r; image.data[at + 1] = gr; image.data[at + 2] = b; image.data[at + 3] = 255;
          }
        }
      }
    }
    ctx.putImageData(image, g.label, g.label);
    if (g.label) {
      ctx.font = `${g.font}px system-ui, sans-serif`; ctx.fillStyle = "#1b1f24";
      for (let t = 0; t < T; t++) {
        ctx.textAlign = "right"; ctx.fillText(window.minibert.tokens[t], g.label - 4, g.label + (t + 0.5) * g.cell, g.label - 6);
        ctx.save(); ctx.translate(g.label + (t + 0.5) * g.cell, g.label - 4); ctx.rotate(-Math.PI / 2);
        ctx.textAlign = "left"; ctx.fillText(window.minibert.tokens[t], 0, 0, g.label - 6); ctx.restore();
      }
    }
  }

  function onHeadHover(event) {
    const canvas = $("head-canvas"), rect = canvas.getBoundingClientRect(), g = headGeometry(), T = data.T;
    const x = (event.clientX - rect.left) * canvas.width / rect.width, y = (event.clientY - rect.top) * canvas.height / rect.height;
    let row = null, column = null;
    if (mode() === "lines") {
      const index = Math.floor((y - 4) / g.row);
      if (index >= 0 && index < T && (x < g.label || x > g.label + g.gap)) row = index;
    } else {
      const i = Math.floor((y - g.label) / g.cell), j = Math.floor((x - g.label) / g.cell);
      if (i >= 0 && i < T) row = i;
      if (i >= 0 && i < T && j >= 0 && j < T) column = j;
      if (x < g.label && i >= 0 && i < T) column = null;
    }
    const tokens = window.minibert.tokens, weights = window.minibert.attention(openLayer, openHead);
    if (row !== null && column !== null) {
      $("head-readout").textContent = `“${tokens[row]}” (#${row}) → “${tokens[column]}” (#${column}): ${format(weights[row * T + column], 4)}`;
    } else if (row !== null) {
      let best = 0;
      for (let j = 1; j < T; j++) if (weights[row * T + j] > weights[row * T + best]) best = j;
      $("head-readout").textContent = `“${tokens[row]}” (#${row}) looks most at “${tokens[best]}” (#${best}): ${format(weights[row * T + best], 4)}`;
    }
    if (row !== hoverRow && (chosen === null)) { hoverRow = row; drawHead(); }
  }

  // ----------------------------------------------------------------------------- statistics
  let sortKey = null, sortDescending = true;

  function drawStatistics() {
    const table = $("statistics"), names = Object.keys(data.raw.headStatistics.names), { L, A } = data;
    table.textContent = "";
    const head = el("tr");
    ["layer", "head", ...names].forEach((name) => {
      const label = name === "layer" || name === "head" ? name : data.raw.headStatistics.names[name];
      const th = el("th", name === "layer" || name === "head" ? "key" : "", label + (sortKey === name ? (sortDescending ? " ▼" : " ▲") : ""));
      th.dataset.key = name;
      th.addEventListener("click", () => { sortDescending = sortKey === name ? !sortDescending : true; sortKey = name; drawStatistics(); });
      head.appendChild(th);
    });
    table.appendChild(head);
    const rows = [];
    for (let l = 1; l <= L; l++) for (let h = 0; h < A; h++) rows.push({ l, h });
    const value = (row, key) => key === "layer" ? row.l : key === "head" ? row.h : data.statistics[key][(row.l - 1) * A + row.h];
    if (sortKey) rows.sort((a, b) => (value(a, sortKey) - value(b, sortKey)) * (sortDescending ? -1 : 1));
    for (const row of rows) {
      const tr = el("tr");
      tr.appendChild(el("td", "key", row.l)); tr.appendChild(el("td", "key", row.h));
      for (const name of names) tr.appendChild(el("td", "", format(value(row, name))));
      tr.addEventListener("click", () => { open(row.l, row.h); $("head-panel").scrollIntoView(); });
      table.appendChild(tr);
    }
    // the head column sticks where the layer column ends, so that both stay in view when scrolled
    table.style.setProperty("--layer-column", `${head.cells[0].getBoundingClientRect().width}px`);
  }

  // ----------------------------------------------------------------------------- logit lens
  function drawLens() {
    const m = window.minibert, summary = $("lens-summary"), table = $("lens");
    if (!data.K) {
      summary.appendChild(el("p", "no-head", "This checkpoint has no masked-LM head (cls.predictions.*): there are no " +
        "guesses to show. A checkpoint with BERT's pre-training heads (e.g. bert-base-uncased) shows them."));
      return;
    }
    const final = m.predictions(data.L), lead = m.leadLayers;
    for (const t of m.maskPositions) {
      const [piece, probability] = final[t][0];
      summary.appendChild(el("p", "", `${m.tokens[t]} at position ${t}: the last layer guesses “${piece}” ` +
        `(${format(probability)}); it is the best guess from layer ${lead[t]} on.`));
    }
    const head = el("tr");
    head.appendChild(el("th", "", "layer"));
    m.tokens.forEach((token, t) => {
      const th = el("th", m.maskPositions.includes(t) ? "mask" : "", token);
      th.title = `position ${t}`;
      head.appendChild(th);
    });
    table.appendChild(head);
    for (let l = 0; l <= data.L; l++) {
      const rows = m.predictions(l), tr = el("tr");
      tr.appendChild(el("th", "", l === 0 ? "0 (embeddings)" : String(l)));
      rows.forEach((guesses, t) => {
        const [piece, probability] = guesses[0];
        const td = el("td", l >= lead[t] ? "final-lead" : "", piece);
        const [r, g, b] = shade(probability * 0.6);
        td.style.backgroundColor = `rgb(${r},${g},${b})`;
        td.title = `layer ${l}, position ${t}: ${format(probability)}`;
        td.addEventListener("click", () => showGuesses(l, t));
        tr.appendChild(td);
      });
      table.appendChild(tr);
    }
  }

  function showGuesses(layer, position) {
    const box = $("lens-detail"), m = window.minibert;
    box.textContent = "";
    box.appendChild(el("p", "", `Layer ${layer}, position ${position} (“${m.tokens[position]}”): the ${data.K} best guesses`));
    for (const [piece, probability] of m.predictions(layer)[position]) {
      const row = el("div", "guess"), bar = el("span", "bar");
      bar.style.width = `${Math.max(1, Math.round(probability * 240))}px`;
      row.appendChild(el("span", "piece", piece)); row.appendChild(bar); row.appendChild(el("span", "", format(probability, 4)));
      box.appendChild(row);
    }
  }

  // ----------------------------------------------------------------------------- start
  // The reference computes in float32: fewer bits are approximate (int8's matrix products too), float64's more are not.
  const LESS_PRECISE_THAN_FLOAT32 = ["bfloat16", "float16", "int8"];
  function draw(decoded) {
    data = decoded;
    const m = window.minibert, T = data.T;
    $("model-name").textContent = m.model;
    $("summary").textContent = `${m.layers} layers × ${m.heads} heads, ${T} tokens` +
      (m.cut ? ` (${m.cut.said})` : "") +
      (data.raw.dtype !== "float32" ? `, computed in ${data.raw.dtype}` : "") +
      (LESS_PRECISE_THAN_FLOAT32.includes(data.raw.dtype) ? " (approximate numbers)" : "") +
      (data.K ? `, masked-LM head: yes (top ${m.topK} guesses)` : ", masked-LM head: none");
    $("attention-bits").textContent = String(m.attentionBits);
    $("attention-error").textContent = m.attentionMaxError.toPrecision(2);
    if (LESS_PRECISE_THAN_FLOAT32.includes(data.raw.dtype)) {  // not "of the exact value": the model's own are approximate
      $("attention-reference").textContent = `of what this ${data.raw.dtype} model computed, itself approximate`;
    }
    if (T > 96) document.querySelector('input[name="head-mode"][value="matrix"]').checked = true;
    drawTokens(); drawModelGrid(); drawStatistics(); drawLens();
    const canvas = $("head-canvas");
    canvas.addEventListener("mousemove", onHeadHover);
    canvas.addEventListener("mouseleave", () => { if (chosen === null && hoverRow !== null) { hoverRow = null; drawHead(); } });
    document.querySelectorAll('input[name="head-mode"]').forEach((input) => input.addEventListener("change", () => {
      $("head-readout").textContent = "";  // the other picture's readout does not describe this one
      drawHead();
    }));
    open(1, 0);
  }

  // what the exports (explorer-export.js) need to know: the open head, the view, the decoded data
  function current() { return { layer: openLayer, head: openHead, mode: mode(), data, accent: ACCENT }; }

  return { draw, current, format, el, diverging };
})();
