// The floor for any Node gateway doing this job: read the body, JSON.parse it, forward it to the
// upstream over a keep-alive pool, write the answer back. No auth, no validation, no credits.
import { createServer } from 'node:http';
import { Pool } from 'undici';

const upstream = process.env.UPSTREAM_URL as string;
const pool = new Pool(upstream, { keepAliveTimeout: 120_000 });

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', async () => {
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const answer = await pool.request({
        path: '/v1/systemone',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const text = await answer.body.text();
      res.writeHead(answer.statusCode, { 'content-type': 'application/json' }).end(text);
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
