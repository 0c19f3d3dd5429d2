import { groupsOf } from '@decision-gateway/questions';
import { afterEach, describe, expect, it } from 'vitest';
import { bearer, post, sampleRequest, sleep, startGateway } from '../../../../test/harness.ts';
import { type Handler, json, type SeenRequest, startStandIn } from '../../../../test/stand-in-upstream.ts';
import { loadConfig } from '../../../config/environment.ts';
import { createUpstream } from '../../registry.ts';
import { plannedCalls } from './label-distribution.ts';
import { groupSizeFor } from './openai-upstream.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

/** A chat completion whose single token had these alternatives. */
function completion(top: Record<string, number>, usage = { prompt_tokens: 100, completion_tokens: 1 }) {
  const top_logprobs = Object.entries(top).map(([token, p]) => ({
    token,
    logprob: Math.log(p),
    bytes: null,
  }));
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: top_logprobs[0]?.token ?? '' },
        logprobs: {
          content: [{ token: top_logprobs[0]?.token, logprob: top_logprobs[0]?.logprob, top_logprobs }],
        },
        finish_reason: 'length',
      },
    ],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  };
}

/** The options of the prompt, as "A. label" lines → { A: 'label', … }. */
function optionsOf(request: SeenRequest): Record<string, string> {
  const user: string = request.body.messages[1].content;
  const section = user.split('# Options\n')[1]?.split('\n\n')[0] ?? '';
  return Object.fromEntries(
    section.split('\n').map((line) => [line.slice(0, 1), line.slice(3).split(':')[0] as string]),
  );
}

async function setup(handler: Handler, env: Record<string, string> = {}) {
  const standIn = await startStandIn(handler);
  const loaded = loadConfig({
    UPSTREAM: 'openai',
    UPSTREAM_BASE_URL: `${standIn.url}/v1`,
    UPSTREAM_MODEL: 'test-model',
    UPSTREAM_API_KEY: 'sk-test',
    UPSTREAM_MAX_RETRIES: '0',
    ...env,
  });
  if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
  const gw = await startGateway({
    upstream: (logger) => createUpstream(loaded.config.upstream, logger),
    upstreamTimeoutMs: loaded.config.upstream.config.timeoutMs,
  });
  cleanups.push(standIn.close, gw.close);
  const key = await gw.createKey({ credits: 50 });
  const send = (body: unknown = sampleRequest()) => post(gw.url, '/v1/systemone', body, bearer(key.key));
  return { standIn, gw, key, send };
}

/** Answers each question kind from the prompt: choice → A, score → 2, noul → Yes. */
const confident: Handler = (req, res) => {
  const user: string = req.body.messages[1].content;
  if (user.includes('# Options'))
    return json(res, 200, completion({ A: 0.6, ' A': 0.1, b: 0.2, Hello: 0.05 }));
  if (user.includes('# Levels')) return json(res, 200, completion({ '2': 0.7, '1': 0.2, '0': 0.1 }));
  return json(res, 200, completion({ Yes: 0.5, ' yes': 0.2, true: 0.1, No: 0.15 }));
};

describe('UPSTREAM=openai', () => {
  it('asks one token with logprobs per question and reads the distribution off the label tokens', async () => {
    const { standIn, send } = await setup(confident);
    const response = await send();
    expect(response.status).toBe(200);
    expect(standIn.seen).toHaveLength(3);
    for (const request of standIn.seen) {
      expect(request.path).toBe('/v1/chat/completions');
      expect(request.headers.authorization).toBe('Bearer sk-test');
      expect(request.body).toMatchObject({
        model: 'test-model',
        max_tokens: 1,
        temperature: 0,
        logprobs: true,
        top_logprobs: 20,
      });
      expect(request.body.messages[1].content).toContain('Hi, I was charged twice');
    }
    const { team, urgency, refund } = response.body.data.result.answers;
    // A: 0.6 + 0.1 (" A"), B: 0.2 ("b"); "Hello" is no label.
    expect(team.choice).toBe('billing');
    expect(team.probabilities.billing).toBeCloseTo(0.7 / 0.9, 9);
    expect(team.probabilities.technical).toBeCloseTo(0.2 / 0.9, 9);
    expect(team.confidence).toBeCloseTo((0.7 / 0.9 - 0.5) / 0.5, 9);
    expect(urgency.score).toBeCloseTo(0.2 + 2 * 0.7, 9);
    // Yes: 0.5 + 0.2 (" yes") + 0.1 ("true"). No lists "No" only; by Yes's split that spelling is
    // 5/8 of a label, so No reads 0.15 / 0.625 = 0.24 (under its cap, 0.15 + 2 × the floor 0.1).
    expect(refund.noul).toBeCloseTo(0.8 / (0.8 + 0.24), 9);
    expect(response.body.data.result.usage).toEqual({ input_tokens: 300, output_tokens: 3 });
    expect(response.body.data.creditsUsed).toBe(0.3);
  });

  it('sends the questions of one request in parallel: all 8 completions are in flight at once', async () => {
    // Each completion is held until 8 are open together (sent one after another, they never would
    // be: the fallback release after 10 s then lets the test fail on the count, not hang).
    let open = 0;
    let most = 0;
    let releaseAll: () => void = () => {};
    const allOpen = new Promise<void>((resolve) => {
      releaseAll = resolve;
    });
    const { send } = await setup(async (_req, res) => {
      open++;
      most = Math.max(most, open);
      if (open === 8) releaseAll();
      await Promise.race([allOpen, sleep(10_000)]);
      open--;
      json(res, 200, completion({ Yes: 0.9, No: 0.1 }));
    });
    const questions = Object.fromEntries(
      Array.from({ length: 8 }, (_, i) => [`q${i}`, { type: 'noul', instructions: `statement ${i}` }]),
    );
    const response = await send({ ...sampleRequest(), questions });
    expect(response.status).toBe(200);
    expect(most).toBe(8);
  });

  it('asks a large choice a few options at a time, ties them through leaders, and logs completion ids', async () => {
    const labels = Array.from({ length: 60 }, (_, i) => `option-${i}`);
    const favourite = 'option-47';
    let n = 0;
    const { standIn, send, gw } = await setup((req, res) => {
      const options = optionsOf(req);
      const letters = Object.keys(options);
      const letter = letters.find((l) => options[l] === favourite);
      // Every offered option is listed; the favourite, where offered, takes most of the mass.
      const top = Object.fromEntries(letters.map((l) => [` ${l}`, l === letter ? 0.5 : 0.05]));
      json(res, 200, { ...completion({ ...top, ' The': 0.2 }), id: `chatcmpl-${++n}` });
    });
    const response = await send({
      ...sampleRequest(),
      questions: { pick: { type: 'choice', criteria: Object.fromEntries(labels.map((l) => [l, null])) } },
    });
    expect(response.status).toBe(200);
    // Groups of 5 (top_logprobs 20), then their 12 leaders in groups of 5, then 3 leaders: 12 + 3 + 1.
    expect(standIn.seen).toHaveLength(plannedCalls(60, groupSizeFor(20)));
    expect(standIn.seen).toHaveLength(16);
    for (const request of standIn.seen) expect(Object.keys(optionsOf(request)).length).toBeLessThanOrEqual(5);
    const answer = response.body.data.result.answers.pick;
    expect(answer.choice).toBe(favourite);
    expect(Object.keys(answer.probabilities)).toEqual(labels);
    // Ratios chain exactly: the favourite is 10× each other option, so it holds 10/69 of the mass.
    expect(answer.probabilities[favourite]).toBeCloseTo(10 / 69, 9);
    expect(answer.probabilities['option-0']).toBeCloseTo(1 / 69, 9);
    expect(response.body.data.result.usage.input_tokens).toBe(1600);
    const line = JSON.parse(
      gw.logs.find((l) => l.includes(response.body.requestId) && l.includes('"request"')) as string,
    );
    expect(line.upstreamRequestId).toMatch(/^chatcmpl-\d+(,chatcmpl-\d+){9},…\(\+6\)$/);
    // The worst fit: a call of four leaders without the favourite, 4 × 0.05 on labels.
    expect(line.labelMass).toBeCloseTo(0.2, 9);
    const metrics = await fetch(`${gw.url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/dg_upstream_label_mass_count\{upstream="openai"\} 1/);
  });

  it('groups options evenly and counts the completions of the base plan', () => {
    expect(groupsOf([1, 2, 3, 4, 5], 2).map((g) => g.length)).toEqual([1, 2, 2]);
    const sizes = groupsOf(
      Array.from({ length: 255 }, (_, i) => i),
      26,
    ).map((g) => g.length);
    expect(sizes).toEqual([25, 26, 25, 26, 25, 26, 25, 26, 25, 26]);
    expect(groupSizeFor(20)).toBe(5);
    expect(groupSizeFor(5)).toBe(2);
    expect(groupSizeFor(100)).toBe(25);
    expect(plannedCalls(5, 5)).toBe(1);
    expect(plannedCalls(255, 5)).toBe(51 + 11 + 3 + 1);
  });

  it("turns a server's own 400 about the prompt (over the context size) into 40001 with its reason", async () => {
    const { send, gw, key } = await setup((_req, res) =>
      json(res, 400, {
        error: {
          code: 400,
          message:
            'request (4724 tokens) exceeds the available context size (2048 tokens), try increasing it',
          type: 'exceed_context_size_error',
        },
      }),
    );
    const response = await send();
    expect(response.status).toBe(400);
    expect(response.body.code).toBe(40001);
    expect(response.body.message).toContain('exceeds the available context size');
    const after = await gw.keys.get(key.id);
    expect(after.ok && after.value.credits).toBe(50);
  });

  it('names the missing feature when the server returns no logprobs', async () => {
    const { send } = await setup((_req, res) =>
      json(res, 200, {
        choices: [{ index: 0, message: { role: 'assistant', content: 'A' } }],
        usage: { prompt_tokens: 5, completion_tokens: 1 },
      }),
    );
    const response = await send();
    expect(response.status).toBe(502);
    expect(response.body.message).toContain('no logprobs');
    expect(response.body.message).toContain('top_logprobs');
  });

  it('refuses a completion without usage, and charges nothing for any failure', async () => {
    const { send, gw, key } = await setup((_req, res) => {
      const body = completion({ A: 1 });
      delete (body as { usage?: unknown }).usage;
      json(res, 200, body);
    });
    const response = await send();
    expect(response.status).toBe(502);
    expect(response.body.message).toContain('usage');
    const after = await gw.keys.get(key.id);
    expect(after.ok && after.value.credits).toBe(50);
  });
});

describe('a vision chat model (`images: true`)', () => {
  it('gets each image as an image_url part (a data URL) after the prompt and the text `Image <ref>:`', async () => {
    const { configuredRoutes } = await import('../../../../test/harness.ts');
    const { makeImage, inlineAsset } = await import('../../../../test/support/images.ts');
    const png = await makeImage('png', 32, 16);
    const standIn = await startStandIn((_req, res) => json(res, 200, completion({ Yes: 0.9, No: 0.1 })));
    const gw = await startGateway({
      routes: configuredRoutes(
        `upstreams:\n  eyes: { kind: openai, baseUrl: "${standIn.url}/v1", model: vision-model, images: true, maxRetries: 0 }\nroutes:\n  default: { upstreams: [eyes] }\n`,
      ),
    });
    cleanups.push(standIn.close, gw.close);
    const key = await gw.createKey();
    const response = await post(
      gw.url,
      '/v1/systemone',
      {
        model: 'vendor/model-1.13',
        state: 'The parcel in p1.',
        questions: { damaged: { type: 'noul', instructions: 'Is the parcel in p1 damaged?' } },
        assets: { p1: inlineAsset('png', png) },
      },
      bearer(key.key),
    );
    expect(response.status).toBe(200);
    expect(response.body.data.result.answers.damaged.noul).toBeGreaterThan(0.5);
    const [text, label, image] = (standIn.seen[0] as SeenRequest).body.messages[1].content;
    expect(text.type).toBe('text');
    expect(text.text).toContain('Is the parcel in p1 damaged?');
    expect(label).toEqual({ type: 'text', text: 'Image p1:' });
    expect(image).toEqual({
      type: 'image_url',
      image_url: { url: `data:image/png;base64,${png.toString('base64')}` },
    });
  });
});
