import { request } from 'node:http';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

/**
 * One HTTP request with full control of headers and body chunks (no Content-Length unless given:
 * several chunks go out chunked), for the limits fetch would smooth over.
 */
export function rawRequest(
  base: string,
  options: {
    method?: string;
    path: string;
    headers?: Record<string, string>;
    chunks?: (string | Uint8Array)[];
  },
): Promise<RawResponse> {
  const url = new URL(options.path, base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: options.method ?? 'POST',
        headers: options.headers,
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (part: Buffer) => parts.push(part));
        res.on('end', () => {
          const text = Buffer.concat(parts).toString('utf8');
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: text ? JSON.parse(text) : undefined,
          });
        });
      },
    );
    req.on('error', reject);
    const chunks = options.chunks ?? [];
    let i = 0;
    const writeNext = () => {
      if (i >= chunks.length) return req.end();
      // A server that answers early (413) may close the socket: stop writing then.
      if (req.destroyed) return;
      req.write(chunks[i++] as string | Uint8Array, () => setImmediate(writeNext));
    };
    writeNext();
  });
}
