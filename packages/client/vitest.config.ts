import { defineProject } from 'vitest/config';
import { testFiles } from '../../test-scope.ts';

export default defineProject({
  test: {
    name: 'client',
    ...testFiles(['src/**/*.test.ts', 'test/**/*.test.ts']),
    testTimeout: 20_000,
    // Type-level tests (*.test-d.ts) run through tsc and count as tests.
    typecheck: { enabled: true, include: ['src/**/*.test-d.ts'], tsconfig: './tsconfig.json' },
  },
});
