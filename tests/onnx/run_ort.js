// Runs every model that tests/onnx/export_models.cpp wrote through ONNX
// Runtime (the npm package onnxruntime-node, which scripts/setup.sh installs
// into the build), on each case of cases.json (the example's sizes and
// others), and compares with xgrad's outputs: the largest difference over
// an output, relative to that output's largest magnitude, must be <= 1e-5.
// Fails, never skips, when the runtime is missing. --floor F: the magnitude
// is at least F (the fuzzer's --onnx mode gives 1, its convention: an output
// near 0 by cancellation is compared on the scale of 1, not of itself).
// Usage: node run_ort.js DIR [--floor F] (NODE_PATH naming onnxruntime-node's node_modules)
'use strict';
const fs = require('fs');
const path = require('path');

let ort;
try {
  ort = require('onnxruntime-node');
} catch (e) {
  console.log('run_ort: onnxruntime-node is not installed (scripts/setup.sh installs it into build/onnxruntime): ' +
              e.message.split('\n')[0]);
  process.exit(1);
}

const TOLERANCE = 1e-5;
const floorAt = process.argv.indexOf('--floor');
const FLOOR = floorAt > 0 ? Number(process.argv[floorAt + 1]) : 1e-30;
if (!(FLOOR > 0)) {
  console.log(`run_ort: --floor ${process.argv[floorAt + 1]}: expected a number > 0`);
  process.exit(2);
}

function toOrt(t) {
  const data = t.dtype === 'int64' ? BigInt64Array.from(t.data.map(BigInt)) : Float32Array.from(t.data);
  return new ort.Tensor(t.dtype, data, t.shape);
}

// Largest |got - want| over the output, over the largest |want| (and the
// element-wise largest relative difference, for the report).
function compare(got, want) {
  if (JSON.stringify(Array.from(got.dims)) !== JSON.stringify(want.shape))
    return {error: `shape [${got.dims}] != [${want.shape}]`};
  let diff = 0, scale = 0;
  for (let i = 0; i < want.data.length; ++i) {
    diff = Math.max(diff, Math.abs(got.data[i] - want.data[i]));
    scale = Math.max(scale, Math.abs(want.data[i]));
    if (Number.isNaN(got.data[i]) !== Number.isNaN(want.data[i])) return {error: `NaN at ${i}`};
  }
  return {diff, rel: diff / Math.max(scale, FLOOR)};
}

// A model that ONNX Runtime cannot load or run fails by name; the others still run.
async function runModel(dir, m) {
  try {
    return await compareModel(dir, m);
  } catch (e) {
    console.log(`run_ort: ${m.file}: ${e.message.split('\n')[0]}  FAILED`);
    return {failed: m.cases.length, worst: 0, cases: m.cases.length};
  }
}

async function compareModel(dir, m) {
  const session = await ort.InferenceSession.create(path.join(dir, m.file), {logSeverityLevel: 4});
  let failed = 0, worst = 0;
  for (const c of m.cases) {
    const feeds = {};
    for (const [name, t] of Object.entries(c.inputs)) feeds[name] = toOrt(t);
    const result = await session.run(feeds);
    const sizes = Object.values(c.inputs).map(t => `[${t.shape}]`).join(' ');
    for (const [name, want] of Object.entries(c.outputs)) {
      const r = compare(result[name], want);
      const ok = !r.error && r.rel <= TOLERANCE;
      worst = Math.max(worst, r.rel || 0);
      console.log(`run_ort: ${m.file} ${sizes} -> ${name}: ` +
                  (r.error ? r.error : `max difference ${r.diff.toExponential(2)}, relative ${r.rel.toExponential(2)}`) +
                  (ok ? '' : '  FAILED'));
      if (!ok) ++failed;
    }
  }
  return {failed, worst, cases: m.cases.length};
}

async function main() {
  const dir = process.argv[2];
  const models = JSON.parse(fs.readFileSync(path.join(dir, 'cases.json'))).models;
  let passed = 0, failed = 0, worst = 0;
  for (const m of models) {
    const r = await runModel(dir, m);
    failed += r.failed;
    passed += r.cases - r.failed;
    worst = Math.max(worst, r.worst);
  }
  console.log(`run_ort: largest relative difference ${worst.toExponential(2)} (tolerance ${TOLERANCE})`);
  console.log(`run_ort: ${passed} passed, ${failed} failed`);
  process.exit(failed || !models.length ? 1 : 0);
}

main().catch(e => {
  console.log('run_ort: ' + e.message);
  process.exit(1);
});
