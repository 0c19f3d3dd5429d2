import { connectPostgres, migratePostgres, openPostgresStore } from '@decision-gateway/gateway';
import postgres from 'postgres';

const admin = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1, onnotice: () => {} });
await admin.unsafe('DROP DATABASE IF EXISTS dg_tmp_rollups WITH (FORCE)');
await admin.unsafe('CREATE DATABASE dg_tmp_rollups');
await admin.end();
const url = 'postgres://postgres@127.0.0.1:5432/dg_tmp_rollups';
const sql = connectPostgres(url, { poolSize: 1, timeoutMs: 600000 });
await migratePostgres(sql, 4);
const now = Date.now();
const MONTH = 30 * 86400000;
const N = Number(process.argv[2] ?? 1000000);
await sql.unsafe(
  `INSERT INTO api_keys (id, name, prefix, hash, credits_micro, created_at) SELECT 'key_' || i, 'k', 'p', 'h' || i, NULL, 0 FROM generate_series(0, 99) i`,
);
await sql.unsafe(`INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status, elapsed_ms, at, route, upstream, cached)
 SELECT 'req_' || j, 'key_' || (j * 7919 % 100), 230000, 230, 0, 3, CASE WHEN j % 50 = 0 THEN 502 ELSE 200 END, ((j * 2654435761 % 1000) / 3 + 2)::int, ${now - MONTH} + j * ${Math.floor(MONTH / N)},
 CASE WHEN j % 3 = 0 THEN 'cheap' ELSE 'default' END, CASE WHEN j % 4 = 0 THEN 'strong' ELSE 'lexical' END, j % 10 = 0 FROM generate_series(0::bigint, ${N - 1}::bigint) j`);
await sql.end();
const store = await openPostgresStore(url, { poolSize: 2, timeoutMs: 600000 });
for (;;) {
  const b = await store.foldIntoRollups(50000);
  if (b.left === 0) break;
}
await store.close();
console.log('ready', now);
