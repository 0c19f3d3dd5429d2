import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/services.ts';
import { connectPostgres } from './client.ts';

describe('the store’s PostgreSQL client', () => {
  it('gives the next query on a connection only its own rows after a statement timed out midway', async () => {
    const database = await createTestDatabase();
    // One connection, so every query below shares it; the server ends statements after 300 ms.
    const sql = connectPostgres(database.url, { poolSize: 1, timeoutMs: 300 });
    try {
      for (let round = 0; round < 3; round++) {
        // 19 rows reach the client before the 20th sleeps past statement_timeout.
        const streamedThenCancelled = sql`
          SELECT g, CASE WHEN g = 20 THEN pg_sleep(5) END AS slept FROM generate_series(1, 40) AS g`;
        await expect(streamedThenCancelled).rejects.toMatchObject({ code: '57014' });
        const next = await sql<{ one: number }[]>`SELECT 1::int AS one`;
        expect(next.length).toBe(1);
        expect(next[0]).toEqual({ one: 1 });
        const several = await sql<{ n: number }[]>`SELECT n::int FROM generate_series(1, 3) AS n`;
        expect([...several]).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
      }
    } finally {
      await sql.end({ timeout: 1 });
      await database.drop();
    }
  });

  describe('postgres.js as patched, when a connection’s socket closes', () => {
    it('fails a transaction whose connection closed, and the process lives on', async () => {
      // postgres.js 3.4.9 defers a small write to the next turn of the event loop; on a connection
      // whose socket had closed (here the transaction's next query, then its ROLLBACK) that
      // deferred write threw where nothing could catch it and ended the gateway's process
      // (upstream issues porsager/postgres#1154 and #1208). Vitest fails the run on such an error.
      const { sql, sockets, drop } = await trackedClient();
      try {
        const transaction = sql.begin(async (tx) => {
          await tx`SELECT 1`;
          await closeFromOutside(sockets[0] as Socket);
          await tx`SELECT 2`;
        });
        await expect(transaction).rejects.toMatchObject({ code: 'CONNECTION_CLOSED' });
        expect(await sql`SELECT 3::int AS three`).toEqual([{ three: 3 }]);
      } finally {
        await drop();
      }
    });
  });
});

/** A one-connection client on a new database whose sockets the test can reach. */
async function trackedClient() {
  const database = await createTestDatabase();
  const target = new URL(database.url);
  const sockets: Socket[] = [];
  // postgres.js takes a `socket` factory (its README) that its types do not declare.
  const options = {
    max: 1,
    connect_timeout: 30,
    backoff: () => 0.01,
    onnotice: () => {},
    socket: async () => {
      const socket = connect(Number(target.port || 5432), target.hostname);
      sockets.push(socket);
      await once(socket, 'connect');
      return socket;
    },
  };
  const sql = postgres(database.url, options);
  return {
    sql,
    sockets,
    drop: async () => {
      await sql.end({ timeout: 1 });
      await database.drop();
    },
  };
}

/** The server's end of the connection goes away; resolves once the client has seen its socket close. */
async function closeFromOutside(socket: Socket) {
  const gone = once(socket, 'close');
  socket.destroy();
  await gone;
}
