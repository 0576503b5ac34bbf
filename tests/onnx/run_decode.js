// ONNX Runtime's side of the decoding checks of a model that xg_export
// wrote (examples/onnx_decode/ort_decoder.js decodes), against xgrad's
// side written by onnx_decode_reference:
//   - every step's logits of each case (several batch sizes and lengths;
//     for the GPT a prompt's prefill first), the same ids fed: the largest difference relative to the step's
//     largest logit must be <= 1e-5;
//   - (Transformer) greedy decoding of every source, batched as xgrad
//     batched them: every sequence must equal xgrad's.
// Prints the figures and ORT's decoding time. Fails, never skips, when the
// runtime is missing.
// Usage: node run_decode.js MODELDIR REFERENCE.json [THREADS]
'use strict';
const fs = require('fs');
const path = require('path');

let decoders;
try {
  decoders = require(path.join(__dirname, '../../examples/onnx_decode/ort_decoder.js'));
} catch (e) {
  console.log('run_decode: onnxruntime-node is not installed (scripts/setup.sh installs it into build/onnxruntime): ' +
              e.message.split('\n')[0]);
  process.exit(1);
}

const TOLERANCE = 1e-5;

function relDiff(got, want) {
  if (got.length !== want.length) return Infinity;
  let diff = 0, scale = 0;
  for (let i = 0; i < want.length; ++i) {
    if (Number.isNaN(got[i])) return Infinity;
    diff = Math.max(diff, Math.abs(got[i] - want[i]));
    scale = Math.max(scale, Math.abs(want[i]));
  }
  return diff / Math.max(scale, 1e-30);
}

// Feeds each case's ids step by step; returns [steps, worst relative
// difference]. `start` gives the state, and the logits before the first
// step where the case has them (a GPT's prefill: its logits[0]).
async function checkSteps(model, cases, start) {
  let steps = 0, worst = 0;
  for (const c of cases) {
    const {state, logits: first} = await start(c);
    const offset = first ? 1 : 0;
    if (first) {
      const d = relDiff(first.data, c.logits[0]);
      worst = Math.max(worst, d);
      if (!(d <= TOLERANCE)) console.log(`run_decode: case of ${state.B} rows, prefill: relative difference ${d}  FAILED`);
      ++steps;
    }
    for (let t = 0; t < c.tokens.length; ++t) {
      const logits = await model.step(state, c.tokens[t]);
      const d = relDiff(logits.data, c.logits[t + offset]);
      worst = Math.max(worst, d);
      if (!(d <= TOLERANCE)) console.log(`run_decode: case of ${state.B} rows, step ${t}: relative difference ${d}  FAILED`);
      ++steps;
    }
  }
  return [steps, worst];
}

async function checkGreedy(model, g) {
  let equal = 0, shown = 0, tokens = 0;
  const distinct = new Set();
  const start = process.hrtime.bigint(), runBefore = decoders.timing.runSeconds;
  for (let i = 0, k = 0; i < g.sources.length; i += g.batch, ++k) {
    const out = await model.greedy(g.sources.slice(i, i + g.batch), g.limits[k]);
    out.forEach((seq, j) => {
      const want = g.outputs[i + j];
      tokens += want.length;
      distinct.add(want.join(' '));
      if (JSON.stringify(seq) === JSON.stringify(want)) ++equal;
      else if (shown++ < 5) console.log(`run_decode: source ${i + j}: ORT ${seq.join(' ')} != xgrad ${want.join(' ')}`);
    });
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(`run_decode: greedy ${equal}/${g.sources.length} sequences equal (${distinct.size} distinct outputs, ` +
              `${tokens} tokens, batches of ${g.batch})`);
  const inRun = decoders.timing.runSeconds - runBefore;
  console.log(`run_decode: greedy time ORT ${seconds.toFixed(3)} s (${inRun.toFixed(3)} s in run()), ` +
              `xgrad ${g.xgrad_seconds.toFixed(3)} s ` +
              `(${g.threads} thread(s))`);
  return equal === g.sources.length && distinct.size > 1;
}

async function main() {
  const [dir, refPath, threadsArg] = process.argv.slice(2);
  const ref = JSON.parse(fs.readFileSync(refPath, 'utf8'));
  const threads = Number(threadsArg || 1);
  const manifest = decoders.readManifest(dir);
  let ok = true, steps, worst;
  if (manifest.family === 'transformer') {
    const model = await decoders.Seq2SeqDecoder.load(dir, {threads});
    const rows = c => Array.from({length: c.shape[0]}, (_, r) => c.src.slice(r * c.shape[1], (r + 1) * c.shape[1]));
    [steps, worst] = await checkSteps(model, ref.steps, async c => ({state: await model.encode(rows(c))}));
    ok = await checkGreedy(model, ref.greedy) && ok;
  } else {
    const model = await decoders.GPTStepper.load(dir, {threads});
    [steps, worst] = await checkSteps(model, ref.steps, c => model.prefill(c.prompt, c.rows));
  }
  ok = ok && worst <= TOLERANCE && steps > 0;
  console.log(`run_decode: ${manifest.family} (${manifest.kind}): ${steps} steps of ${ref.steps.length} cases, ` +
              `largest relative logit difference ${worst.toExponential(2)} (tolerance ${TOLERANCE})`);
  console.log(`run_decode: ${ok ? 'passed' : 'FAILED'}`);
  process.exit(ok ? 0 : 1);
}

main().catch(e => {
  console.log('run_decode: ' + e.message);
  process.exit(1);
});
