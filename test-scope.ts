import { configDefaults } from 'vitest/config';

/**
 * Which tests a run takes: `all` (`pnpm test`, what CI runs) or `unit` (`pnpm test:unit`: the tests
 * beside the code, without the integration suites under test/ and without the files that reach
 * PostgreSQL, Redis or Chromium). Set by the root config a run starts from.
 */
export const unitOnly = process.env.DG_TEST_SCOPE === 'unit';

/** A project's test files for this run: `unit` keeps those beside the code, less `needsServices`. */
export function testFiles(
  all: string[],
  needsServices: string[] = [],
): { include: string[]; exclude: string[] } {
  if (!unitOnly) return { include: all, exclude: configDefaults.exclude };
  return {
    include: all.filter((glob) => glob.startsWith('src/')),
    exclude: [...configDefaults.exclude, ...needsServices],
  };
}
