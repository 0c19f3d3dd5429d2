import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MODEL_ID, type Question } from '@decision-gateway/contract';
import { choiceLabels, type Upstream } from '@decision-gateway/questions';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createSimulatedModel,
  offeredOptions,
  randomWeights,
  startSimulatedServer,
  totalVariation,
  trueDistribution,
} from '../../../../test/simulated-model.ts';
import { loadConfig } from '../../../config/environment.ts';
import { nativeErrorReason } from '../../native-errors.ts';
import { createUpstream } from '../../registry.ts';
import { readLabels } from './label-distribution.ts';
import { NOUL_ALIASES, readCompletion } from './openai-upstream.ts';

// The openai upstream against a simulated server whose true distribution is known, with a real
// server's traits: top_logprobs capped at 20, labels spelled several ways, non-label tokens, and
// about half the next-token mass on the labels. The gateway must recover the model's label
// distribution within 0.03 total variation, and its most likely label.

const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const close of closers) await close();
});

async function ask(question: Question, names: string[], weights: Record<string, number>, seed: number) {
  const model = createSimulatedModel({ weights, seed, cap: 20, labelMass: 0.5 });
  const server = await startSimulatedServer(model);
  const loaded = loadConfig({ UPSTREAM: 'openai', UPSTREAM_BASE_URL: server.url, UPSTREAM_MODEL: 'sim' });
  if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
  const upstream: Upstream = createUpstream(loaded.config.upstream, pino({ level: 'silent' }));
  closers.push(async () => {
    await upstream.close?.();
    await server.close();
  });
  const outcome = await upstream.answer({
    request: { model: MODEL_ID, state: 'The customer wrote in.', questions: { q: question } },
    bodyBytes: 200,
    requestId: 'req_test',
    deadlineAt: Date.now() + 60_000,
  });
  if (!outcome.ok) throw new Error(outcome.detail);
  const answer = (outcome.answers as Record<string, any>).q;
  const truth = trueDistribution(weights, names);
  return { answer, truth, calls: model.calls, outcome };
}

const options = (n: number) => Array.from({ length: n }, (_, i) => `option-${i}`);
const choiceOf = (names: string[]): Question => ({
  type: 'choice',
  criteria: Object.fromEntries(names.map((name) => [name, null])),
});

describe('the openai upstream recovers the label distribution of a capped, noisy server', () => {
  it.each([
    [3, 1],
    [3, 2],
    [26, 1],
    [26, 2],
    [40, 1],
    [40, 2],
    [100, 1],
    [255, 1],
  ])('a choice of %i options (seed %i): within 0.03 total variation, argmax right', async (n, seed) => {
    const names = options(n);
    const weights = randomWeights(names, seed * 131 + n, 1.5);
    const { answer, truth } = await ask(choiceOf(names), names, weights, seed);
    const got = choiceLabels(choiceOf(names) as never).map((name) => answer.probabilities[name] as number);
    expect(totalVariation(truth, got)).toBeLessThan(0.03);
    expect(answer.choice).toBe(names[truth.indexOf(Math.max(...truth))]);
  });

  it('a steep choice of 255 options (a few favourites, a long faint tail)', async () => {
    const names = options(255);
    const weights = randomWeights(names, 7, 2.5);
    const { answer, truth } = await ask(choiceOf(names), names, weights, 7);
    const got = names.map((name) => answer.probabilities[name] as number);
    expect(totalVariation(truth, got)).toBeLessThan(0.03);
    expect(answer.choice).toBe(names[truth.indexOf(Math.max(...truth))]);
  });

  it.each([1, 2, 3])('a score of 10 levels (seed %i)', async (seed) => {
    const levels = Array.from({ length: 10 }, (_, i) => String(i));
    const weights = randomWeights(levels, seed * 17, 1.5);
    const question: Question = { type: 'score', criteria: levels.map((l) => `level ${l}`) };
    const { answer, truth } = await ask(question, levels, weights, seed);
    const got = levels.map((level) => answer.probabilities[level] as number);
    expect(totalVariation(truth, got)).toBeLessThan(0.03);
    expect(Object.keys(answer.probabilities)).toEqual(levels);
    const best = truth.indexOf(Math.max(...truth));
    expect(got.indexOf(Math.max(...got))).toBe(best);
  });

  it.each([
    [0.8, 0.2],
    [0.3, 0.7],
    [0.97, 0.03],
  ])('a noul (yes %f, no %f)', async (yes, no) => {
    const { answer } = await ask(
      { type: 'noul', instructions: 'The customer asks for a refund.' },
      ['Yes', 'No'],
      { Yes: yes, No: no },
      3,
    );
    expect(Math.abs(answer.noul - yes)).toBeLessThan(0.03);
  });

  it('never offers more options in one completion than fit the list with their spellings', async () => {
    const names = options(40);
    const model = createSimulatedModel({ seed: 1 });
    const seen: number[] = [];
    const original = model.complete;
    model.complete = (body) => {
      seen.push(offeredOptions(body.messages[1]?.content ?? '').size);
      return original(body);
    };
    const server = await startSimulatedServer(model);
    const loaded = loadConfig({ UPSTREAM: 'openai', UPSTREAM_BASE_URL: server.url, UPSTREAM_MODEL: 'sim' });
    if (!loaded.ok) throw new Error('config');
    const upstream = createUpstream(loaded.config.upstream, pino({ level: 'silent' }));
    closers.push(async () => {
      await upstream.close?.();
      await server.close();
    });
    await upstream.answer({
      request: { model: MODEL_ID, state: 's', questions: { q: choiceOf(names) } },
      bodyBytes: 10,
      requestId: 'r',
      deadlineAt: Date.now() + 60_000,
    });
    expect(Math.max(...seen)).toBe(5); // top_logprobs 20 / 4 spellings' room each
  });
});

describe('readLabels', () => {
  const top = (entries: Record<string, number>) =>
    Object.entries(entries).map(([token, p]) => ({ token, logprob: Math.log(p) }));

  it('sums the spellings of each label; an unlisted label is unseen, below the floor', () => {
    const reading = readLabels(top({ ' A': 0.3, A: 0.1, ' The': 0.2, ' B': 0.05, '\n': 0.02 }), [
      'A',
      'B',
      'C',
    ]);
    expect(reading.masses[0]).toBeCloseTo(0.4, 12);
    expect(reading.masses[2]).toBeUndefined();
    expect(reading.floor).toBeCloseTo(0.02, 12);
    // B lists " B" only; A's split says " X" is 3/4 of a label: B is completed to 0.05 / 0.75.
    expect(reading.masses[1]).toBeCloseTo(0.05 / 0.75, 12);
    expect(reading.labelMass).toBeCloseTo(0.45, 12);
  });

  it('never completes a label past what its missing spellings can hold (the floor each)', () => {
    const reading = readLabels(top({ ' A': 0.05, A: 0.5, ' B': 0.04, x: 0.03 }), ['A', 'B']);
    // By A's split " B" would be a tenth of B (0.4), but "B" is unlisted, so under the floor 0.03.
    expect(reading.masses[1]).toBeCloseTo(0.04 + 0.03, 12);
  });

  it('reads true/false as the answers of a noul', () => {
    const reading = readLabels(
      top({ Yes: 0.5, true: 0.1, No: 0.2, false: 0.05 }),
      ['Yes', 'No'],
      NOUL_ALIASES,
    );
    expect(reading.masses[0]).toBeCloseTo(0.6, 12);
    expect(reading.masses[1]).toBeCloseTo(0.25, 12);
  });
});

// Copied from the team's shared/fixtures/llama-server (see the README there), so a clone alone runs them.
describe('real llama.cpp server responses (fixtures/llama-server)', () => {
  const dir = join(import.meta.dirname, 'fixtures');
  const exchanges = readdirSync(dir)
    .filter((name) => name.startsWith('exchanges-'))
    .flatMap((name) =>
      readFileSync(join(dir, name), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line, i) => [`${name}:${i + 1}`, JSON.parse(line)] as const),
    );

  it('has exchanges to replay', () => {
    expect(exchanges.length).toBeGreaterThan(20);
  });

  it.each(exchanges)(
    'parses %s: the completion id, usage, and a reading of the offered labels',
    (_, exchange) => {
      const request = JSON.parse(exchange.request);
      const body = JSON.parse(exchange.response);
      if (exchange.status !== 200) {
        // A refusal (e.g. a prompt over the context size): its reason is what the caller is told.
        expect(nativeErrorReason(body)).toBe(body.error.message);
        return;
      }
      const read = readCompletion(body);
      expect(read.ok).toBe(true);
      if (!read.ok) return;
      expect(read.id).toMatch(/^chatcmpl-/);
      expect(read.usage.input_tokens).toBe(body.usage.prompt_tokens);
      expect(read.top).toHaveLength(request.top_logprobs);
      const labels = [...offeredOptions(request.messages[1].content).keys()];
      const reading = readLabels(read.top, labels, labels.includes('Yes') ? NOUL_ALIASES : {});
      const probabilities = read.top.map((entry) => Math.exp(entry.logprob));
      expect(reading.floor).toBeCloseTo(Math.min(...probabilities), 12);
      expect(reading.labelMass).toBeGreaterThan(0);
      expect(reading.labelMass).toBeLessThanOrEqual(probabilities.reduce((a, b) => a + b, 0) + 1e-12);
      // Each seen label's reading is at least what its own listed spellings hold.
      labels.forEach((label, i) => {
        const listed = read.top
          .filter((entry) => entry.token.trim().toLowerCase() === label.toLowerCase())
          .reduce((sum, entry) => sum + Math.exp(entry.logprob), 0);
        if (listed === 0) expect(reading.masses[i]).toBeUndefined();
        else expect(reading.masses[i] as number).toBeGreaterThanOrEqual(listed - 1e-12);
      });
    },
  );

  it.each(['spm-top20.json', 'bpe-top20.json', 'spm-top100.json', 'spm-nprobs5.json'])(
    'parses %s',
    (name) => {
      const body = JSON.parse(readFileSync(join(dir, name), 'utf8'));
      const read = readCompletion(body);
      expect(read.ok).toBe(true);
      if (!read.ok) return;
      expect(read.id).toBe(body.id);
      expect(read.top.length).toBe(body.choices[0].logprobs.content[0].top_logprobs.length);
      const reading = readLabels(read.top, ['A', 'B', 'C']);
      expect(reading.masses.some((mass) => mass !== undefined)).toBe(true);
    },
  );
});
