import { describe, expect, it } from 'vitest';
import { HEAP_GROWING_PERCENT, heapGrowingFlag } from './heap.ts';

describe('heapGrowingFlag', () => {
  it("sets the gateway's growing factor when the command line says nothing of it", () => {
    expect(heapGrowingFlag([])).toBe(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
    expect(heapGrowingFlag(['--import', 'tsx', '--max-old-space-size=512'])).toBe(
      `--heap-growing-percent=${HEAP_GROWING_PERCENT}`,
    );
  });

  it("leaves an operator's own choice alone, however V8's flag is spelled", () => {
    expect(heapGrowingFlag(['--heap-growing-percent=300'])).toBeUndefined();
    expect(heapGrowingFlag(['--import', 'tsx', '--heap_growing_percent=50'])).toBeUndefined();
    expect(heapGrowingFlag(['--heap-growing-percent', '50'])).toBeUndefined();
  });

  it('is not fooled by a flag that only begins the same way', () => {
    expect(heapGrowingFlag(['--heap-growing-percentage=50'])).toBe(
      `--heap-growing-percent=${HEAP_GROWING_PERCENT}`,
    );
  });
});
