// How `pnpm bench:profile` charges a sample to a part of a request: the parts (matched against a
// frame's script URL), V8's sampler's profile and `perf script`'s samples, the latter per thread.
import type { BenchStore } from './bench-support.ts';

/**
 * Node's native HTTP and socket work, as perf sees it: parsing, reads, writes, polling. Matched
 * only among a sample's innermost frames, before any JavaScript: every callback the event loop
 * runs has the loop's reads beneath it.
 */
export const NATIVE_IO =
  /llhttp|node::\(anonymous namespace\)::Parser|node::StreamBase|node::LibuvStreamWrap|uv__read|uv__write|epoll_/;
export const NODE_HTTP = 'Node HTTP server, sockets';

/** V8's own functions that collect garbage, on the serving thread or its helpers. */
export const GC_FRAME =
  /v8::internal::(Scavenge|MinorMarkCompact|MarkCompact|ConcurrentMarking|IncrementalMarking|Sweeper|Heap::|\w*Marking\w*Visitor|Evacuat|ArrayBufferSweeper)/;

/** Module loading: the gateway's start, not a request's; left out of the profile. */
export const STARTUP = 'start-up: module loading';

/** A part of a request, matched against a frame's script URL. */
export interface Part {
  part: string;
  url: RegExp;
}

/** The parts of a request on `store`, matched against a frame's script URL; the first that matches wins. */
export function partsOf(store: BenchStore): Part[] {
  return [
    { part: 'PostgreSQL client: postgres.js', url: /\/postgres@/ },
    { part: 'Redis client: ioredis', url: /ioredis|redis-parser|denque|cluster-key-slot/ },
    {
      part: `${store === 'postgres' ? 'PostgreSQL' : 'SQLite'} store: key lookup, reserve, settle`,
      url: /apps\/gateway\/src\/store\/|better-sqlite3/,
    },
    { part: 'request validation: JSON, Zod', url: /packages\/contract\/src\/|\/zod@/ },
    { part: 'answer checks', url: /packages\/questions\/src\// },
    { part: 'MCP SDK: JSON-RPC, its schemas', url: /@modelcontextprotocol/ },
    { part: 'door translation', url: /apps\/gateway\/src\/doors\// },
    { part: 'upstream client: undici, retries', url: /undici|apps\/gateway\/src\/upstreams\// },
    { part: 'tracing: OpenTelemetry', url: /@opentelemetry|protobufjs|apps\/gateway\/src\/telemetry\// },
    { part: 'logging: pino', url: /pino|sonic-boom|redact/ },
    { part: 'metrics: prom-client', url: /prom-client|apps\/gateway\/src\/metrics/ },
    { part: 'API key hashing', url: /apps\/gateway\/src\/auth\// },
    { part: 'envelopes', url: /apps\/gateway\/src\/http\/envelope/ },
    { part: 'evaluation core', url: /apps\/gateway\/src\/core\// },
    { part: 'Fastify', url: /fastify|find-my-way|avvio/ },
    {
      part: NODE_HTTP,
      url: /node:_http|node:net|node:internal\/streams|node:events|node:stream/,
    },
    { part: STARTUP, url: /tsx|esbuild|node:internal\/modules/ },
  ];
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Microseconds of samples per part (idle excluded). */
export function chargeSamples(profile: CpuProfile, parts: Part[]): Map<string, number> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const partOf = new Map<number, string>();
  const chargeNode = (id: number): string => {
    const known = partOf.get(id);
    if (known !== undefined) return known;
    const name = byId.get(id)?.callFrame.functionName;
    let part = 'other JavaScript';
    if (name === '(garbage collector)') part = 'garbage collection';
    else if (name === '(idle)') part = 'idle';
    else if (name === '(program)') part = 'V8 and native, unattributed';
    else {
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const url = byId.get(at)?.callFrame.url ?? '';
        const match = parts.find((p) => p.url.test(url));
        if (match) {
          part = match.part;
          break;
        }
      }
    }
    partOf.set(id, part);
    return part;
  };
  const total = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const part = chargeNode(id);
    if (part !== 'idle') total.set(part, (total.get(part) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  return total;
}

/** Samples per part: of every thread of the gateway, and of its serving thread alone. */
export interface PerfCharges {
  all: Map<string, number>;
  serving: Map<string, number>;
}

/**
 * Samples per part, from `perf script -F tid,ip,sym,dso`. A sample's frames run from the innermost
 * out; the first that is a part's (or the collector's) names it. A sample with no such frame is
 * the kernel's, or native code outside any part. The serving thread (whose thread id is the
 * process's id) is counted apart as well: it is the one that limits throughput, while the call
 * thread and the collector's helpers run beside it on the other core.
 */
export function chargePerfSamples(script: string, parts: Part[], servingTid: number): PerfCharges {
  const all = new Map<string, number>();
  const serving = new Map<string, number>();
  const charge = (tid: number | undefined, frames: string[]) => {
    if (frames.length === 0) return;
    let part: string | undefined;
    let inJavaScript = false;
    for (const [depth, frame] of frames.entries()) {
      inJavaScript ||= frame.includes(' JS:');
      if (GC_FRAME.test(frame)) part = 'garbage collection';
      else if (!inJavaScript && depth < 4 && NATIVE_IO.test(frame)) part = NODE_HTTP;
      else part = parts.find((p) => p.url.test(frame))?.part;
      if (part !== undefined) break;
    }
    if (part === undefined) {
      const leaf = frames[0] ?? '';
      part = leaf.includes('[kernel.kallsyms]')
        ? 'kernel, outside any part'
        : leaf.includes(' JS:')
          ? 'other JavaScript'
          : 'V8 and native, unattributed';
    }
    all.set(part, (all.get(part) ?? 0) + 1);
    if (tid === servingTid) serving.set(part, (serving.get(part) ?? 0) + 1);
  };
  let tid: number | undefined;
  let frames: string[] = [];
  for (const line of script.split('\n')) {
    // The sample's own line: its thread id alone (padded to a width of 5 or so, so a longer id
    // starts the line); then its frames ("\t ip symbol (dso)"); then a blank line.
    const own = /^\s*(\d+)\s*$/.exec(line);
    if (own) {
      charge(tid, frames);
      frames = [];
      tid = Number(own[1]);
    } else if (line.startsWith('\t') || line.startsWith(' ')) frames.push(line);
    else if (line.trim() === '') {
      charge(tid, frames);
      frames = [];
    }
  }
  charge(tid, frames);
  return { all, serving };
}
