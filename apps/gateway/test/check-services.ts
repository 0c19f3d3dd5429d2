import { Redis } from 'ioredis';
import postgres from 'postgres';
import { TEST_DATABASE_URL, TEST_REDIS_URL } from './services.ts';

/**
 * The full suite needs the machine's PostgreSQL and Redis. Say plainly which one is missing and
 * how to point the tests elsewhere, instead of letting dozens of tests fail on connection errors.
 * Run before the tests (vitest globalSetup) and by .ci/run; nothing is ever skipped.
 */
export async function servicesProblems(): Promise<string[]> {
  const problems: string[] = [];
  const sql = postgres(TEST_DATABASE_URL, { max: 1, connect_timeout: 5, onnotice: () => {} });
  try {
    await sql`SELECT 1`;
  } catch (error) {
    problems.push(
      `PostgreSQL at ${TEST_DATABASE_URL} cannot be reached (${(error as Error).message}). ` +
        'Start it, or set TEST_DATABASE_URL to a server where the user may create databases.',
    );
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
  const redis = new Redis(TEST_REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 5000,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    problems.push(
      `Redis at ${TEST_REDIS_URL} cannot be reached (${(error as Error).message}). ` +
        'Start it, or set TEST_REDIS_URL.',
    );
  } finally {
    redis.disconnect();
  }
  return problems;
}

/** Vitest globalSetup: stop before any test when a service is missing. */
export default async function setup() {
  const problems = await servicesProblems();
  if (problems.length > 0)
    throw new Error(`The test suite needs PostgreSQL and Redis:\n  ${problems.join('\n  ')}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const problems = await servicesProblems();
  for (const problem of problems) process.stderr.write(`ci: ${problem}\n`);
  if (problems.length === 0)
    process.stdout.write(
      `services: PostgreSQL (${TEST_DATABASE_URL}) and Redis (${TEST_REDIS_URL}) answer\n`,
    );
  process.exit(problems.length === 0 ? 0 : 1);
}
