import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'gateway',
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // Integration tests start real servers and SQLite files; give slow shared machines room.
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // PostgreSQL and Redis must answer before any test runs (a clear message if not).
    globalSetup: ['./test/check-services.ts'],
  },
});
