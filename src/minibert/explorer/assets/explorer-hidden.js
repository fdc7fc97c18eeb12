// The hidden-states panel, drawn from MinibertData.decode's result: at the chosen layer, the cosine
// similarity of every two positions as a grid named by its tokens on both axes, a colour scale with
// its numbers, and under each column that position's norm as a bar drawn from zero with its value.
// Layers run from 0 (the embeddings' output) to L, as hidden_states numbers them.
"use strict";

const MinibertHidden = (function () {
  const { el, diverging, format } = MinibertPanels;
  let data = null;

  function $(id) { return document.getElementById(id); }

  // The grid is a canvas of T × T cells; its axes are text elements (every token up to ~70 tokens,
  // one in k beyond, so that the names never overlap).
  const LABEL_SPACING = 11;  // px: the closest two axis labels may be
  const NORM_BAR = 90;  // px: the tallest bar (the layer's longest vector)
  let pinned = null;  // [i, j]: the pair the readout follows through the layers (a click on a cell)

  function hiddenGeometry() {
    const T = data.T, cell = Math.max(1, Math.min(20, Math.floor(760 / T)));
    const every = Math.max(1, Math.ceil(LABEL_SPACING / cell));  // label every k-th token
    return { cell, every, font: every === 1 ? Math.min(12, cell - 1) : 10, values: cell >= 10 };
  }

  function drawSimilarityAxes() {  // once: the tokens do not change with the layer
    const g = hiddenGeometry(), tokens = window.minibert.tokens;
    for (const [id, axis] of [["similarity-rows", "row"], ["similarity-columns", "column"]]) {
      const box = $(id);
      box.textContent = "";
      box.style.setProperty("--cell", `${g.cell}px`); box.style.setProperty("--font", `${g.font}px`);
      tokens.forEach((token, t) => {
        const shown = t % g.every === 0;
        const label = el("span", "axis-label" + (shown ? "" : " thinned"), shown ? token : "");
        label.dataset.position = String(t);
        label.title = `${axis} ${t}: “${token}”`;
        box.appendChild(label);
      });
    }
    $("similarity-thinned").textContent = g.every === 1 ? "" :
      `${data.T} tokens: one in ${g.every} is named on the axes, so that the names do not overlap (hover a cell for its two tokens).`;
    drawSimilarityScale();
  }

  function drawSimilarityScale() {  // the diverging colours from −1 to 1, with their numbers
    const canvas = $("similarity-scale-bar"), width = 240;
    canvas.width = width; canvas.height = 12;
    const ctx = canvas.getContext("2d");
    for (let x = 0; x < width; x++) {
      const [r, g, b] = diverging(-1 + 2 * (x + 0.5) / width);
      ctx.fillStyle = `rgb(${r},${g},${b})`; ctx.fillRect(x, 0, 1, 12);
    }
  }

  function drawHidden() {
    const layer = Number($("hidden-layer").value), T = data.T, g = hiddenGeometry(), m = window.minibert;
    $("hidden-layer-value").textContent = layer === 0 ? "0 (the embeddings)" : `${layer} of ${data.L}`;
    const canvas = $("similarity-canvas"), ctx = canvas.getContext("2d"), cosine = m.similarity(layer), side = T * g.cell;
    canvas.width = side; canvas.height = side;
    const image = ctx.createImageData(side, side);
    let low = 1, high = -1;
    for (let i = 0; i < T; i++) {
      for (let j = 0; j < T; j++) {
        const value = cosine[i * T + j], [r, gr, b] = diverging(value);
        if (i !== j) { low = Math.min(low, value); high = Math.max(high, value); }
        for (let y = i * g.cell; y < (i + 1) * g.cell; y++) {
          for (let x = j * g.cell, at = (y * side + x) * 4; x < (j + 1) * g.cell; x++, at += 4) {
            image.data[at] = r; image.data[at + 1] = gr; image.data[at + 2] = b; image.data[at + 3] = 255;
          }
        }
      }
    }
    ctx.putImageData(image, 0, 0);
    $("similarity-range").textContent = T > 1 ? `at this layer, two different positions range from ${format(low, 2)} ` +
      `to ${format(high, 2)} (the diagonal, a position with itself, is 1)` : "";
    drawNorms(layer, g);
    showPinned();
  }

  function drawNorms(layer, g) {  // bars from zero: a bar's height is its norm over the layer's longest
    const norms = window.minibert.norms(layer), box = $("norms"), tokens = window.minibert.tokens;
    const longest = Math.max(...norms) || 1;  // (all zero: no bar, rather than NaN px)
    box.textContent = "";
    box.style.setProperty("--cell", `${g.cell}px`);
    norms.forEach((norm, t) => {
      const column = el("span", "norm"), bar = el("span", "bar");
      column.dataset.position = String(t); column.dataset.norm = String(norm);
      column.title = `“${tokens[t]}” (#${t}): norm ${format(norm, 2)}`;
      bar.style.height = `${Math.round(NORM_BAR * norm / longest)}px`;
      column.appendChild(el("span", "value", g.values ? format(norm, 2) : ""));
      column.appendChild(bar);
      box.appendChild(column);
    });
    $("norms-top").textContent = format(longest, 2);
  }

  function cellAt(event) {
    const canvas = $("similarity-canvas"), rect = canvas.getBoundingClientRect(), T = data.T;
    const i = Math.floor((event.clientY - rect.top) / rect.height * T), j = Math.floor((event.clientX - rect.left) / rect.width * T);
    return i < 0 || j < 0 || i >= T || j >= T ? null : [i, j];
  }

  function highlightAxes(cell) {
    for (const [id, index] of [["similarity-rows", 0], ["similarity-columns", 1]]) {
      for (const label of $(id).children) {
        label.classList.toggle("hot", cell !== null && Number(label.dataset.position) === cell[index]);
      }
    }
  }

  function onHiddenHover(event) {
    const cell = cellAt(event);
    highlightAxes(cell);
    if (cell === null) return;
    const [i, j] = cell, layer = Number($("hidden-layer").value), m = window.minibert, T = data.T;
    const cosine = m.similarity(layer)[i * T + j], norms = m.norms(layer);
    $("hidden-readout").textContent = `layer ${layer}: cos(“${m.tokens[i]}” #${i}, “${m.tokens[j]}” #${j}) = ${format(cosine, 2)}; ` +
      `norms ${format(norms[i], 2)} and ${format(norms[j], 2)}`;
  }

  function showPinned() {  // the pinned pair's similarity at every layer: how the two positions drift
    const box = $("hidden-pinned");
    if (pinned === null) { box.textContent = "click a cell to follow its two positions through the layers"; return; }
    const [i, j] = pinned, m = window.minibert, T = data.T, values = [];
    for (let l = 0; l <= data.L; l++) values.push(format(m.similarity(l)[i * T + j], 2));
    box.textContent = `cos(“${m.tokens[i]}” #${i}, “${m.tokens[j]}” #${j}) at layers 0 (embeddings) … ${data.L}: ` +
      values.join(", ");
  }

  function draw(decoded) {
    data = decoded;
    $("hidden-layer").max = String(data.L); $("hidden-layer").value = String(data.L);
    drawSimilarityAxes();
    $("hidden-layer").addEventListener("input", drawHidden); drawHidden();
    const similarity = $("similarity-canvas");
    similarity.addEventListener("mousemove", onHiddenHover);
    similarity.addEventListener("mouseleave", () => highlightAxes(null));
    similarity.addEventListener("click", (event) => { pinned = cellAt(event); showPinned(); });
    $("norms").addEventListener("mouseover", (event) => {
      const column = event.target.closest(".norm");
      if (column) $("hidden-readout").textContent = `layer ${$("hidden-layer").value}: ${column.title}`;
    });
  }

  return { draw };
})();
