import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

describe('client bundle', () => {
  it('holds no server code: the router is imported as a type only', async () => {
    const result = await build({
      entryPoints: [new URL('./index.ts', import.meta.url).pathname],
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'browser',
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.some((path) => path.endsWith('src/client.ts'))).toBe(true);
    expect(inputs.some((path) => path.includes('@trpc/client'))).toBe(true);
    const forbiddenPaths = [
      'apps/gateway/',
      'packages/questions/',
      '/node_modules/fastify/',
      '/node_modules/better-sqlite3/',
      '/node_modules/pino/',
      '/node_modules/gpt-tokenizer/',
      '/node_modules/zod/',
      '@trpc/server/dist/adapters/',
    ];
    for (const forbidden of forbiddenPaths) {
      expect(inputs.filter((path) => path.includes(forbidden))).toEqual([]);
    }
    const bytes = result.outputFiles[0]?.contents.byteLength ?? 0;
    expect(bytes).toBeLessThan(100_000);
  });
});
