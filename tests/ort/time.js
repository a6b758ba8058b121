#!/usr/bin/env node
// Times ONNX Runtime on a model: one session, N runs, prints the median and
// minimum in milliseconds as JSON. Single-threaded unless ORT_THREADS says
// otherwise.
//
//   [ORT_THREADS=n] node time.js model.onnx runs [name=x.npy ...]
'use strict';
const ort = require('onnxruntime-node');
const { readNpy } = require('./npy');

async function main() {
  const [model, runsArg, ...rest] = process.argv.slice(2);
  const runs = Number(runsArg || 5);
  const session = await ort.InferenceSession.create(model, {
    graphOptimizationLevel: 'all', executionMode: 'sequential',
    intraOpNumThreads: Number(process.env.ORT_THREADS || 1), interOpNumThreads: 1,
  });
  const feeds = {};
  for (const a of rest) {
    const eq = a.indexOf('=');
    feeds[a.slice(0, eq)] = readNpy(a.slice(eq + 1), ort);
  }
  await session.run(feeds); // warm-up
  const times = [];
  for (let i = 0; i < runs; ++i) {
    const t = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({ median_ms: times[Math.floor(times.length / 2)], min_ms: times[0] }));
}

main().catch(e => { console.error(`time: ${e.message}`); process.exit(1); });
