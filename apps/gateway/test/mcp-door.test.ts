import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { failure, MODEL_ID, QUESTION_EXAMPLES } from '@decision-gateway/contract';
import { createLexicalUpstream } from '@decision-gateway/questions';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryCache } from '../src/cache/memory-cache.ts';
import {
  ADMIN_TOKEN,
  bearer,
  get,
  post,
  scriptedUpstream,
  send,
  sleep,
  startGateway,
  type TestGateway,
} from './harness.ts';

// The MCP door (docs/mcp.md), driven as an MCP client drives it: the official SDK's `Client` and
// `StreamableHTTPClientTransport`, unchanged. Only the exchange's own refusals are read raw.

const STATE = 'Hi, I was charged twice for my order last week. Please refund the double charge.';
const TEAM = {
  type: 'choice',
  instructions: 'Which team?',
  criteria: { billing: 'payments, refunds', technical: null },
};
const URGENCY = { type: 'score', instructions: 'How urgent?', criteria: ['low', 'medium', 'high'] };
const REFUND = { type: 'noul', instructions: 'The customer asks for a refund.' };

/** An SDK client on the door with this credential; `seen` holds the headers of each response. */
async function connect(gw: TestGateway, credential: string) {
  const seen: Headers[] = [];
  const transport = new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), {
    requestInit: { headers: bearer(credential) },
    fetch: async (url, init) => {
      const response = await fetch(url, init);
      seen.push(response.headers);
      return response;
    },
  });
  const client = new Client({ name: 'mcp-door-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport, seen };
}

const text = (result: Awaited<ReturnType<Client['callTool']>>) =>
  ((result as CallToolResult).content[0] as { type: 'text'; text: string }).text;

/** A tool failure's first line: `<code> <type>: <message>`. */
function refusal(result: Awaited<ReturnType<Client['callTool']>>) {
  expect(result.isError).toBe(true);
  expect(result.structuredContent).toBeUndefined();
  const [first = ''] = text(result).split('\n');
  const match = /^(\d{5}) (\w+): (.*)$/.exec(first);
  if (!match) throw new Error(`not a gateway failure: ${first}`);
  return { code: Number(match[1]), type: match[2], message: match[3] };
}

describe('the MCP door, through the official MCP SDK', () => {
  let gw: TestGateway;
  let key: { id: string; key: string };
  let mcp: Awaited<ReturnType<typeof connect>>;

  beforeAll(async () => {
    gw = await startGateway({ adminToken: ADMIN_TOKEN });
    key = await gw.createKey({ credits: 100 });
    mcp = await connect(gw, key.key);
  });
  afterAll(async () => {
    await mcp.client.close();
    await gw.close();
  });

  it('lists decide and record_outcome, whose input schemas take what the contract takes and no more', async () => {
    const { tools } = await mcp.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['decide', 'record_outcome']);
    const [decide, record] = tools;
    if (!decide || !record) throw new Error('tools');
    expect(decide.outputSchema?.required).toEqual([
      'answers',
      'usage',
      'elapsedMs',
      'creditsUsed',
      'requestId',
    ]);
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    const decideInput = ajv.compile(decide.inputSchema);
    for (const example of Object.values(QUESTION_EXAMPLES))
      expect(decideInput(example), JSON.stringify(decideInput.errors)).toBe(true);
    expect(decideInput({ ...QUESTION_EXAMPLES.choice, route: 'default' })).toBe(true);
    // The model is the gateway's; a choice needs two options; at most 8 questions.
    expect(decideInput({ ...QUESTION_EXAMPLES.choice, model: 'vendor/model-1.13' })).toBe(false);
    expect(decideInput({ state: 's', questions: { a: { type: 'choice', criteria: { only: null } } } })).toBe(
      false,
    );
    const nine = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`q${i}`, REFUND]));
    expect(decideInput({ state: 's', questions: nine })).toBe(false);
    const recordInput = ajv.compile(record.inputSchema);
    expect(recordInput({ requestId: 'req_1', outcomes: { team: 'billing', refund: true, urgency: 2 } })).toBe(
      true,
    );
    expect(recordInput({ requestId: 'req_1' })).toBe(false);
  });

  it('decides each question type: structured answers, usage and credits, one text line per question', async () => {
    const before = await gw.keys.get(key.id);
    const result = await mcp.client.callTool({
      name: 'decide',
      arguments: { state: STATE, questions: { team: TEAM, urgency: URGENCY, refund: REFUND } },
    });
    expect(result.isError).toBeFalsy();
    const decided = result.structuredContent as {
      answers: Record<
        string,
        { type: string; choice?: string; probabilities?: Record<string, number>; noul?: number }
      >;
      usage: { input_tokens: number; output_tokens: number };
      elapsedMs: number;
      creditsUsed: number;
      requestId: string;
    };
    expect(Object.keys(decided.answers)).toEqual(['team', 'urgency', 'refund']);
    expect(decided.answers.team).toMatchObject({ type: 'choice', choice: 'billing' });
    expect(decided.answers.urgency?.type).toBe('score');
    expect(decided.answers.refund?.type).toBe('noul');
    expect(decided.usage.input_tokens).toBeGreaterThan(0);
    expect(decided.creditsUsed).toBeCloseTo(decided.usage.input_tokens / 1000, 9);
    expect(decided.requestId).toMatch(/^req_[0-9a-f]{32}$/);

    const lines = text(result).split('\n');
    const team = decided.answers.team?.probabilities?.billing ?? -1;
    expect(lines[0]).toBe(`team: billing (p=${team.toFixed(2)})`);
    expect(lines[1]).toMatch(/^urgency: \d\.\d\d on 0 to 2 \(likeliest \d, p=\d\.\d\d\)$/);
    expect(lines[2]).toBe(
      `refund: ${(decided.answers.refund?.noul ?? 0) >= 0.5} (p(true)=${decided.answers.refund?.noul?.toFixed(2)})`,
    );
    expect(lines[3]).toContain(`requestId ${decided.requestId}`);

    // The same debit, usage record and headers as on every door.
    const after = await gw.keys.get(key.id);
    if (!before.ok || !after.ok) throw new Error('key');
    expect((before.value.credits ?? 0) - (after.value.credits ?? 0)).toBeCloseTo(decided.creditsUsed, 9);
    const usage = await gw.keys.usage(key.id, 5);
    if (!usage.ok) throw new Error('usage');
    expect(usage.value.recent[0]).toMatchObject({ requestId: decided.requestId, status: 200, questions: 3 });
    const headers = mcp.seen.at(-1);
    expect(headers?.get('x-request-id')).toBe(decided.requestId);
    expect(headers?.get('x-credits-used')).toBe(String(decided.creditsUsed));
    expect(headers?.get('x-dg-route')).toBe('default');

    // One log line for the call, labelled by its tool in the metrics.
    const line = gw.logs
      .map((l) => JSON.parse(l))
      .find((l) => l.requestId === decided.requestId && l.msg === 'request');
    expect(line).toMatchObject({
      path: '/mcp',
      status: 200,
      code: 0,
      questions: 3,
      creditsUsed: decided.creditsUsed,
    });
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toMatch(
      /dg_http_requests_total\{route="\/mcp\/decide",method="POST",status="200",code="0"\} [1-9]/,
    );
  });

  it('names a route by the tool’s `route` argument, and refuses an unknown one as a tool result', async () => {
    const ok = await mcp.client.callTool({
      name: 'decide',
      arguments: { state: STATE, questions: { refund: REFUND }, route: 'default' },
    });
    expect(ok.isError).toBeFalsy();
    const unknown = await mcp.client.callTool({
      name: 'decide',
      arguments: { state: STATE, questions: { refund: REFUND }, route: 'nowhere' },
    });
    expect(refusal(unknown)).toMatchObject({ code: 40004, type: 'unknown_route' });
    const notAName = await mcp.client.callTool({
      name: 'decide',
      arguments: { state: STATE, questions: { refund: REFUND }, route: 7 },
    });
    expect(refusal(notAName)).toEqual({
      code: 40001,
      type: 'invalid_request',
      message: 'route: must be the name of a route',
    });
  });

  it('answers every invalid input as a tool result naming its code, path and message, never charged', async () => {
    const before = await gw.keys.get(key.id);
    const oneOption = await mcp.client.callTool({
      name: 'decide',
      arguments: { state: STATE, questions: { triage: { type: 'choice', criteria: { only: null } } } },
    });
    expect(refusal(oneOption)).toEqual({
      code: 40001,
      type: 'invalid_request',
      message: 'questions.triage.criteria: a choice needs at least 2 options',
    });
    // Several issues: each on a line of its own, so one retry can fix them all.
    const two = await mcp.client.callTool({
      name: 'decide',
      arguments: { questions: { triage: { type: 'choice', criteria: { only: null } } } },
    });
    expect(refusal(two)).toMatchObject({ code: 40001, message: 'state: is required (and 1 more)' });
    expect(text(two)).toContain('\n- state: is required');
    expect(text(two)).toContain('\n- questions.triage.criteria: a choice needs at least 2 options');

    const none = await mcp.client.callTool({ name: 'decide', arguments: { state: STATE, questions: {} } });
    expect(refusal(none)).toMatchObject({ code: 40002, type: 'invalid_question_count' });
    const noArguments = await mcp.client.callTool({ name: 'decide' });
    expect(refusal(noArguments).code).toBe(40001);
    const model = await mcp.client.callTool({
      name: 'decide',
      arguments: { model: 'other/model', state: STATE, questions: { refund: REFUND } },
    });
    expect(refusal(model)).toMatchObject({ code: 40003, type: 'unknown_model' });
    const big = await mcp.client.callTool({
      name: 'decide',
      arguments: { state: 'x'.repeat(40_000), questions: { refund: REFUND } },
    });
    expect(refusal(big)).toMatchObject({ code: 41300, type: 'payload_too_large' });
    const after = await gw.keys.get(key.id);
    expect(after.ok && after.value.credits).toBe(before.ok && before.value.credits);
  });

  it('refuses a decision the key cannot pay for (40200) as a tool result', async () => {
    const poor = await gw.createKey({ credits: 0 });
    const agent = await connect(gw, poor.key);
    const refused = await agent.client.callTool({
      name: 'decide',
      arguments: { state: STATE, questions: { refund: REFUND } },
    });
    expect(refusal(refused)).toMatchObject({ code: 40200, type: 'insufficient_credits' });
    await agent.client.close();
  });

  it('refuses a decision a hard budget cannot take (40202) as a tool result, with its wait', async () => {
    const metered = await gw.keys.create({
      name: 'metered agent',
      credits: 100,
      budgets: [{ window: 'day', limit: 0.000001, mode: 'hard' }],
    });
    if (!metered.ok) throw new Error(metered.error.message);
    const agent = await connect(gw, metered.value.key);
    const refused = await agent.client.callTool({
      name: 'decide',
      arguments: { state: STATE, questions: { refund: REFUND } },
    });
    expect(refusal(refused)).toMatchObject({ code: 40202, type: 'budget_exceeded' });
    expect(refusal(refused).message).toContain(`the key ${metered.value.id}'s day budget`);
    expect(text(refused)).toMatch(/\nretry after \d+ s\n/);
    await agent.client.close();
  });

  it('an unknown tool is the protocol’s own error', async () => {
    await expect(mcp.client.callTool({ name: 'guess', arguments: {} })).rejects.toMatchObject({
      code: -32602,
      message: expect.stringMatching(/no tool named "guess"/),
    });
  });

  it('records outcomes for a decision, which /admin/calibration then counts', async () => {
    const decided = await mcp.client.callTool({
      name: 'decide',
      arguments: { state: STATE, questions: { team: TEAM, refund: REFUND } },
    });
    const { requestId } = decided.structuredContent as { requestId: string };
    const recorded = await mcp.client.callTool({
      name: 'record_outcome',
      arguments: { requestId, outcomes: { team: 'billing', refund: true } },
    });
    expect(recorded.isError).toBeFalsy();
    expect(recorded.structuredContent).toEqual({ recorded: 2, replaced: 0 });
    expect(text(recorded)).toBe('recorded 2 outcomes (0 replaced)');
    const again = await mcp.client.callTool({
      name: 'record_outcome',
      arguments: { requestId, outcomes: { refund: false } },
    });
    expect(again.structuredContent).toEqual({ recorded: 1, replaced: 1 });

    const calibration = await get(gw.url, `/admin/calibration?keyId=${key.id}`, bearer(ADMIN_TOKEN));
    const groups = calibration.body.data.groups as { upstream: string; type: string; outcomes: number }[];
    expect(groups.find((g) => g.type === 'choice')?.outcomes).toBe(1);
    expect(groups.find((g) => g.type === 'noul')?.outcomes).toBe(1);

    const unknown = await mcp.client.callTool({
      name: 'record_outcome',
      arguments: { requestId: 'req_0000', outcomes: { team: 'billing' } },
    });
    expect(refusal(unknown)).toMatchObject({ code: 40400, type: 'not_found' });
    const badTruth = await mcp.client.callTool({
      name: 'record_outcome',
      arguments: { requestId, outcomes: { team: 'nobody' } },
    });
    expect(refusal(badTruth).code).toBe(40001);
    const noOutcomes = await mcp.client.callTool({ name: 'record_outcome', arguments: { requestId } });
    expect(refusal(noOutcomes).code).toBe(40001);
  });

  it('takes a browser token as its Bearer credential, acting for the token’s key', async () => {
    const minted = await post(gw.url, '/v1/tokens', { ttlSeconds: 300 }, bearer(key.key));
    expect(minted.status).toBe(201);
    const agent = await connect(gw, minted.body.data.token as string);
    const decided = await agent.client.callTool({
      name: 'decide',
      arguments: { state: STATE, questions: { refund: REFUND } },
    });
    expect(decided.isError).toBeFalsy();
    const usage = await gw.keys.usage(key.id, 1);
    const { requestId } = decided.structuredContent as { requestId: string };
    expect(usage.ok && usage.value.recent[0]?.requestId).toBe(requestId);
    const recorded = await agent.client.callTool({
      name: 'record_outcome',
      arguments: { requestId, outcomes: { refund: true } },
    });
    expect(recorded.structuredContent).toEqual({ recorded: 1, replaced: 0 });
    await agent.client.close();
  });
});

describe('the MCP door refuses an exchange as HTTP does, in JSON-RPC', () => {
  let gw: TestGateway;
  let key: { id: string; key: string };
  const initialize = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  };
  const accept = { accept: 'application/json, text/event-stream' };

  beforeAll(async () => {
    gw = await startGateway();
    key = await gw.createKey({ credits: 100 });
  });
  afterAll(async () => {
    await gw.close();
  });

  it('no credential: 401 with WWW-Authenticate: Bearer, and the SDK client cannot connect', async () => {
    const sent = await post(gw.url, '/mcp', initialize, accept);
    expect(sent.status).toBe(401);
    expect(sent.headers.get('www-authenticate')).toBe('Bearer realm="decision-gateway"');
    expect(sent.body).toMatchObject({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32000,
        data: { code: 40100, type: 'missing_api_key', requestId: sent.headers.get('x-request-id') },
      },
    });
    const client = new Client({ name: 'anonymous', version: '1' });
    await expect(
      client.connect(new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`))),
    ).rejects.toMatchObject({ code: 401 });
  });

  it('an unknown or revoked key: 401 with error="invalid_token"; a session of a key revoked since refuses its tools', async () => {
    const unknown = await post(gw.url, '/mcp', initialize, { ...accept, ...bearer('dg_not-a-key') });
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get('www-authenticate')).toBe(
      'Bearer realm="decision-gateway", error="invalid_token"',
    );
    expect(unknown.body.error.data).toMatchObject({ code: 40101, type: 'invalid_api_key' });

    const doomed = await gw.createKey({ credits: 100 });
    const agent = await connect(gw, doomed.key);
    await gw.keys.revoke(doomed.id);
    const refused = await agent.client.callTool({
      name: 'decide',
      arguments: { state: STATE, questions: { refund: REFUND } },
    });
    expect(refusal(refused)).toEqual({
      code: 40101,
      type: 'invalid_api_key',
      message: 'the API key has been revoked',
    });
    await expect(connect(gw, doomed.key)).rejects.toMatchObject({ code: 401 });
    await agent.transport.close();
  });

  it('GET is 405 (nothing is pushed), a body that is not JSON 40000, another media type 41500, after the key', async () => {
    const got = await get(gw.url, '/mcp', { ...accept, ...bearer(key.key) });
    expect(got.status).toBe(405);
    expect(got.headers.get('allow')).toBe('DELETE, POST');
    const notJson = await post(gw.url, '/mcp', '{"jsonrpc":', { ...accept, ...bearer(key.key) });
    expect(notJson.status).toBe(400);
    expect(notJson.body.error).toMatchObject({ code: -32700, data: { code: 40000 } });
    const text = await post(gw.url, '/mcp', JSON.stringify(initialize), {
      ...accept,
      ...bearer(key.key),
      'content-type': 'text/plain',
    });
    expect(text.status).toBe(415);
    expect(text.body.error.data.code).toBe(41500);
    // Without a key, the same body is a 401 first.
    expect(
      (await post(gw.url, '/mcp', JSON.stringify(initialize), { 'content-type': 'text/plain' })).status,
    ).toBe(401);
  });

  it('a message outside a session, other than initialize, is 400; an unknown session 404', async () => {
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
    const outside = await post(gw.url, '/mcp', list, { ...accept, ...bearer(key.key) });
    expect(outside.status).toBe(400);
    expect(outside.body.error.data).toMatchObject({ code: 40001 });
    const unknown = await post(gw.url, '/mcp', list, {
      ...accept,
      ...bearer(key.key),
      'mcp-session-id': 'nope',
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.data).toMatchObject({ code: 40400 });
  });
});

describe('Streamable HTTP’s own rules, judged by the door as the SDK’s transport words them', () => {
  const accept = { accept: 'application/json, text/event-stream' };
  const version = { 'mcp-protocol-version': '2025-06-18' };
  const initialize = {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  };

  /** A session opened by raw messages: the headers each later message of it sends. */
  async function openRaw(gw: TestGateway, key: string) {
    const opened = await post(gw.url, '/mcp', initialize, { ...accept, ...bearer(key) });
    expect(opened.status).toBe(200);
    expect(opened.body.result.protocolVersion).toBe('2025-06-18');
    const sessionId = opened.headers.get('mcp-session-id') as string;
    expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);
    const headers = { ...accept, ...version, ...bearer(key), 'mcp-session-id': sessionId };
    const told = await post(gw.url, '/mcp', { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
    expect(told.status).toBe(202);
    expect(told.text).toBe('');
    return headers;
  }

  it('a decision is measured for its reservation as REST measures a body: by the bytes of a one-message exchange, else as JSON', async () => {
    const lexical = createLexicalUpstream();
    const measured: number[] = [];
    const upstream = scriptedUpstream(
      (call) => lexical.answer(call),
      (request, bytes) => {
        measured.push(bytes);
        return lexical.usageBound(request, bytes);
      },
    );
    const gw = await startGateway({ upstream });
    try {
      const key = await gw.createKey({ credits: 10 });
      const session = await openRaw(gw, key.key);
      const decision = { state: STATE, questions: { refund: REFUND } };
      const decide = (id: number) => ({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'decide', arguments: decision },
      });
      // Written with room to spare, so that the body's bytes and the decision's own differ.
      const roomy = JSON.stringify(decide(1), null, 2);
      const one = await post(gw.url, '/mcp', roomy, session);
      expect(one.body.result.isError).toBeUndefined();
      const batch = await post(gw.url, '/mcp', [decide(2), decide(3)], session);
      expect(batch.body).toHaveLength(2);
      const asJson = Buffer.byteLength(JSON.stringify({ model: MODEL_ID, ...decision }));
      expect(measured).toEqual([Buffer.byteLength(roomy), asJson, asJson]);
      expect(Buffer.byteLength(roomy)).toBeGreaterThan(asJson);
    } finally {
      await gw.close();
    }
  });

  it('a decision takes the caller’s own arguments: a __proto__ field among them is refused as unknown, as REST refuses it', async () => {
    const gw = await startGateway();
    try {
      const key = await gw.createKey({ credits: 10 });
      const session = await openRaw(gw, key.key);
      const decision = JSON.stringify({ state: STATE, questions: { refund: REFUND } });
      const raw = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"decide","arguments":{"__proto__":{},${decision.slice(1)}}}`;
      const answered = await post(gw.url, '/mcp', raw, session);
      expect(answered.body.result.isError).toBe(true);
      expect(answered.body.result.content[0].text.split('\n')[0]).toBe(
        '40001 invalid_request: __proto__: is not a known field',
      );
      const plain = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"decide","arguments":${decision}}}`;
      expect((await post(gw.url, '/mcp', plain, session)).body.result.isError).toBeUndefined();
    } finally {
      await gw.close();
    }
  });

  it('406 without both media types in Accept (and no session opens); 400 for a message that is not JSON-RPC, a second initialize, an unknown protocol version, a batch over 100', async () => {
    const gw = await startGateway({ mcpSessions: { max: 1 } });
    try {
      const key = await gw.createKey();
      const session = await openRaw(gw, key.key);
      const list = { jsonrpc: '2.0', id: 1, method: 'tools/list' };

      const jsonOnly = await post(gw.url, '/mcp', initialize, {
        accept: 'application/json',
        ...bearer(key.key),
      });
      expect(jsonOnly.status).toBe(406);
      expect(jsonOnly.headers.get('mcp-session-id')).toBeNull();
      expect(jsonOnly.body).toEqual({
        jsonrpc: '2.0',
        id: null,
        error: {
          code: -32000,
          message: 'Not Acceptable: Client must accept both application/json and text/event-stream',
        },
      });
      // With room for one session, an initialize that had opened one would have closed this one.
      expect((await post(gw.url, '/mcp', list, session)).body.result.tools).toHaveLength(2);
      expect((await post(gw.url, '/mcp', list, { ...session, accept: 'text/event-stream' })).status).toBe(
        406,
      );

      const notRpc = await post(gw.url, '/mcp', { hello: 'world' }, session);
      expect(notRpc.status).toBe(400);
      expect(notRpc.body.error).toEqual({ code: -32700, message: 'Parse error: Invalid JSON-RPC message' });

      const again = await post(gw.url, '/mcp', initialize, session);
      expect(again.status).toBe(400);
      expect(again.body.error).toEqual({
        code: -32600,
        message: 'Invalid Request: Server already initialized',
      });

      const old = { ...session, 'mcp-protocol-version': '1999-01-01' };
      const unknown = await post(gw.url, '/mcp', list, old);
      expect(unknown.status).toBe(400);
      expect(unknown.body.error.code).toBe(-32000);
      expect(unknown.body.error.message).toMatch(
        /^Bad Request: Unsupported protocol version: 1999-01-01 \(supported versions: .*2025-06-18/,
      );
      // DELETE names the version too: the session stays open.
      expect((await send(gw.url, 'DELETE', '/mcp', undefined, old)).status).toBe(400);

      const pings = Array.from({ length: 101 }, (_, i) => ({ jsonrpc: '2.0', id: i + 1, method: 'ping' }));
      const batch = await post(gw.url, '/mcp', pings, session);
      expect(batch.status).toBe(400);
      expect(batch.body.error).toEqual({
        code: -32600,
        message: 'Invalid Request: Batch must not exceed 100 messages',
      });
      expect((await post(gw.url, '/mcp', pings.slice(0, 100), session)).body).toHaveLength(100);

      // A message without the header still belongs to its session (the version it initialized with).
      const { 'mcp-protocol-version': _, ...unversioned } = session;
      expect((await post(gw.url, '/mcp', list, unversioned)).status).toBe(200);
      expect((await send(gw.url, 'DELETE', '/mcp', undefined, session)).status).toBe(200);
      expect((await post(gw.url, '/mcp', list, session)).status).toBe(404);
    } finally {
      await gw.close();
    }
  });

  it('notifications alone are accepted (202); a batch is answered in its order; a batch that repeats an id is refused', async () => {
    const gw = await startGateway();
    try {
      const key = await gw.createKey();
      const session = await openRaw(gw, key.key);
      const answered = await post(
        gw.url,
        '/mcp',
        [
          { jsonrpc: '2.0', id: 'b', method: 'tools/list' },
          { jsonrpc: '2.0', method: 'notifications/initialized' },
          { jsonrpc: '2.0', id: 'a', method: 'ping' },
        ],
        session,
      );
      expect(answered.status).toBe(200);
      expect(answered.headers.get('mcp-session-id')).toBe(session['mcp-session-id']);
      expect(answered.body.map((m: { id: string }) => m.id)).toEqual(['b', 'a']);
      expect(answered.body[0].result.tools).toHaveLength(2);
      expect(answered.body[1]).toEqual({ jsonrpc: '2.0', id: 'a', result: {} });

      const twice = await post(
        gw.url,
        '/mcp',
        [
          { jsonrpc: '2.0', id: 3, method: 'ping' },
          { jsonrpc: '2.0', id: 3, method: 'ping' },
        ],
        session,
      );
      expect(twice.status).toBe(400);
      expect(twice.body.error).toEqual({
        code: -32600,
        message: 'Invalid Request: a request with this id is still being answered in this session',
      });
    } finally {
      await gw.close();
    }
  });

  it('a tool call the SDK’s schema refuses, or one asking for a task, is the SDK server’s own error, and nothing is decided', async () => {
    const upstream = scriptedUpstream(() => {
      throw new Error('no decision should reach the upstream');
    });
    const gw = await startGateway({ upstream });
    try {
      const key = await gw.createKey({ credits: 10 });
      const session = await openRaw(gw, key.key);
      const arguments_ = { state: STATE, questions: { refund: REFUND } };
      const unnamed = await post(
        gw.url,
        '/mcp',
        { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { arguments: arguments_ } },
        session,
      );
      expect(unnamed.status).toBe(200);
      // The SDK's server answers a call its schema refuses as an internal error naming the issue.
      expect(unnamed.body).toMatchObject({ jsonrpc: '2.0', id: 1, error: { code: -32603 } });
      expect(JSON.parse(unnamed.body.error.message)).toMatchObject([{ path: ['params', 'name'] }]);
      const task = await post(
        gw.url,
        '/mcp',
        {
          jsonrpc: '2.0',
          id: 2,
          method: 'tools/call',
          params: { name: 'decide', arguments: arguments_, task: { ttl: 60_000 } },
        },
        session,
      );
      expect(task.status).toBe(200);
      expect(task.body).toEqual({
        jsonrpc: '2.0',
        id: 2,
        error: { code: -32603, message: 'Server does not support task creation (required for tools/call)' },
      });
      expect(upstream.calls).toBe(0);
      const usage = await gw.keys.usage(key.id, 5);
      expect(usage.ok && usage.value.totals.requests).toBe(0);
    } finally {
      await gw.close();
    }
  });

  it('a call still waiting keeps its id, ends with its answer when the client ends the session, and a cancelled one is answered -32800', async () => {
    const lexical = createLexicalUpstream();
    const held: (() => void)[] = [];
    const upstream = scriptedUpstream(
      (call) => new Promise((resolve) => held.push(() => resolve(lexical.answer(call)))),
      (request, bytes) => lexical.usageBound(request, bytes),
    );
    const gw = await startGateway({ upstream });
    try {
      const key = await gw.createKey({ credits: 10 });
      const session = await openRaw(gw, key.key);
      const decide = (id: number) => ({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'decide', arguments: { state: STATE, questions: { refund: REFUND } } },
      });
      const upstreamCalled = async (calls: number) => {
        for (let waited = 0; upstream.calls < calls; waited += 10) {
          if (waited > 30_000) throw new Error('the decision never reached the upstream');
          await sleep(10);
        }
      };

      const cancelled = post(gw.url, '/mcp', decide(1), session);
      await upstreamCalled(1);
      const notice = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } };
      expect((await post(gw.url, '/mcp', notice, session)).status).toBe(202);
      expect((await cancelled).body).toEqual({
        jsonrpc: '2.0',
        id: 1,
        error: { code: -32800, message: 'Request cancelled' },
      });

      const waiting = post(gw.url, '/mcp', decide(2), session);
      await upstreamCalled(2);
      const reused = await post(gw.url, '/mcp', decide(2), session);
      expect(reused.status).toBe(400);
      expect(reused.body.error.code).toBe(-32600);
      expect((await send(gw.url, 'DELETE', '/mcp', undefined, session)).status).toBe(200);
      expect((await post(gw.url, '/mcp', decide(3), session)).status).toBe(404);
      for (const release of held) release();
      const answer = await waiting;
      expect(answer.status).toBe(200);
      expect(answer.body.result.structuredContent.answers.refund).toMatchObject({ type: 'noul' });
      expect(upstream.calls).toBe(2);
      // The cancelled decision was reserved before its cancel: it is settled and recorded all the same.
      for (let waited = 0; ; waited += 10) {
        const usage = await gw.keys.usage(key.id, 5);
        if (usage.ok && usage.value.totals.requests === 2) break;
        if (waited > 30_000) throw new Error('the cancelled decision was never recorded');
        await sleep(10);
      }
    } finally {
      await gw.close();
    }
  });
});

describe('the MCP door’s other refusals', () => {
  it('a token from an origin it does not allow: 403; a body over 65536 bytes: 413 before the key is read', async () => {
    const gw = await startGateway({ corsOrigins: ['https://app.example.com'] });
    try {
      const key = await gw.createKey();
      const minted = await post(
        gw.url,
        '/v1/tokens',
        { ttlSeconds: 60, origins: ['https://app.example.com'] },
        bearer(key.key),
      );
      const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} };
      const headers = { accept: 'application/json, text/event-stream', origin: 'https://evil.example.com' };
      const foreign = await post(gw.url, '/mcp', initialize, {
        ...headers,
        ...bearer(minted.body.data.token),
      });
      expect(foreign.status).toBe(403);
      expect(foreign.body.error.data).toMatchObject({ code: 40300, type: 'forbidden' });
      const big = await post(gw.url, '/mcp', { ...initialize, padding: 'x'.repeat(70_000) }, {});
      expect(big.status).toBe(413);
      expect(big.body.error.data).toMatchObject({ code: 41300, type: 'payload_too_large' });
    } finally {
      await gw.close();
    }
  });

  it('an upstream’s failure is a tool result (50200), and the decision is not charged', async () => {
    const upstream = scriptedUpstream(() => ({
      ok: false,
      failure: failure('upstream_error', 'the upstream answered 500'),
      unwell: true,
    }));
    const gw = await startGateway({ upstream });
    try {
      const key = await gw.createKey({ credits: 10 });
      const agent = await connect(gw, key.key);
      const failed = await agent.client.callTool({
        name: 'decide',
        arguments: { state: STATE, questions: { refund: REFUND } },
      });
      expect(refusal(failed)).toEqual({
        code: 50200,
        type: 'upstream_error',
        message: 'the upstream answered 500',
      });
      expect(upstream.calls).toBe(1);
      const after = await gw.keys.get(key.id);
      expect(after.ok && after.value.credits).toBe(10);
      await agent.client.close();
    } finally {
      await gw.close();
    }
  });

  it('the README’s client configuration connects, as written but for the address and key', async () => {
    const readme = readFileSync(join(import.meta.dirname, '../../../README.md'), 'utf8');
    const block = /### An agent[\s\S]*?```json\n([\s\S]*?)```/.exec(readme)?.[1];
    if (block === undefined) throw new Error('no MCP configuration in the README');
    const servers = (
      JSON.parse(block) as { mcpServers: Record<string, { url: string; headers: Record<string, string> }> }
    ).mcpServers;
    const [server] = Object.values(servers);
    if (!server) throw new Error('no server in the README’s configuration');
    const gw = await startGateway();
    try {
      const key = await gw.createKey();
      const url = new URL(server.url);
      expect(url.host).toBe('127.0.0.1:8787');
      const headers = {
        ...server.headers,
        Authorization: server.headers.Authorization?.replace(/dg_\w+/, key.key) as string,
      };
      expect(headers.Authorization).toBe(`Bearer ${key.key}`);
      const client = new Client({ name: 'readme', version: '1' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(url.pathname, gw.url), { requestInit: { headers } }),
      );
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['decide', 'record_outcome']);
      await client.close();
    } finally {
      await gw.close();
    }
  });
});

describe('the decision cache answers MCP decisions as any other', () => {
  it('the same decision again: no upstream call, 0 credits, x-dg-cache hit, a usage record each', async () => {
    const lexical = createLexicalUpstream();
    const upstream = scriptedUpstream(
      (call) => lexical.answer(call),
      (request, bytes) => lexical.usageBound(request, bytes),
    );
    const gw = await startGateway({
      upstream,
      cache: createMemoryCache({ maxBytes: 1_000_000 }),
      cacheTtlSeconds: 3600,
    });
    try {
      const key = await gw.createKey({ credits: 10 });
      const agent = await connect(gw, key.key);
      const args = { state: STATE, questions: { team: TEAM } };
      const first = await agent.client.callTool({ name: 'decide', arguments: args });
      expect(agent.seen.at(-1)?.get('x-dg-cache')).toBe('miss');
      const second = await agent.client.callTool({ name: 'decide', arguments: args });
      expect(agent.seen.at(-1)?.get('x-dg-cache')).toBe('hit');
      expect(upstream.calls).toBe(1);
      const [a, b] = [first.structuredContent, second.structuredContent] as {
        answers: unknown;
        creditsUsed: number;
      }[];
      expect(b?.answers).toEqual(a?.answers);
      expect(b?.creditsUsed).toBe(0);
      const usage = await gw.keys.usage(key.id, 5);
      expect(usage.ok && usage.value.totals.requests).toBe(2);
      await agent.client.close();
    } finally {
      await gw.close();
    }
  });
});

describe('MCP sessions are bounded', () => {
  it('one key cannot use another key’s session; a closed session is gone', async () => {
    const gw = await startGateway();
    try {
      const [a, b] = [await gw.createKey(), await gw.createKey()];
      const agent = await connect(gw, a.key);
      const sessionId = agent.transport.sessionId;
      expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);
      const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
      const headers = {
        accept: 'application/json, text/event-stream',
        'mcp-session-id': sessionId as string,
        'mcp-protocol-version': '2025-06-18',
      };
      const stolen = await post(gw.url, '/mcp', list, { ...headers, ...bearer(b.key) });
      expect(stolen.status).toBe(404);
      const own = await post(gw.url, '/mcp', list, { ...headers, ...bearer(a.key) });
      expect(own.status).toBe(200);
      expect(own.body.result.tools).toHaveLength(2);

      await agent.transport.terminateSession();
      expect((await post(gw.url, '/mcp', list, { ...headers, ...bearer(a.key) })).status).toBe(404);
    } finally {
      await gw.close();
    }
  });

  it('past MCP_MAX_SESSIONS the least recently used closes, and one idle for 10 minutes closes', async () => {
    let now = Date.parse('2026-11-26T12:00:00Z');
    const gw = await startGateway({ mcpSessions: { max: 2 }, clock: () => now });
    try {
      const key = await gw.createKey();
      const first = await connect(gw, key.key);
      const second = await connect(gw, key.key);
      await first.client.listTools(); // first is now the more recently used
      const third = await connect(gw, key.key);
      await expect(second.client.listTools()).rejects.toMatchObject({ code: 404 });
      expect((await first.client.listTools()).tools).toHaveLength(2);
      expect((await third.client.listTools()).tools).toHaveLength(2);

      now += 9 * 60_000;
      expect((await first.client.listTools()).tools).toHaveLength(2);
      now += 10 * 60_000 + 1; // third has now been idle for over 10 minutes; first for just over 10
      await expect(third.client.listTools()).rejects.toMatchObject({ code: 404 });
      await expect(first.client.listTools()).rejects.toMatchObject({ code: 404 });
      // A client whose session closed initializes again.
      const again = await connect(gw, key.key);
      expect((await again.client.listTools()).tools).toHaveLength(2);
    } finally {
      await gw.close();
    }
  });
});

/**
 * The SDK's client hands its session's one AbortSignal to every `fetch`, and Node 20's fetch
 * (undici) takes its abort listener off that signal only once the request is collected
 * (nodejs/undici#5285): a client making thousands of calls between collections sees a
 * MaxListenersExceededWarning a call past 1,500. A collection, and a turn for the finalizers to
 * run in, takes them off. The warning is the test client's, not the gateway's.
 */
async function collectFinishedFetches(gc: () => void) {
  gc();
  await new Promise((resolve) => setImmediate(resolve));
}

describe('an MCP session keeps no memory per call', () => {
  // The SDK's own transport (1.32.2) kept one entry per answered POST in JSON-response mode for the
  // session's life (typescript-sdk#2559): about 13 KB a call. The door's transport must keep none.
  it('2000 decide calls in one session leave the heap within a few hundred bytes a call', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const gw = await startGateway();
    try {
      const key = await gw.createKey({ credits: null });
      const agent = await connect(gw, key.key);
      const ask = () =>
        agent.client.callTool({
          name: 'decide',
          arguments: { state: 'x'.repeat(500), questions: { refund: REFUND } },
        });
      for (let i = 0; i < 200; i++) await ask();
      gc();
      const before = process.memoryUsage().heapUsed;
      for (let i = 0; i < 2000; i++) {
        await ask();
        if (i % 500 === 499) await collectFinishedFetches(gc);
      }
      gc();
      const perCall = (process.memoryUsage().heapUsed - before) / 2000;
      // The harness keeps every log line (about 1 KB a request, on every door); the leak was 13 KB.
      expect(perCall).toBeLessThan(4_000);
      await agent.client.close();
    } finally {
      await gw.close();
    }
  }, 120_000);
});

describe('MCP tool calls take rate-limit tokens; the protocol’s own messages do not', () => {
  it('a key over its limit gets 42900 with its wait as a tool result, while listing tools still works', async () => {
    const gw = await startGateway({ rateLimitPerMinute: 2 });
    try {
      const key = await gw.createKey({ rateLimitPerMinute: 2 });
      const agent = await connect(gw, key.key);
      for (let i = 0; i < 5; i++) await agent.client.listTools();
      const args = { state: STATE, questions: { refund: REFUND } };
      expect((await agent.client.callTool({ name: 'decide', arguments: args })).isError).toBeFalsy();
      const decided = await agent.client.callTool({ name: 'decide', arguments: args });
      const { requestId } = decided.structuredContent as { requestId: string };
      const limited = await agent.client.callTool({
        name: 'record_outcome',
        arguments: { requestId, outcomes: { refund: true } },
      });
      expect(refusal(limited)).toMatchObject({ code: 42900, type: 'rate_limited' });
      expect(text(limited)).toMatch(/\nretry after \d+ s\n/);
      expect(refusal(await agent.client.callTool({ name: 'decide', arguments: args })).code).toBe(42900);
      expect((await agent.client.listTools()).tools).toHaveLength(2);
      await agent.client.close();
    } finally {
      await gw.close();
    }
  });
});
