import { defineProject } from 'vitest/config';

// Unit tests beside the code (the question editor, the chart data) and the end-to-end suite in a
// real Chromium (test/): part of the root `pnpm test`.
export default defineProject({
  resolve: { conditions: ['@decision-gateway/source'] },
  ssr: {
    resolve: { conditions: ['@decision-gateway/source'], externalConditions: ['@decision-gateway/source'] },
  },
  test: {
    name: 'console',
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
