// Greedy decoding through ONNX Runtime alone (onnxruntime-node), with the
// graphs tests/onnx/export_seq2seq.cpp wrote: per batch of sources the
// encoder once, then the decoder step in a loop (BOS first, each step's
// argmax fed back, a finished row fed EOS), stopping at EOS or max_len as
// models::greedy_decode does. Every sequence must equal xgrad's, except
// where the two part at a step whose top two logits xgrad found within TIE
// of each other (relative to the row's largest logit): there the argmax is
// decided by float32 rounding, which two runtimes need not share. Fails,
// never skips, when the runtime is missing.
// Usage: node decode_ort.js DIR (NODE_PATH naming onnxruntime-node's node_modules)
'use strict';
const fs = require('fs');
const path = require('path');

let ort;
try {
  ort = require('onnxruntime-node');
} catch (e) {
  console.log('decode_ort: onnxruntime-node is not installed (scripts/setup.sh installs it into build/onnxruntime): ' +
              e.message.split('\n')[0]);
  process.exit(1);
}

// Ten times run_ort.js's tolerance on one step's outputs: the state that
// feeds a later step has been rounded differently at every step before.
const TIE = 1e-4;

function argmaxRows(logits) {
  const [rows, v] = logits.dims;
  const out = [];
  for (let r = 0; r < rows; ++r) {
    let best = 0;
    for (let j = 1; j < v; ++j)
      if (logits.data[r * v + j] > logits.data[r * v + best]) best = j;
    out.push(best);
  }
  return out;
}

// One batch: the sequences ONNX Runtime decodes.
async function decodeBatch(encoder, step, m, src, cfg) {
  const rows = src.shape[0];
  const enc = await encoder.run({src: new ort.Tensor('int64', BigInt64Array.from(src.data.map(BigInt)), src.shape)});
  const state = {h: enc.h, memory: enc.memory, pad: enc.pad};
  for (const name of m.zero_state) state[name] = new ort.Tensor('float32', new Float32Array(rows * m.width), [rows, m.width]);
  const out = Array.from({length: rows}, () => []);
  const done = new Array(rows).fill(false);
  let tokens = new Array(rows).fill(cfg.bos);
  for (let t = 0; t < cfg.max_len; ++t) {
    const feeds = {tokens: new ort.Tensor('int64', BigInt64Array.from(tokens.map(BigInt)), [rows])};
    for (const name of step.inputNames) if (name !== 'tokens') feeds[name] = state[name];
    const r = await step.run(feeds);
    for (const name of ['h', ...m.zero_state]) state[name] = r[name + '_next'];
    const next = argmaxRows(r.logits);
    for (let b = 0; b < rows; ++b) {
      if (!done[b] && next[b] === cfg.eos) done[b] = true;
      if (!done[b]) out[b].push(next[b]);
      tokens[b] = done[b] ? cfg.eos : next[b];
    }
    if (done.every(x => x)) break;
  }
  return out;
}

async function main() {
  const dir = process.argv[2];
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'decode.json')));
  let equal = 0, total = 0, ties = 0, bad = 0;
  for (const m of cfg.models) {
    const encoder = await ort.InferenceSession.create(path.join(dir, m.encoder));
    const step = await ort.InferenceSession.create(path.join(dir, m.step));
    let same = 0, n = 0;
    for (const batch of m.batches) {
      const got = await decodeBatch(encoder, step, m, batch.src, cfg);
      for (let i = 0; i < got.length; ++i, ++n) {
        const want = batch.expected[i];
        if (JSON.stringify(got[i]) === JSON.stringify(want)) {
          ++same;
          continue;
        }
        // The first step where the two decodes part (a prefix ends on EOS).
        let t = 0;
        while (t < got[i].length && t < want.length && got[i][t] === want[t]) ++t;
        const margin = batch.margins[i][t];
        const tie = margin <= TIE;
        if (tie) ++ties;
        else ++bad;
        if (tie || bad <= 3) console.log(`decode_ort: ${m.step} source ${n}: ONNX Runtime [${got[i]}], xgrad [${want}]; ` +
                    `they part at step ${t}, where xgrad's top two logits are ${margin.toExponential(2)} apart ` +
                    `(relative)${tie ? ', a tie' : ''}`);
      }
    }
    console.log(`decode_ort: ${m.encoder} + ${m.step}: ${same} of ${n} greedy decodes equal xgrad's`);
    equal += same;
    total += n;
  }
  console.log(`decode_ort: ${equal} of ${total} equal, ${ties} part at a tie (top two logits within ${TIE}), ` +
              `${bad} differ`);
  process.exit(bad === 0 && equal + ties === total && total > 0 ? 0 : 1);
}

main().catch(e => {
  console.log('decode_ort: ' + e.message);
  process.exit(1);
});
