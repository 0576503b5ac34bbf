// Decoding with a model that xg_export wrote, in ONNX Runtime alone (the npm
// package onnxruntime-node): the files and their inputs and outputs are read
// from OUTDIR/manifest.json, nothing of xgrad runs. Used by decode_copy.js
// (the example) and by tests/onnx/run_decode.js (which compares it with
// xgrad's own decoder).
//
//   const {Seq2SeqDecoder} = require('./ort_decoder');
//   const d = await Seq2SeqDecoder.load(outdir, {threads: 1});
//   const outputs = await d.greedy([[3, 4, 5], [6, 7]], 20);  // one id list per source
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function readManifest(dir) {
  return JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
}

function sessionOptions(threads) {
  return {intraOpNumThreads: threads || 1, interOpNumThreads: 1, executionMode: 'sequential'};
}

// Seconds spent inside ONNX Runtime's run() calls (the rest of a decode is
// this script's own work: feeds, argmax), for a benchmark to tell apart.
const timing = {runSeconds: 0};
async function timedRun(session, feeds) {
  const start = process.hrtime.bigint();
  const result = await session.run(feeds);
  timing.runSeconds += Number(process.hrtime.bigint() - start) / 1e9;
  return result;
}

const int64 = (values, dims) => new ort.Tensor('int64', BigInt64Array.from(values.map(BigInt)), dims);

// Index of the largest of row r's V values (the first on ties, as xgrad's argmax).
function argmaxRow(data, r, V) {
  let best = 0;
  for (let j = 1; j < V; ++j) if (data[r * V + j] > data[r * V + best]) best = j;
  return best;
}

// The self-attention caches a first step reads: each past_* input empty (B,0,C).
function emptyCaches(graph, B) {
  const caches = {};
  for (const input of graph.inputs)
    if (input.name.startsWith('past_')) {
      const C = Number(input.axes[2]);
      caches[input.name] = new ort.Tensor('float32', new Float32Array(0), [B, 0, C]);
    }
  return caches;
}

// A step's present_* outputs become the next step's past_* inputs.
function nextCaches(result) {
  const caches = {};
  for (const [name, t] of Object.entries(result))
    if (name.startsWith('present_')) caches['past_' + name.slice('present_'.length)] = t;
  return caches;
}

// The Transformer of the seq2seq and g2p checkpoints: encoder.onnx once per
// batch of sources, then decoder_step.onnx once per output token.
class Seq2SeqDecoder {
  static async load(dir, {threads} = {}) {
    const d = new Seq2SeqDecoder();
    d.manifest = readManifest(dir);
    if (d.manifest.family !== 'transformer') throw new Error(`${dir}: a ${d.manifest.family} model, not a Transformer`);
    const graph = name => d.manifest.graphs.find(g => g.file === name);
    d.stepGraph = graph('decoder_step.onnx');
    d.encoder = await ort.InferenceSession.create(path.join(dir, 'encoder.onnx'), sessionOptions(threads));
    d.decoder = await ort.InferenceSession.create(path.join(dir, 'decoder_step.onnx'), sessionOptions(threads));
    d.tokens = d.manifest.tokens;
    return d;
  }

  // Sources (lists of ids) padded into one (B,S) batch; the encoder's outputs.
  async encode(sources) {
    const S = Math.max(...sources.map(s => s.length));
    const ids = [];
    for (const s of sources) ids.push(...s, ...Array(S - s.length).fill(this.tokens.pad));
    const out = await timedRun(this.encoder, {src: int64(ids, [sources.length, S])});
    return {B: sources.length, encoded: out, caches: emptyCaches(this.stepGraph, sources.length), position: 0};
  }

  // One step: tokens (one a row) at the state's position -> logits (B*V
  // floats, row after row); the state's caches and position move on.
  async step(state, tokens) {
    const feeds = {tokens: int64(tokens, [state.B, 1]), position: int64([state.position], [1]), ...state.caches};
    for (const input of this.stepGraph.inputs)
      if (!(input.name in feeds)) feeds[input.name] = state.encoded[input.name];  // src_pad, memory_k_i, memory_v_i
    const result = await timedRun(this.decoder, feeds);
    state.caches = nextCaches(result);
    state.position += 1;
    return result.logits;
  }

  // Greedy decoding of every source, at most `limit` tokens each, without
  // BOS and stopping at (and without) EOS; a finished row is fed padding.
  async greedy(sources, limit) {
    const state = await this.encode(sources);
    const B = sources.length, out = sources.map(() => []), done = Array(B).fill(false);
    let last = Array(B).fill(this.tokens.bos);
    for (let t = 0; t < limit && !done.every(x => x); ++t) {
      const logits = await this.step(state, last);
      const V = logits.dims[1];
      last = last.map((_, r) => {
        const next = argmaxRow(logits.data, r, V);
        if (!done[r]) {
          if (next === this.tokens.eos) done[r] = true;
          else out[r].push(next);
        }
        return done[r] ? this.tokens.pad : next;
      });
    }
    return out;
  }
}

// The GPT of the char_lm checkpoints: prefill.onnx once per prompt, then
// step.onnx once per token.
class GPTStepper {
  static async load(dir, {threads} = {}) {
    const g = new GPTStepper();
    g.manifest = readManifest(dir);
    g.session = await ort.InferenceSession.create(path.join(dir, 'step.onnx'), sessionOptions(threads));
    g.prefillSession = await ort.InferenceSession.create(path.join(dir, 'prefill.onnx'), sessionOptions(threads));
    return g;
  }
  // Prompts of equal length T (B*T ids, row after row) -> the state after
  // them and the logits of the next token.
  async prefill(ids, B) {
    const T = ids.length / B;
    const result = await timedRun(this.prefillSession, {tokens: int64(ids, [B, T])});
    return {state: {B, caches: nextCaches(result), position: T}, logits: result.logits};
  }
  async step(state, tokens) {
    const result = await timedRun(this.session,
        {tokens: int64(tokens, [state.B, 1]), position: int64([state.position], [1]), ...state.caches});
    state.caches = nextCaches(result);
    state.position += 1;
    return result.logits;
  }
}

module.exports = {Seq2SeqDecoder, GPTStepper, readManifest, timing};
