import { defineProject } from 'vitest/config';

// The browser suite: a real Chromium (Debian's, at /usr/bin/chromium or CHROMIUM_PATH), part of the
// root `pnpm test`.
export default defineProject({
  // The client package from its sources, as the page's build takes it.
  resolve: { conditions: ['@decision-gateway/source'] },
  ssr: {
    resolve: { conditions: ['@decision-gateway/source'], externalConditions: ['@decision-gateway/source'] },
  },
  test: { name: 'frontend', include: ['test/**/*.test.ts'], testTimeout: 60_000, hookTimeout: 120_000 },
});
