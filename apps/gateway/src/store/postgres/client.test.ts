import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
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

    // A new connection's first statement is postgres.js's own query for the array types. Its
    // promise was dropped (upstream issues porsager/postgres#1192, #1205): losing the connection
    // then was an unhandled rejection, which ends a Node process by default. Seen in this
    // repository's CI when PostgreSQL went away just after a gateway started.
    it.each([
      ['reset (a TCP RST)', 'reset', 'ECONNRESET'],
      ['whose backend was terminated, as a restart does (57P01, then closed)', 'terminate', '57P01'],
    ] as const)(
      'fails the query of a connection %s while it asked for the array types, and the process lives on',
      async (_, loss, code) => {
        const database = await createTestDatabase();
        const unhandled: unknown[] = [];
        const onUnhandled = (reason: unknown) => unhandled.push(reason);
        process.on('unhandledRejection', onUnhandled);
        const proxy = await loseFirstTypesQuery(database.url, loss);
        const sql = connectPostgres(proxy.url, { poolSize: 1, timeoutMs: 5_000 });
        try {
          await expect(sql`SELECT 1::int AS one`).rejects.toMatchObject({ code });
          expect(proxy.losses()).toBe(1);
          // A rejection nobody handles is reported once the turn that made it has ended.
          await new Promise((resolve) => setTimeout(resolve, 50));
          expect(unhandled).toEqual([]);
          expect(await sql`SELECT 2::int AS two`).toEqual([{ two: 2 }]);
        } finally {
          process.off('unhandledRejection', onUnhandled);
          await sql.end({ timeout: 1 });
          await proxy.close();
          await database.drop();
        }
      },
    );
  });
});

/** PostgreSQL's ErrorResponse (protocol message 'E') for a backend ended by an administrator. */
function terminatedBackend(): Buffer {
  const fields = Buffer.from(
    'SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0',
  );
  const header = Buffer.alloc(5);
  header.write('E', 0);
  header.writeInt32BE(4 + fields.length, 1);
  return Buffer.concat([header, fields]);
}

/**
 * A TCP proxy in front of the database that loses the first connection to send postgres.js's query
 * for the array types: by a TCP reset (the client reads ECONNRESET), or as a terminated backend
 * (57P01, then the socket ends). The other connections pass untouched.
 */
async function loseFirstTypesQuery(databaseUrl: string, loss: 'reset' | 'terminate') {
  const target = new URL(databaseUrl);
  let losses = 0;
  const open = new Set<Socket>();
  const proxy = createServer((client) => {
    const server = connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, server]) {
      open.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => open.delete(socket));
    }
    server.pipe(client);
    // The end of the last chunk too, should the query's text arrive split in two.
    let tail = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      const seen = Buffer.concat([tail, chunk]);
      tail = seen.subarray(-32);
      if (losses === 0 && seen.includes('pg_catalog.pg_type')) {
        losses++;
        server.unpipe(client);
        server.destroy();
        if (loss === 'reset') client.resetAndDestroy();
        else client.end(terminatedBackend());
        return;
      }
      server.write(chunk);
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String((proxy.address() as { port: number }).port);
  return {
    url: url.toString(),
    losses: () => losses,
    close: async () => {
      for (const socket of open) socket.destroy();
      await new Promise((resolve) => proxy.close(resolve));
    },
  };
}

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
