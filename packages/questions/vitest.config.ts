import { defineProject } from 'vitest/config';

export default defineProject({
  test: { name: 'questions', include: ['src/**/*.test.ts'] },
});
