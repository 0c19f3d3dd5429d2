// The SQLite store's second connection, on a thread of its own (docs/usage.md):
// the reads that can take longer than a few milliseconds (series, summaries, recent usage) and the
// background writes (retention, the rollups' upgrade) and the WAL's checkpoints run here, so better-sqlite3's synchronous
// calls never hold up the thread that serves requests. Plain JavaScript: a worker loads it as it
// is, under tsx, Vitest or plain Node alike. It knows no schema; the store sends the SQL.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

// The store's own connection made the file; this one never creates one (a deleted file stays deleted).
const db = new Database(workerData.path, { fileMustExist: true });
db.pragma(`busy_timeout = ${Math.trunc(workerData.busyTimeoutMs)}`);
/** Prepared once per SQL text: the store sends a handful of statements, over and over. */
const statements = new Map();
const prepared = (sql) => {
  let statement = statements.get(sql);
  if (statement === undefined) {
    statement = db.prepare(sql);
    statements.set(sql, statement);
  }
  return statement;
};
const runAll = db.transaction((steps) => steps.map((step) => prepared(step.sql).run(...step.params).changes));

parentPort.on('message', (message) => {
  try {
    let value;
    if (message.op === 'all') value = prepared(message.sql).all(...message.params);
    else if (message.op === 'exec') value = db.exec(message.sql) && null;
    else if (message.op === 'transaction') value = runAll.immediate(message.steps);
    // PASSIVE: copies what it can without waiting for, or holding up, any reader or writer.
    else if (message.op === 'checkpoint') value = db.pragma('wal_checkpoint(PASSIVE)', { simple: false });
    else throw new Error(`unknown op ${message.op}`);
    parentPort.postMessage({ id: message.id, ok: true, value });
  } catch (error) {
    parentPort.postMessage({ id: message.id, ok: false, message: error.message, code: error.code });
  }
});
