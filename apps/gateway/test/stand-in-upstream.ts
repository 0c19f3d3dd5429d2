import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type {
  ChoiceResponse,
  NoulResponse,
  Question,
  Questions,
  ScoreResponse,
  SystemOneResult,
  Usage,
} from '@typesafe-ai/sdk';

export interface SeenRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
}

export type Handler = (request: SeenRequest, res: ServerResponse, n: number) => void | Promise<void>;

/**
 * A stand-in upstream: a real HTTP server on 127.0.0.1 whose every request is answered by the
 * test's handler (n counts requests from 1). It records what it was sent.
 */
export async function startStandIn(handler: Handler) {
  const seen: SeenRequest[] = [];
  let current = handler;
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const request: SeenRequest = {
      method: req.method ?? '',
      path: req.url ?? '',
      headers: req.headers,
      body: text ? JSON.parse(text) : undefined,
    };
    seen.push(request);
    await current(request, res, seen.length);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    setHandler(next: Handler) {
      current = next;
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A running stand-in: its URL, what it was sent, and how to stop it. */
export type StandIn = Awaited<ReturnType<typeof startStandIn>>;

export function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

/**
 * A native System One success answering every question of `request` plausibly, in the body the
 * hosted API sends: `{model, answers, usage}` at the top level. Its type is the official SDK's own
 * `SystemOneResult`, so the shape follows the peer's published format, not this gateway's schemas.
 */
export function nativeAnswer(
  request: SeenRequest,
  usage: Usage = { input_tokens: 412, output_tokens: 0 },
): Mutable<SystemOneResult<Questions>> {
  const answers: Record<string, ChoiceResponse | ScoreResponse | NoulResponse> = {};
  for (const [id, q] of Object.entries<Question>(request.body.questions)) {
    if (q.type === 'noul') answers[id] = { type: 'noul', noul: 0.97 };
    if (q.type === 'choice') {
      const labels = Object.keys(q.criteria);
      const probabilities = Object.fromEntries(
        labels.map((l, i) => [l, i === 0 ? 0.7 : 0.3 / (labels.length - 1)]),
      );
      answers[id] = { type: 'choice', choice: labels[0] as string, confidence: 0.55, probabilities };
    }
    if (q.type === 'score') {
      const n = q.criteria.length;
      const levels = q.criteria.map((_, i) => String(i));
      answers[id] = {
        type: 'score',
        score: (n - 1) / 2,
        confidence: 0, // what the documented formula gives for a uniform distribution (docs/http-api.md#answers)
        legend: Object.fromEntries(levels.map((level, i) => [level, q.criteria[i] ?? null])),
        probabilities: Object.fromEntries(levels.map((level) => [level, 1 / n])),
      };
    }
  }
  return { model: 'jev-1.13.0', answers, usage };
}

/**
 * System One `jev-1.14.0`'s box answer, as its published format gives it (the SDK, at 0.6.0, does
 * not type it yet): fractions of the image from its top-left corner, and a confidence.
 */
export interface Jev114BoxResponse {
  type: 'box';
  box: { top: number; bottom: number; left: number; right: number };
  confidence: number;
}

/** A jev-1.14 answer: every question as `nativeAnswer` answers it, and each box question at `box`. */
export function jev114Answer(
  request: SeenRequest,
  box: Jev114BoxResponse['box'] = { top: 0.1, bottom: 0.5, left: 0.2, right: 0.6 },
  confidence = 0.9,
  usage: Usage = { input_tokens: 412, output_tokens: 0 },
) {
  const boxes = Object.entries<{ type: string }>(request.body.questions).filter(([, q]) => q.type === 'box');
  const others = {
    ...request,
    body: {
      ...request.body,
      questions: Object.fromEntries(
        Object.entries<{ type: string }>(request.body.questions).filter(([, q]) => q.type !== 'box'),
      ),
    },
  };
  const result = nativeAnswer(others, usage);
  const answers: Record<string, unknown> = { ...result.answers };
  for (const [id] of boxes) answers[id] = { type: 'box', box, confidence } satisfies Jev114BoxResponse;
  return { ...result, model: 'jev-1.14.0', answers };
}

/** The SDK types its results read-only; a stand-in builds and then edits them. */
type Mutable<T> = { -readonly [K in keyof T]: T[K] extends object ? Mutable<T[K]> : T[K] };

/** The same answer wrapped in this gateway's own envelope, as a fronted gateway sends it. */
export function gatewayEnvelope(result: SystemOneResult<Questions>) {
  return { code: 0, message: 'ok', data: { result: { ...result, elapsedMs: 5 }, creditsUsed: 0.412 } };
}
