import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

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

export function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

/** A native System One success answering every question of `request` plausibly. */
export function nativeAnswer(request: SeenRequest, usage = { input_tokens: 412, output_tokens: 0 }) {
  const answers: Record<string, unknown> = {};
  for (const [id, q] of Object.entries<any>(request.body.questions)) {
    if (q.type === 'noul') answers[id] = { type: 'noul', noul: 0.97 };
    if (q.type === 'choice') {
      const labels = Object.keys(q.criteria);
      const probabilities = Object.fromEntries(
        labels.map((l, i) => [l, i === 0 ? 0.7 : 0.3 / (labels.length - 1)]),
      );
      answers[id] = { type: 'choice', choice: labels[0], confidence: 0.55, probabilities };
    }
    if (q.type === 'score') {
      const probabilities = Object.fromEntries(
        q.criteria.map((_: unknown, i: number) => [String(i), 1 / q.criteria.length]),
      );
      answers[id] = { type: 'score', score: (q.criteria.length - 1) / 2, probabilities };
    }
  }
  return { code: 0, message: 'ok', data: { result: { answers, usage, elapsedMs: 5 }, creditsUsed: 0.412 } };
}
