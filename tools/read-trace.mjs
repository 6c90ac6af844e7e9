// read-trace.mjs RUN_DIR: reads every rank stream of a commprof run with
// Apache Arrow JS, independently of commprof's Go reader, and prints a JSON
// summary (rows, metadata, per-kind counts, sums, first and last rows).
// commprof's tests compare it with what the Go reader says.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { tableFromIPC, compressionRegistry, CompressionType } from 'apache-arrow';
import { decompress as zstdDecompress } from 'fzstd';
import lz4 from 'lz4js';

// Arrow JS reads compressed buffers through codecs the application
// registers. Each result is copied into a buffer of its own, which Arrow JS
// needs 8-byte aligned for 64-bit columns.
const fresh = (b) => {
  const out = new Uint8Array(new ArrayBuffer(b.length));
  out.set(b);
  return out;
};
compressionRegistry.set(CompressionType.ZSTD, { decode: (b) => fresh(zstdDecompress(b)) });
compressionRegistry.set(CompressionType.LZ4_FRAME, { decode: (b) => fresh(lz4.decompress(b)) });

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node read-trace.mjs RUN_DIR');
  process.exit(2);
}
const plain = (v) => (typeof v === 'bigint' ? v.toString() : v);
const row = (t, i) => Object.fromEntries(t.schema.fields.map((f) => [f.name, plain(t.getChild(f.name).get(i))]));
const ranks = [];
for (const file of readdirSync(dir).filter((f) => /^rank-\d{5,}\.arrows$/.test(f)).sort()) {
  const table = tableFromIPC(readFileSync(join(dir, file)));
  const kinds = {};
  let bytes = 0n;
  const kind = table.getChild('kind');
  const nbytes = table.getChild('bytes');
  const name = table.getChild('name');
  const value = table.getChild('value');
  // Sample events: per counter, how many readings and the largest.
  const samples = {};
  for (let i = 0; i < table.numRows; i++) {
    kinds[kind.get(i)] = (kinds[kind.get(i)] ?? 0) + 1;
    bytes += BigInt(nbytes.get(i));
    if (kind.get(i) === 'sample') {
      const s = (samples[name.get(i)] ??= { n: 0, max: 0 });
      s.n++;
      s.max = Math.max(s.max, value.get(i));
    }
  }
  ranks.push({
    file,
    rows: table.numRows,
    batches: table.batches.length,
    columns: table.schema.fields.map((f) => f.name),
    metadata: Object.fromEntries(table.schema.metadata),
    kinds,
    samples,
    bytes: bytes.toString(),
    first: table.numRows ? row(table, 0) : null,
    last: table.numRows ? row(table, table.numRows - 1) : null,
  });
}
console.log(JSON.stringify({ ranks }, null, 1));
