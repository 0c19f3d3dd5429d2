import postgres from 'postgres';

/** int8 columns as JavaScript numbers: micro-credits and epoch milliseconds stay far below 2^53. */
const int8 = {
  to: 20,
  from: [20],
  serialize: (value: number) => String(value),
  parse: (text: string) => {
    const value = Number(text);
    if (!Number.isSafeInteger(value)) throw new RangeError(`int8 ${text} is beyond a safe integer`);
    return value;
  },
};

export type Sql = postgres.Sql<{ int8: number }>;

export interface PostgresClientOptions {
  /** Connections in the pool (DATABASE_POOL_SIZE). */
  poolSize: number;
  /** STORE_TIMEOUT_MS: the server ends any statement that runs longer (docs/operating.md#configuration). */
  timeoutMs: number;
}

/**
 * The one place the store's postgres.js pool is configured.
 *
 * A statement that meets `statement_timeout` after it has sent some rows must not leave anything
 * behind on its connection. postgres.js 3.4.9 forgets to reset its row counter then (upstream
 * issue porsager/postgres#1119), so the next query on that connection received a result with
 * that many empty slots before its own rows: `getKey` read an empty first slot as "no such key",
 * and a batch of one step came back as 23 rows. `patches/postgres@3.4.9.patch` resets the counter
 * when the connection is ready for the next query; `client.test.ts` shows the failure without it.
 *
 * The same patch stops a lost connection from ending the process. postgres.js 3.4.9 defers a small
 * write to the next turn of the event loop and then writes to whatever socket the connection has;
 * a transaction whose connection closed under it still sends its next query and its ROLLBACK, and
 * that deferred write met no socket and threw outside any caller (upstream issues
 * porsager/postgres#1154 and #1208): a database restart or a network cut during a transaction
 * crashed the gateway. Those queries now fail with CONNECTION_CLOSED, a storage failure (503).
 * Nor does a connection lost while it asks for the array types, its first statement: postgres.js
 * left that query's promise unheld (porsager/postgres#1192, #1205), so a database going away just
 * as a connection opened was an unhandled rejection that ended the process (seen in this
 * repository's CI). The queries waiting on that connection fail as they would at any other moment.
 */
export function connectPostgres(url: string, options: PostgresClientOptions): Sql {
  return postgres(url, {
    max: options.poolSize,
    types: { int8 },
    onnotice: () => {},
    connect_timeout: Math.max(1, Math.ceil(options.timeoutMs / 1000)),
    // Seconds before reconnecting after a failure: postgres.js grows this to 20 s, so a database
    // back after an outage would be used only that much later. A quarter second at most.
    backoff: (attempts: number) => Math.min(0.25, 0.01 * 2 ** attempts),
    connection: { application_name: 'decision-gateway', statement_timeout: options.timeoutMs },
  });
}
