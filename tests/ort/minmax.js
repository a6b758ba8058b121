#!/usr/bin/env node
// MinMax calibration with ONNX Runtime: runs a model on several batches and
// prints, as JSON, the minimum and maximum of every output over all of them
// ({"name": [min, max], ...}). Give the model every tensor to calibrate as a
// graph output (bench/ort_qdq.py does). Each batch is one name=x.npy per
// input; the k-th occurrence of a name belongs to batch k.
//
//   node minmax.js model.onnx name=x0.npy name=x1.npy ...
'use strict';
const ort = require('onnxruntime-node');
const { readNpy } = require('./npy');

async function main() {
  const [model, ...rest] = process.argv.slice(2);
  if (!model || rest.length === 0)
    throw new Error('usage: minmax.js model.onnx name=x0.npy [name=x1.npy ...]');
  const batches = [];
  const seen = {};
  for (const a of rest) {
    const eq = a.indexOf('=');
    if (eq <= 0) throw new Error(`expected name=file.npy, got ${a}`);
    const name = a.slice(0, eq);
    const k = seen[name] = (seen[name] ?? -1) + 1;
    (batches[k] ??= {})[name] = readNpy(a.slice(eq + 1), ort);
  }
  const session = await ort.InferenceSession.create(model, {
    graphOptimizationLevel: 'disabled', intraOpNumThreads: 1, interOpNumThreads: 1,
  });
  const range = {};
  for (const feeds of batches) {
    const results = await session.run(feeds);
    for (const name of session.outputNames) {
      const data = results[name].data;
      if (!(data instanceof Float32Array)) continue;
      let lo = Infinity, hi = -Infinity;
      for (const v of data) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
      const r = range[name];
      range[name] = r ? [Math.min(r[0], lo), Math.max(r[1], hi)] : [lo, hi];
    }
  }
  console.log(JSON.stringify(range));
}

main().catch(e => { console.error(`minmax: ${e.message}`); process.exit(1); });
