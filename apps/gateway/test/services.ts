import { randomBytes } from 'node:crypto';
import postgres from 'postgres';

/**
 * The machine's PostgreSQL and Redis, which the full suite needs (the README's quick start).
 * TEST_DATABASE_URL and TEST_REDIS_URL point elsewhere; each test run makes its own database and
 * Redis key prefix, and removes them.
 */
export const TEST_DATABASE_URL =
  process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A fresh, empty database on the test server; `drop()` removes it (closing what is still connected). */
export async function createTestDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `dg_test_${randomBytes(6).toString('hex')}`;
  const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end({ timeout: 1 });
  }
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
      try {
        await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await admin.end({ timeout: 1 });
      }
    },
  };
}
