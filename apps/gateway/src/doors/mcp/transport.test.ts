import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  EmptyResultSchema,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { ExchangeTransport } from './transport.ts';

const initialize: JSONRPCMessage = {
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'unit', version: '1' } },
};
const call = (id: number): JSONRPCMessage => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: 'wait', arguments: {} },
});

/** An SDK server whose one tool answers when the test lets it, after a notification of its own. */
async function connected() {
  const release: (() => void)[] = [];
  const server = new Server({ name: 'unit', version: '1' }, { capabilities: { tools: {}, logging: {} } });
  server.setRequestHandler(CallToolRequestSchema, async (_request, extra) => {
    // A message the server sends of its own accord: nothing is pushed, so it goes nowhere.
    await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: 'x' } });
    await new Promise<void>((resolve) => release.push(resolve));
    return { content: [{ type: 'text', text: 'done' }] };
  });
  const transport = new ExchangeTransport();
  await server.connect(transport);
  const opened = await transport.exchange([initialize], {});
  expect(opened.ok && opened.answers).toMatchObject([{ id: 0, result: { protocolVersion: '2025-06-18' } }]);
  return { server, transport, release };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('ExchangeTransport', () => {
  it('answers an exchange with its requests’ answers once the server has them', async () => {
    const { transport, release } = await connected();
    const pending = transport.exchange([call(1), call(2)], {});
    while (release.length < 2) await tick();
    for (const answer of release) answer();
    expect(await pending).toEqual({
      ok: true,
      answers: [
        { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'done' }] } },
        { jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text', text: 'done' }] } },
      ],
    });
    await transport.settled();
  });

  it('settles only when the exchanges in flight have their answers', async () => {
    const { transport, release } = await connected();
    const pending = transport.exchange([call(1)], {});
    let settled = false;
    void transport.settled().then(() => {
      settled = true;
    });
    while (release.length < 1) await tick();
    await tick();
    expect(settled).toBe(false);
    release[0]?.();
    expect((await pending).ok).toBe(true);
    await tick();
    expect(settled).toBe(true);
  });

  it('closed under an exchange, tells it so rather than leaving it waiting; a later one too', async () => {
    const { server, transport, release } = await connected();
    const pending = transport.exchange([call(1)], {});
    while (release.length < 1) await tick();
    await server.close();
    expect(await pending).toEqual({ ok: false, reason: 'closed' });
    expect(await transport.exchange([call(2)], {})).toEqual({ ok: false, reason: 'closed' });
  });

  it('refuses a request whose id is still being answered', async () => {
    const { transport, release } = await connected();
    const pending = transport.exchange([call(1)], {});
    while (release.length < 1) await tick();
    expect(await transport.exchange([call(1)], {})).toEqual({ ok: false, reason: 'id_in_use' });
    release[0]?.();
    expect((await pending).ok).toBe(true);
    // Answered, the id is free again.
    const again = transport.exchange([call(1)], {});
    while (release.length < 2) await tick();
    release[1]?.();
    expect((await again).ok).toBe(true);
  });

  it('answers a request only with an answer, not with a request of the server’s that has its id', async () => {
    const server = new Server({ name: 'unit', version: '1' }, { capabilities: { tools: {} } });
    let asked: Promise<unknown> | undefined;
    server.setRequestHandler(CallToolRequestSchema, async (_request, extra) => {
      // The server's own first request to the client takes id 0, the id of the call it serves.
      asked = extra.sendRequest({ method: 'ping' }, EmptyResultSchema).catch(() => undefined);
      return { content: [{ type: 'text', text: 'after asking' }] };
    });
    const transport = new ExchangeTransport();
    await server.connect(transport);
    await transport.exchange([{ ...initialize, id: 'opening' }], {});
    expect(await transport.exchange([call(0)], {})).toEqual({
      ok: true,
      answers: [{ jsonrpc: '2.0', id: 0, result: { content: [{ type: 'text', text: 'after asking' }] } }],
    });
    expect(asked).toBeDefined();
    await server.close();
    await asked;
  });

  it('answers a request its direct answer takes without the server; leaves the rest to the server', async () => {
    const transport = new ExchangeTransport((request) =>
      request.method === 'tools/call' && request.params?.name === 'direct'
        ? Promise.resolve({ jsonrpc: '2.0', id: request.id, result: { content: [] } })
        : undefined,
    );
    const server = new Server({ name: 'unit', version: '1' }, { capabilities: { tools: {} } });
    let served = 0;
    server.setRequestHandler(CallToolRequestSchema, async () => {
      served += 1;
      return { content: [{ type: 'text', text: 'by the server' }] };
    });
    await server.connect(transport);
    const byName = (id: number, name: string): JSONRPCMessage => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name, arguments: {} },
    });
    expect(await transport.exchange([byName(1, 'direct'), byName(2, 'other')], {})).toEqual({
      ok: true,
      answers: [
        { jsonrpc: '2.0', id: 1, result: { content: [] } },
        { jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text', text: 'by the server' }] } },
      ],
    });
    expect(served).toBe(1);
    await server.close();
  });

  it('a direct answer that comes after its request was cancelled goes nowhere, not to a later request of its id', async () => {
    const answers: ((text: string) => void)[] = [];
    const transport = new ExchangeTransport(
      (request) =>
        new Promise((resolve) => {
          answers.push((text) =>
            resolve({ jsonrpc: '2.0', id: request.id, result: { content: [{ type: 'text', text }] } }),
          );
        }),
    );
    const server = new Server({ name: 'unit', version: '1' }, { capabilities: { tools: {} } });
    await server.connect(transport);
    const cancelled = transport.exchange([call(7)], {});
    const cancel: JSONRPCMessage = {
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: 7 },
    };
    expect(await transport.exchange([cancel], {})).toEqual({ ok: true, answers: [] });
    expect(await cancelled).toEqual({
      ok: true,
      answers: [{ jsonrpc: '2.0', id: 7, error: { code: -32800, message: 'Request cancelled' } }],
    });
    const again = transport.exchange([call(7)], {});
    expect(answers).toHaveLength(2);
    answers[0]?.('late');
    await tick();
    answers[1]?.('second');
    expect(await again).toEqual({
      ok: true,
      answers: [{ jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'second' }] } }],
    });
    await server.close();
  });
});
