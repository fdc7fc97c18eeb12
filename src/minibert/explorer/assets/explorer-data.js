// The page's data: decode the JSON written by minibert (payload.py) and fill the contract
// window.minibert that scripts and tests read (docs/explore.md):
//   tokens, layers, heads, attention(layer, head) → Float32Array of T·T weights (row-major),
//   predictions(layer) → per position [[piece, probability], ...] best first, or null (no MLM head),
// Layers are numbered as hidden_states numbers them, everywhere on the page: 0 is the embeddings'
// output (no attention), 1 … L the encoder layers (attention(layer, ·) takes 1 … L, the others 0 … L),
// as scripts/plot_attention.py --layer does; heads count from 0.
//   ready → a Promise resolved once the data is decoded and every panel is drawn.
"use strict";

const MinibertData = (function () {
  function bytesOfBase64(text) {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text);
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }

  async function inflate(bytes) {  // zlib's format: DecompressionStream("deflate")
    if (typeof DecompressionStream === "undefined") {
      throw new Error("this browser cannot inflate the page's data (no DecompressionStream): open it in a current " +
                      "Chrome, Edge, Firefox or Safari");
    }
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  function count(shape) { return shape.reduce((a, b) => a * b, 1); }

  function exact(packed) {  // {dtype: float32|int32, shape, raw: base64 of little-endian values}
    const bytes = bytesOfBase64(packed.raw);
    const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
    const values = packed.dtype === "float32" ? new Float32Array(buffer) : new Int32Array(buffer);
    if (values.length !== count(packed.shape)) throw new Error("minibert: a data array has the wrong length");
    return values;
  }

  async function quantized(packed) {  // {dtype: uint8|uint16, shape, low, step, deflated}: value = low + q·step
    const bytes = await inflate(bytesOfBase64(packed.deflated));
    const values = packed.dtype === "uint8" ? bytes : new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.length / 2);
    if (values.length !== count(packed.shape)) throw new Error("minibert: the attention data has the wrong length");
    return { q: values, low: packed.low, step: packed.step, shape: packed.shape, bits: packed.dtype === "uint8" ? 8 : 16 };
  }

  function checkIndex(name, value, limit, first = 0, why = "") {
    if (!Number.isInteger(value) || value < first || value >= limit) {
      throw new RangeError(`minibert: ${name} must be an integer from ${first} to ${limit - 1}${why}, got ${value}`);
    }
  }
  const ENCODER_LAYERS = " (encoder layers count from 1: layer 0 is the embeddings, which have no attention)";

  async function decode(raw) {
    const T = raw.tokens.length, L = raw.layers, A = raw.heads;
    const attention = await quantized(raw.attention);
    const similarity = await quantized(raw.similarity);
    const norms = exact(raw.norms);
    const statistics = {};
    for (const name of Object.keys(raw.headStatistics.values)) statistics[name] = exact(raw.headStatistics.values[name]);
    let guesses = null, probabilities = null, K = 0;
    if (raw.predictions) {
      guesses = exact(raw.predictions.guesses);
      probabilities = exact(raw.predictions.probabilities);
      K = raw.predictions.guesses.shape[2];
    }
    const size = T * T;

    function dequantize(packed, offset) {
      const out = new Float32Array(size);
      const q = packed.q, low = packed.low, step = packed.step;
      for (let i = 0; i < size; i++) out[i] = low + q[offset + i] * step;
      return out;
    }

    const api = window.minibert;
    Object.assign(api, {
      format: raw.format, model: raw.model, tokens: raw.tokens.slice(), layers: L, heads: A, topK: raw.topK,
      inputIds: raw.inputIds.slice(), tokenTypeIds: raw.tokenTypeIds.slice(), wordIds: raw.wordIds.slice(),
      offsets: raw.offsets.map((pair) => pair.slice()), maskPositions: raw.maskPositions.slice(),
      truncated: raw.truncated, cut: raw.cut, dtype: raw.dtype, attentionBits: attention.bits, attentionMaxError: attention.step / 2,
      attention(layer, head) {
        checkIndex("layer", layer, L + 1, 1, ENCODER_LAYERS); checkIndex("head", head, A);
        return dequantize(attention, ((layer - 1) * A + head) * size);
      },
      predictions(layer) {
        checkIndex("layer", layer, L + 1);
        if (!guesses) return null;
        const pieces = raw.predictions.pieces, rows = [];
        for (let t = 0; t < T; t++) {
          const row = [];
          for (let k = 0; k < K; k++) {
            const at = (layer * T + t) * K + k;
            row.push([pieces[guesses[at]], probabilities[at]]);
          }
          rows.push(row);
        }
        return rows;
      },
      leadLayers: raw.predictions ? raw.predictions.leadLayers.slice() : null,
      similarity(layer) { checkIndex("layer", layer, L + 1); return dequantize(similarity, layer * size); },
      norms(layer) { checkIndex("layer", layer, L + 1); return norms.slice(layer * T, (layer + 1) * T); },
      headStatistics() {
        const out = {};
        for (const [name, values] of Object.entries(statistics)) out[name] = Array.from(values);
        const layer = [], head = [];  // each value's labels: layer 1 … L (as hidden_states counts), head 0 … A − 1
        for (let l = 1; l <= L; l++) for (let h = 0; h < A; h++) { layer.push(l); head.push(h); }
        return { names: Object.assign({}, raw.headStatistics.names), values: out, layer, head };
      },
    });
    return { raw, attention, similarity, norms, statistics, T, L, A, K };
  }

  return { decode };
})();
