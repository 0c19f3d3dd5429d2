import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A simulated OpenAI-compatible model server whose true label distribution is known, with the
 * traits of real servers (see ../shared/fixtures/llama-server): `top_logprobs` capped (20, as
 * OpenAI and vLLM do), each label spelled several ways (" A", "A", "a"), most of the next-token
 * mass on tokens that are no label at all, the completion id in the body and no request-id header.
 * The model obeys the choice axiom: offered options share the label mass in proportion to their
 * hidden weights, whatever else the prompt offers.
 */
export interface SimulatedModelOptions {
  /**
   * Hidden weight of each option, by its name as the prompt shows it ("0".."9" for levels, Yes/No).
   * An option not listed weighs a fixed pseudo-random amount between 0.5 and 1.5.
   */
  weights?: Record<string, number>;
  /** The share of the next-token mass on the offered labels (the rest goes to other tokens). */
  labelMass?: number;
  /** The most alternatives the server returns, whatever is asked. */
  cap?: number;
  /** Seed for the per-call jitter of the label mass and the filler tokens. */
  seed?: number;
}

/** How a label's mass splits over its spellings, as real tokenizers list them. */
const LETTER_VARIANTS = [
  [' ', 0.62],
  ['', 0.28],
  ['lower', 0.1],
] as const;
const WORD_VARIANTS = [
  [' ', 0.55],
  ['', 0.3],
  ['lower', 0.1],
  [' lower', 0.05],
] as const;

/** Tokens that are no label: what a model also says first ("The", a newline, "I", …). */
const FILLERS = [
  ' The',
  '\n',
  ' I',
  ' Based',
  'The',
  ' Answer',
  ' **',
  ' It',
  ' This',
  ' To',
  ' We',
  ' In',
].concat(Array.from({ length: 300 }, (_, i) => ` w${i}`));

function mulberry32(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A fixed pseudo-random number in [0, 1) for a token (FNV-1a). */
function hash01(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h / 4294967296;
}

/** The offered options of a rendered prompt: its label token → the option's name. */
export function offeredOptions(user: string): Map<string, string> {
  const offered = new Map<string, string>();
  const options = user.split('# Options\n')[1]?.split('\n\n')[0];
  if (options !== undefined) {
    for (const line of options.split('\n')) {
      const match = /^([A-Z])\. ([^:]*)/.exec(line);
      if (match) offered.set(match[1] as string, match[2] as string);
    }
    return offered;
  }
  const levels = user.split('# Levels (lowest first)\n')[1]?.split('\n\n')[0];
  if (levels !== undefined) {
    for (const line of levels.split('\n')) {
      const match = /^(\d)\./.exec(line);
      if (match) offered.set(match[1] as string, match[1] as string);
    }
    return offered;
  }
  offered.set('Yes', 'Yes');
  offered.set('No', 'No');
  return offered;
}

export function createSimulatedModel(options: SimulatedModelOptions) {
  const random = mulberry32(options.seed ?? 1);
  const cap = options.cap ?? 20;
  let calls = 0;
  /** The next token's whole distribution for a prompt, as [token, probability] pairs. */
  function nextToken(user: string): [string, number][] {
    const offered = offeredOptions(user);
    const labelMass = (options.labelMass ?? 0.5) * (0.85 + 0.3 * random());
    let total = 0;
    const weightOf = (name: string) => options.weights?.[name] ?? 0.5 + hash01(name);
    for (const name of offered.values()) total += weightOf(name);
    const tokens: [string, number][] = [];
    for (const [label, name] of offered) {
      const mass = (labelMass * weightOf(name)) / total;
      const variants = label.length === 1 && /[A-Z]/.test(label) ? LETTER_VARIANTS : WORD_VARIANTS;
      const spelled: [string, number][] = [];
      for (const [form, share] of variants) {
        if (/^\d$/.test(label) && form.includes('lower')) continue; // digits have no case
        const token =
          form === 'lower'
            ? label.toLowerCase()
            : form === ' lower'
              ? ` ${label.toLowerCase()}`
              : form + label;
        // Each label token splits its own way (±40% around the typical split), as real vocabularies do.
        spelled.push([token, share * (0.6 + 0.8 * hash01(token))]);
      }
      const shares = spelled.reduce((sum, [, p]) => sum + p, 0);
      for (const [token, share] of spelled) tokens.push([token, (mass * share) / shares]);
    }
    // The rest on filler tokens, Zipf-like, shuffled a little per call.
    const zipf = FILLERS.map((_, k) => (1 + 0.3 * random()) / (k + 1) ** 1.1);
    const zipfSum = zipf.reduce((a, b) => a + b, 0);
    FILLERS.forEach((token, k) => {
      tokens.push([token, ((1 - labelMass) * (zipf[k] as number)) / zipfSum]);
    });
    return tokens.sort((a, b) => b[1] - a[1]);
  }
  return {
    get calls() {
      return calls;
    },
    /** A chat completion body for an OpenAI-style request body. */
    complete(body: { messages: { role: string; content: string }[]; top_logprobs?: number }) {
      calls++;
      const user = body.messages.find((m) => m.role === 'user')?.content ?? '';
      const ranked = nextToken(user);
      const shown = ranked.slice(0, Math.min(cap, body.top_logprobs ?? 0));
      const entry = ([token, p]: [string, number]) => ({
        id: FILLERS.indexOf(token) + 1000,
        token,
        bytes: [...Buffer.from(token)],
        logprob: Math.log(p),
      });
      const first = ranked[0] as [string, number];
      return {
        id: `chatcmpl-sim${calls}`,
        object: 'chat.completion',
        created: 1795375229,
        model: '/models/simulated.gguf',
        choices: [
          {
            index: 0,
            finish_reason: 'length',
            message: { role: 'assistant', content: first[0] },
            logprobs: { content: [{ ...entry(first), top_logprobs: shown.map(entry) }] },
          },
        ],
        usage: {
          completion_tokens: 1,
          prompt_tokens: Math.ceil(user.length / 4),
          total_tokens: Math.ceil(user.length / 4) + 1,
          prompt_tokens_details: { cached_tokens: 0 },
        },
      };
    },
  };
}

/** The truth the gateway should recover: weights normalised over the question's options. */
export function trueDistribution(weights: Record<string, number>, names: readonly string[]): number[] {
  const total = names.reduce((sum, name) => sum + (weights[name] ?? 0), 0);
  return names.map((name) => (weights[name] ?? 0) / total);
}

export function totalVariation(p: readonly number[], q: readonly number[]): number {
  return p.reduce((sum, pi, i) => sum + Math.abs(pi - (q[i] as number)), 0) / 2;
}

/** Log-normal weights: a clear favourite and a long tail, as model preferences have. */
export function randomWeights(names: readonly string[], seed: number, spread = 1.5): Record<string, number> {
  const random = mulberry32(seed);
  const normal = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Object.fromEntries(names.map((name) => [name, Math.exp(spread * normal())]));
}

/** The simulated model behind a real HTTP server on 127.0.0.1 (`/v1/chat/completions`). */
export async function startSimulatedServer(model: ReturnType<typeof createSimulatedModel>) {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(model.complete(body)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
