import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { servingThreadLoad, servingThreadSteadyLoad } from './serving-thread.ts';

/** Keeps this thread's event loop busy for `ms`, then reads the load: one busy window closes. */
function busyFor(ms: number) {
  const end = performance.now() + ms;
  while (performance.now() < end);
  return servingThreadSteadyLoad();
}

describe("the serving thread's load", () => {
  it('reads busy at once, and a lull of one window between busy ones does not read idle', async () => {
    await sleep(120);
    servingThreadLoad(); // a window starts now
    expect(busyFor(120)).toBeGreaterThan(0.9); // one busy window: the last window's share
    for (let i = 0; i < 4; i++) busyFor(120);
    await sleep(130); // an idle window (on a loaded machine, perhaps a longer one)
    const lull = servingThreadLoad();
    expect(lull).toBeLessThan(0.5);
    // The average of the windows before it still holds: the lull is not taken for an idle thread.
    expect(servingThreadSteadyLoad()).toBeGreaterThan(Math.max(lull, 0.2));
  });

  it('reads idle after the loop has rested a while', async () => {
    for (let i = 0; i < 12; i++) await sleep(110);
    expect(servingThreadSteadyLoad()).toBeLessThan(0.3);
  });
});
