// A native System One upstream that answers at once (or after DELAY_MS, as a model would): its own
// process, so it never shares an event loop with what is measured. Answers are built once per distinct body and then reused.
import { createServer } from 'node:http';

const cache = new Map<string, string>();
const DELAY_MS = Number(process.env.DELAY_MS ?? 0);

function answer(body: string): string {
  const request = JSON.parse(body) as { questions: Record<string, { type: string; criteria?: unknown }> };
  const answers: Record<string, unknown> = {};
  for (const [id, question] of Object.entries(request.questions)) {
    if (question.type === 'noul') answers[id] = { type: 'noul', noul: 0.93 };
    if (question.type === 'choice') {
      const labels = Object.keys(question.criteria as object);
      const p = labels.map((_, i) => (i === 0 ? 0.7 : 0.3 / (labels.length - 1)));
      answers[id] = {
        type: 'choice',
        choice: labels[0],
        confidence: 0.6,
        probabilities: Object.fromEntries(labels.map((l, i) => [l, p[i]])),
      };
    }
    if (question.type === 'score') {
      const n = (question.criteria as unknown[]).length;
      answers[id] = {
        type: 'score',
        score: (n - 1) / 2,
        confidence: 0.2,
        probabilities: Object.fromEntries(Array.from({ length: n }, (_, i) => [String(i), 1 / n])),
      };
    }
  }
  // The native success body (docs/upstreams.md): what the hosted API and the official SDKs use.
  return JSON.stringify({ model: 'jev-1.13.0', answers, usage: { input_tokens: 412, output_tokens: 0 } });
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    let text = cache.get(body);
    if (text === undefined) {
      text = answer(body);
      if (cache.size < 100) cache.set(body, text);
    }
    const reply = text;
    const send = () =>
      res
        .writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(reply) })
        .end(reply);
    if (DELAY_MS > 0) setTimeout(send, DELAY_MS);
    else send();
  });
});
server.keepAliveTimeout = 120_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address() as { port: number };
  process.stdout.write(`READY http://127.0.0.1:${address.port}\n`);
});
