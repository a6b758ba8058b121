#!/usr/bin/env node
// Runs an ONNX model with ONNX Runtime (the tests' reference peer).
//
//   node run.js model.onnx out_dir [--no-opt] [name=input.npy ...]
//
// Inputs not given on the command line get deterministic pseudo-random data
// (seeded by the input name), written next to the outputs as <name>.npy so
// that other tools can be run on exactly the same data. Every output is
// written to out_dir/<sanitized name>.npy, with an index.txt mapping names.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const { readNpy: readNpyWith, writeNpy } = require('./npy');
const readNpy = file => readNpyWith(file, ort);

function safeName(name) { return name.replace(/[^A-Za-z0-9_.-]/g, '_'); }

// xorshift32 seeded from the name: reproducible inputs without a file.
function randomTensor(name, meta) {
  let seed = 2166136261;
  for (const c of name) seed = Math.imul(seed ^ c.charCodeAt(0), 16777619) >>> 0;
  const next = () => { seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0; return seed / 4294967296; };
  const dims = meta.shape.map(d => (typeof d === 'number' && d > 0 ? d : 1));
  const n = dims.reduce((a, b) => a * b, 1);
  if (meta.type !== 'float32') throw new Error(`no random data for ${meta.type} input ${name}`);
  const data = new Float32Array(n);
  for (let i = 0; i < n; ++i) data[i] = next() * 2 - 1;
  return new ort.Tensor('float32', data, dims);
}

async function main() {
  const args = process.argv.slice(2);
  const [model, outDir] = args;
  if (!model || !outDir) throw new Error('usage: run.js model.onnx out_dir [--no-opt] [name=x.npy ...]');
  const noOpt = args.includes('--no-opt');
  const given = {};
  for (const a of args.slice(2)) {
    if (a.startsWith('--')) continue;
    const eq = a.indexOf('=');
    given[a.slice(0, eq)] = readNpy(a.slice(eq + 1));
  }
  const session = await ort.InferenceSession.create(model, {
    graphOptimizationLevel: noOpt ? 'disabled' : 'all',
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
  });
  fs.mkdirSync(outDir, { recursive: true });
  const feeds = {};
  const index = [];
  for (const [i, name] of session.inputNames.entries()) {
    if (given[name]) { feeds[name] = given[name]; continue; }
    const meta = session.inputMetadata ? session.inputMetadata[i] : null;
    if (!meta || !meta.isTensor) throw new Error(`input ${name}: no data given`);
    feeds[name] = randomTensor(name, meta);
    writeNpy(path.join(outDir, `input.${safeName(name)}.npy`), feeds[name]);
  }
  const results = await session.run(feeds);
  for (const name of session.outputNames) {
    const file = `${safeName(name)}.npy`;
    writeNpy(path.join(outDir, file), results[name]);
    index.push(`${file}\t${name}`);
  }
  fs.writeFileSync(path.join(outDir, 'index.txt'), index.join('\n') + '\n');
}

main().catch(e => { console.error(`ort: ${e.message}`); process.exit(1); });
