#!/usr/bin/env node
// Checks that two ONNX models give bit-identical outputs under ONNX Runtime.
//
//   node roundtrip.js jobs.json results.json
//
// jobs.json: [{"name": ..., "a": "orig.onnx", "b": "exported.onnx",
//              "inputs": {"x": "x.npy", ...}, "inputs_b": {...},
//              "levels": ["all", "disabled"]}]
// inputs_b (default: inputs) names the inputs model b takes. "rtol" (default
// 0: bit-identical) lets float outputs differ by that share of their largest
// magnitude: for
// models whose operators qatc imports as a composition of others, which
// ONNX Runtime evaluates in another order than its fused kernel.
// results.json gets one entry per job and optimization level:
//   {"name", "level", "status": "exact" | "mismatch" | "a_failed" | "b_failed",
//    "detail"}
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');
const { readNpy } = require('./npy');

function sameBits(x, y, rtol) {
  if (x.type !== y.type || x.dims.length !== y.dims.length) return false;
  if (x.dims.some((d, i) => d !== y.dims[i])) return false;
  const bx = Buffer.from(x.data.buffer, x.data.byteOffset, x.data.byteLength);
  const by = Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength);
  if (bx.equals(by)) return true;
  // Float outputs may differ in the sign of a zero only: ONNX Runtime's own
  // kernels write -0 where the ONNX reference (and a decomposition into
  // plain ops, e.g. SoftmaxCrossEntropyLoss's ignored elements) writes +0.
  if (x.type !== 'float32' && x.type !== 'float64') return false;
  let scale = 0;
  for (const u of x.data) if (Math.abs(u) > scale) scale = Math.abs(u);
  for (let i = 0; i < x.data.length; i++) {
    const u = x.data[i], v = y.data[i];
    if (!(Object.is(u, v) || (u === 0 && v === 0) || (Number.isNaN(u) && Number.isNaN(v)) ||
          (rtol > 0 && Math.abs(u - v) <= rtol * scale)))
      return false;
  }
  return true;
}

async function runModel(path, feeds, level) {
  const session = await ort.InferenceSession.create(path, {
    graphOptimizationLevel: level, intraOpNumThreads: 1, interOpNumThreads: 1,
  });
  const out = await session.run(feeds);
  return { names: session.outputNames, out };
}

async function main() {
  const [jobsFile, resultsFile] = process.argv.slice(2);
  const jobs = JSON.parse(fs.readFileSync(jobsFile, 'utf8'));
  const results = [];
  for (const job of jobs) {
    const feeds = {};
    for (const [name, file] of Object.entries(job.inputs)) feeds[name] = readNpy(file, ort);
    // Model b may have fewer inputs (inputs frozen to constants at import).
    const feedsB = {};
    for (const name of Object.keys(job.inputs_b || job.inputs)) feedsB[name] = feeds[name];
    for (const level of job.levels || ['all']) {
      const r = { name: job.name, level, status: 'exact', detail: '' };
      let a, b;
      try { a = await runModel(job.a, feeds, level); } catch (e) {
        r.status = 'a_failed'; r.detail = String(e.message).split('\n')[0];
      }
      if (r.status === 'exact') {
        try { b = await runModel(job.b, feedsB, level); } catch (e) {
          r.status = 'b_failed'; r.detail = String(e.message).split('\n')[0];
        }
      }
      if (r.status === 'exact') {
        for (const name of a.names) {
          if (!(name in b.out)) { r.status = 'mismatch'; r.detail = `output ${name} missing`; break; }
          if (!sameBits(a.out[name], b.out[name], job.rtol || 0)) {
            r.status = 'mismatch'; r.detail = `output ${name} differs`; break;
          }
        }
      }
      results.push(r);
    }
  }
  fs.writeFileSync(resultsFile, JSON.stringify(results, null, 1));
}

main().catch(e => { console.error(`roundtrip: ${e.message}`); process.exit(1); });
