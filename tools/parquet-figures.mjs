// parquet-figures.mjs DIR [DOC]: runs the SQL that docs/export.md gives
// for a Parquet export (its ```sql blocks) over the export in DIR with
// DuckDB, and prints each figure's rows as JSON: {"name": [rows]}.
// Integers are printed as strings, exactly. commprof's tests compare the
// figures with what `commprof stats --format json` says of the same run,
// so the SQL on the page is the SQL that is tested.
//
// Each block starts with a comment line "-- NAME: what it is". A block
// that creates a view is run for its effect; any other is a figure.
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

const [dir, doc = new URL('../docs/export.md', import.meta.url).pathname] = process.argv.slice(2);
if (!dir) {
  console.error('usage: node parquet-figures.mjs DIR [DOC]');
  process.exit(2);
}
const blocks = [...readFileSync(doc, 'utf8').matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]);
if (blocks.length === 0) {
  console.error(`${doc}: no sql blocks`);
  process.exit(1);
}
const glob = `'${dir.replaceAll("'", "''")}/**/*.parquet'`;
const db = await DuckDBInstance.create(':memory:');
const conn = await db.connect();
const out = {};
for (const block of blocks) {
  const head = block.match(/^-- ([\w-]+):/);
  if (!head) {
    console.error(`a sql block of ${doc} does not start with "-- NAME:":\n${block}`);
    process.exit(1);
  }
  const sql = block.replaceAll("'DIR/**/*.parquet'", glob);
  try {
    const res = await conn.runAndReadAll(sql);
    if (!/^\s*CREATE\b/im.test(sql.replace(/^--.*$/gm, ''))) out[head[1]] = res.getRowObjectsJson();
  } catch (e) {
    console.error(`${head[1]}: ${e.message}`);
    process.exit(1);
  }
}
console.log(JSON.stringify(out));
