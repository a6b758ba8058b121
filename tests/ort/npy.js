// Minimal .npy reader/writer (C order, little-endian) for the ORT scripts.
'use strict';
const fs = require('fs');

const DTYPES = {
  float32: ['<f4', Float32Array], float64: ['<f8', Float64Array],
  int8: ['|i1', Int8Array], uint8: ['|u1', Uint8Array], int16: ['<i2', Int16Array],
  uint16: ['<u2', Uint16Array], int32: ['<i4', Int32Array], uint32: ['<u4', Uint32Array],
  int64: ['<i8', BigInt64Array], uint64: ['<u8', BigUint64Array], bool: ['|b1', Uint8Array],
  float16: ['<f2', Uint16Array],
};

function readNpy(file, ort) {
  const buf = fs.readFileSync(file);
  if (buf[0] !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY') {
    throw new Error(`${file}: not a .npy file`);
  }
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hstart = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', hstart, hstart + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',')
    .map(s => s.trim()).filter(s => s.length).map(Number);
  const type = Object.keys(DTYPES).find(k => DTYPES[k][0] === descr);
  if (!type) throw new Error(`${file}: unsupported dtype ${descr}`);
  const data = buf.subarray(hstart + hlen);
  const copy = new Uint8Array(data.length);
  copy.set(data);
  const Ctor = DTYPES[type][1];
  const values = type === 'bool'
    ? Array.from(copy, v => v !== 0) : new Ctor(copy.buffer);
  return new ort.Tensor(type, values, shape);
}

function writeNpy(file, tensor) {
  const entry = DTYPES[tensor.type];
  if (!entry) throw new Error(`cannot write ${tensor.type}`);
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '${entry[0]}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre[0] = 0x93; pre.write('NUMPY', 1, 'latin1'); pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  let data;
  if (tensor.type === 'bool') data = Buffer.from(Array.from(tensor.data, v => (v ? 1 : 0)));
  else data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), data]));
}

module.exports = { readNpy, writeNpy };
