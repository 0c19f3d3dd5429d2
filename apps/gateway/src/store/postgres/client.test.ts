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
});
