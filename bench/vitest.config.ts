import { defineProject } from 'vitest/config';

// The bench's own arithmetic (how shares are taken); its runs are `pnpm bench`, not tests. The
// workspace packages from their sources, as `pnpm bench` runs them.
export default defineProject({
  ssr: {
    resolve: { conditions: ['@decision-gateway/source'], externalConditions: ['@decision-gateway/source'] },
  },
  test: { name: 'bench', include: ['src/**/*.test.ts'] },
});
