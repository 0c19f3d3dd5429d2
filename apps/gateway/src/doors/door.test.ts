import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

/** A test of the request's URL: how a shape used to be picked (`url.startsWith('/trpc/')`). */
const urlTests = /\.(url|originalUrl)\s*\.\s*(startsWith|includes|match)\(|\.url\s*!?==|isNativePath/;

describe('the door layer', () => {
  it('never picks a response shape by looking at the URL: doors are stamped on their routes', () => {
    // A door's prefix appears where it is registered (http/server.ts) and nowhere else as a test.
    const doorCode = ['http', 'doors'].flatMap((dir) => sources(join(SRC, dir)));
    expect(doorCode.length).toBeGreaterThan(5);
    const offenders = doorCode.filter((file) => urlTests.test(readFileSync(file, 'utf8')));
    expect(offenders.map((file) => file.slice(SRC.length + 1))).toEqual([]);
  });

  it('would notice one that did', () => {
    expect(urlTests.test("if (request.url.startsWith('/trpc/'))")).toBe(true);
    expect(urlTests.test('if (isNativePath(request.url))')).toBe(true);
    expect(urlTests.test("if (request.url !== '/healthz')")).toBe(true);
  });
});
