// An OTLP/HTTP collector that keeps nothing: every export is read and answered 200, as a
// collector's port 4318 answers (an empty ExportTraceServiceResponse). Its own process, so the
// traced gateway pays for producing and sending its spans, never for a receiver sharing its loop.
import { createServer } from 'node:http';

let exports = 0;
let bytes = 0;
const server = createServer((req, res) => {
  req.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
  });
  req.on('end', () => {
    exports++;
    res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': 0 }).end();
  });
});
server.keepAliveTimeout = 120_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address() as { port: number };
  process.stdout.write(`READY http://127.0.0.1:${address.port}\n`);
});
process.on('SIGTERM', () => {
  process.stdout.write(`received ${exports} exports, ${bytes} bytes\n`);
  process.exit(0);
});
