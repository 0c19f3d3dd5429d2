import { defineConfig } from 'vitest/config';

// `pnpm test:unit`: the tests beside the code that need no PostgreSQL, Redis or Chromium, in well
// under a minute. Each project's own config reads this scope (test-scope.ts); `pnpm test` runs all.
process.env.DG_TEST_SCOPE = 'unit';

export default defineConfig({
  // Threads start faster than forked processes: these tests hold no process-wide state.
  test: { pool: 'threads', projects: ['packages/*', 'apps/*', 'bench'] },
});
