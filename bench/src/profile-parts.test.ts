import { describe, expect, it } from 'vitest';
import { chargePerfSamples, chargeSamples, partsOf } from './profile-parts.ts';

const parts = partsOf('sqlite');
// perf pads a thread id to five places: a five-digit one starts its line, a shorter one does not.
const SERVING = 15281;
const CALL_THREAD = 4121;

/** One sample as `perf script -F tid,ip,sym,dso` writes it: its thread id, then its frames innermost first. */
const sample = (tid: number, ...frames: string[]) =>
  [
    `${String(tid).padStart(5)} `,
    ...frames.map((frame, i) => `\t    ${(0x7f00 + i).toString(16)} ${frame}`),
    '',
  ].join('\n');

const js = (name: string, url: string) => `JS:*${name} ${url}:1:1 (/tmp/perf-${SERVING}.map)`;
const SQLITE =
  'sqlite3VdbeExec (/work/main/node_modules/.pnpm/better-sqlite3@12.11.1/node_modules/better-sqlite3/build/Release/better_sqlite3.node)';
const ZOD = js(
  'safeParse',
  'file:///work/main/node_modules/.pnpm/zod@4.6.7/node_modules/zod/v4/classic/schemas.js',
);
const UNDICI = js(
  'writeH1',
  '/work/main/node_modules/.pnpm/undici@7.30.2/node_modules/undici/lib/dispatcher/client-h1.js',
);
const SCAVENGE = 'v8::internal::ScavengerCollector::CollectGarbage (/usr/bin/node)';
const KERNEL = 'pvm_irq_enable ([kernel.kallsyms])';
const MALLOC = '_int_malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)';

describe('perf samples charged to parts', () => {
  const script = [
    sample(SERVING, SQLITE, js('settle', 'file:///work/main/apps/gateway/src/store/sqlite/credits.ts')),
    sample(SERVING, 'v8::internal::JsonParser (/usr/bin/node)', ZOD),
    sample(SERVING, SCAVENGE),
    sample(SERVING, KERNEL),
    sample(SERVING, MALLOC),
    sample(CALL_THREAD, UNDICI),
    sample(CALL_THREAD, UNDICI),
    sample(CALL_THREAD + 1, SCAVENGE),
  ].join('\n');

  it('charges each sample to the innermost frame that names a part, the serving thread’s apart', () => {
    const { all, serving } = chargePerfSamples(script, parts, SERVING);
    const servingThread = {
      'SQLite store: key lookup, reserve, settle': 1,
      'request validation: JSON, Zod': 1,
      'garbage collection': 1,
      'kernel, outside any part': 1,
      'V8 and native, unattributed': 1,
    };
    expect(Object.fromEntries(serving)).toEqual(servingThread);
    // Every thread: the call thread's two upstream samples and a collector helper's scavenge too.
    expect(Object.fromEntries(all)).toEqual({
      ...servingThread,
      'garbage collection': 2,
      'upstream client: undici, retries': 2,
    });
  });

  it('names the store by the store profiled', () => {
    const { all } = chargePerfSamples(sample(SERVING, SQLITE), partsOf('postgres'), SERVING);
    expect([...all.keys()]).toEqual(['PostgreSQL store: key lookup, reserve, settle']);
  });
});

describe('V8 sampler profiles charged to parts', () => {
  it('charges a sample to the nearest caller with a part’s URL, and leaves idle time out', () => {
    const url = (path: string) => `file:///work/main/${path}`;
    const profile = {
      nodes: [
        { id: 1, callFrame: { functionName: '(root)', url: '' }, children: [2, 4, 5] },
        {
          id: 2,
          callFrame: { functionName: 'reserve', url: url('apps/gateway/src/store/sqlite/credits.ts') },
          children: [3],
        },
        { id: 3, callFrame: { functionName: 'anonymous', url: '' } },
        { id: 4, callFrame: { functionName: '(garbage collector)', url: '' } },
        { id: 5, callFrame: { functionName: '(idle)', url: '' } },
      ],
      samples: [3, 4, 5, 3],
      timeDeltas: [10, 20, 500, 30],
    };
    expect(Object.fromEntries(chargeSamples(profile, parts))).toEqual({
      'SQLite store: key lookup, reserve, settle': 40,
      'garbage collection': 20,
    });
  });
});
