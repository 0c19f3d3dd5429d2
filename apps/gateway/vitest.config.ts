import { defineProject } from 'vitest/config';
import { testFiles, unitOnly } from '../../test-scope.ts';

export default defineProject({
  test: {
    name: 'gateway',
    ...testFiles(
      ['src/**/*.test.ts', 'test/**/*.test.ts'],
      // These run their contract against PostgreSQL or Redis too.
      [
        'src/cache/decision-cache.contract.test.ts',
        'src/rate-limit/rate-limiter.test.ts',
        'src/store/postgres/client.test.ts',
        'src/store/postgres/postgres-store.test.ts',
        'src/store/store.contract.test.ts',
      ],
    ),
    // Integration tests start real servers and SQLite files; give slow shared machines room.
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // PostgreSQL and Redis must answer before any test runs (a clear message if not).
    globalSetup: unitOnly ? [] : ['./test/check-services.ts'],
  },
});
