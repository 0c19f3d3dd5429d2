// The floor for any Node gateway doing this job: read the body, JSON.parse it, forward it to the
// upstream over a keep-alive pool, write the answer back. No auth, no validation, no credits.
//
// With RELAY_DATABASE set it also does the storage work every request requires of every request,
// through the gateway's own Store: look the key up by hash, reserve credits, and after the answer
// settle them with a usage record. That floor shows what durable per-request accounting costs,
// apart from everything else the gateway does.
import { createServer } from 'node:http';
import { openSqliteStore, verifyApiKey } from '@decision-gateway/gateway';
import { Pool } from 'undici';

const upstream = process.env.UPSTREAM_URL as string;
const pool = new Pool(upstream, { keepAliveTimeout: 120_000 });
const store = process.env.RELAY_DATABASE ? openSqliteStore(process.env.RELAY_DATABASE) : undefined;
/** What the relay reserves per request, in micro-credits (the gateway computes a bound). */
const RESERVATION_MICRO = 10_000;
let requests = 0;

async function forward(body: unknown) {
  const answer = await pool.request({
    path: '/v1/systemone',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: answer.statusCode, text: await answer.body.text() };
}

/** forward() between a key check, a reservation and a settlement, as docs/http-api.md#credits orders them. */
async function forwardWithAccounting(body: unknown, authorization: string | undefined) {
  if (!store) return forward(body);
  const auth = await verifyApiKey(store, authorization, Date.now());
  if (!auth.ok) return { status: 401, text: auth.code };
  const requestId = `relay_${++requests}`;
  const reservation = await store.reserve(auth.key.id, requestId, RESERVATION_MICRO, Date.now(), 0);
  if (!reservation.ok) return { status: 402, text: reservation.code };
  const answer = await forward(body);
  const usage = (JSON.parse(answer.text) as { usage: { input_tokens: number } }).usage;
  await store.settle(
    reservation.reservationId,
    {
      requestId,
      keyId: auth.key.id,
      creditsMicro: usage.input_tokens * 1000,
      inputTokens: usage.input_tokens,
      outputTokens: 0,
      questions: 0,
      status: answer.status,
      elapsedMs: 0,
      at: Date.now(),
      route: 'default',
      upstream: 'systemone',
      cached: false,
      tokenId: null,
      subject: null,
    },
    0,
  );
  return answer;
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', async () => {
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const answer = await forwardWithAccounting(body, req.headers.authorization);
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.text);
    } catch (error) {
      res.writeHead(500).end(String(error));
    }
  });
});
server.keepAliveTimeout = 120_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address() as { port: number };
  process.stdout.write(`READY http://127.0.0.1:${address.port}\n`);
});
