import { defineConfig } from 'vitest/config';

// One root run covers every workspace package: each package's own vitest config is a project.
export default defineConfig({
  test: {
    projects: ['packages/*', 'apps/*', 'bench', 'examples/frontend'],
  },
});
