import { defineProject } from 'vitest/config';
import { testFiles } from '../../test-scope.ts';

// Unit tests beside the code (the question editor, the chart data) and the end-to-end suite in a
// real Chromium (test/): part of the root `pnpm test`.
export default defineProject({
  resolve: { conditions: ['@decision-gateway/source'] },
  ssr: {
    resolve: { conditions: ['@decision-gateway/source'], externalConditions: ['@decision-gateway/source'] },
  },
  test: {
    name: 'console',
    ...testFiles(['src/**/*.test.ts', 'test/**/*.test.ts']),
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
