import {
  type ChoiceQuestion,
  failure,
  type GatewayFailure,
  isPlainObject,
  type Question,
  type State,
  type Usage,
} from '@decision-gateway/contract';
import {
  answerFromWeights,
  argmax,
  CHOICE_LABELS,
  choiceLabels,
  groupsOf,
  normalize,
  renderQuestion,
  type Upstream,
  type UpstreamCall,
  type UpstreamOutcome,
} from '@decision-gateway/questions';
import { labelWeights, NOUL_ALIASES, type TopLogprob } from './logprobs.ts';
import type { createUpstreamHttp } from './upstream-http.ts';

type UpstreamHttp = ReturnType<typeof createUpstreamHttp>;
type Step<T> = { ok: true; value: T; usage: Usage } | { ok: false; failure: GatewayFailure; detail: string };

const addUsage = (a: Usage, b: Usage): Usage => ({
  input_tokens: a.input_tokens + b.input_tokens,
  output_tokens: a.output_tokens + b.output_tokens,
});
const NO_USAGE: Usage = { input_tokens: 0, output_tokens: 0 };

/** How many completions a choice of `n` options takes with groups of at most `size`. */
export function tournamentCalls(n: number, size: number): number {
  if (n <= size) return 1;
  const groups = Math.ceil(n / size);
  return groups + tournamentCalls(groups, size);
}

/**
 * Any OpenAI-compatible chat-completions server that returns logprobs (SPEC §8). Each question is
 * one completion of one token at temperature 0 with `top_logprobs`; the distribution is read off
 * the label tokens. Questions (and tournament groups) go out in parallel; usage is summed.
 *
 * Choices with more options than fit one prompt (`groupSize` = min(26 letters, top_logprobs)) are
 * played as a tournament: the options are split into groups, each group is asked on its own, the
 * group winners meet in a final (recursively, if there are many groups), and an option's
 * probability is P(its group's winner wins the final) × P(it wins its group).
 */
export function createOpenAiUpstream(
  http: UpstreamHttp,
  options: { model: string; topLogprobs: number },
): Upstream {
  const groupSize = Math.min(CHOICE_LABELS.length, options.topLogprobs);

  async function complete(
    state: State,
    question: Question,
    call: UpstreamCall,
    subset?: readonly string[],
  ): Promise<Step<number[]>> {
    const prompt = renderQuestion(state, question, subset);
    const sent = await http.postJson(
      '/chat/completions',
      {
        model: options.model,
        messages: [
          { role: 'system', content: prompt.system },
          { role: 'user', content: prompt.user },
        ],
        max_tokens: 1,
        temperature: 0,
        logprobs: true,
        top_logprobs: options.topLogprobs,
      },
      { requestId: call.requestId, deadlineAt: call.deadlineAt },
    );
    if (!sent.ok) return sent;
    const read = readCompletion(sent.body);
    if (!read.ok) return { ok: false, failure: failure('upstream_error', read.reason), detail: read.reason };
    const weights = labelWeights(read.top, prompt.labels, question.type === 'noul' ? NOUL_ALIASES : {});
    return { ok: true, value: normalize(weights), usage: read.usage };
  }

  /** A distribution over `labels` (option names of `question`), by tournament when needed. */
  async function choose(
    state: State,
    question: ChoiceQuestion,
    labels: readonly string[],
    call: UpstreamCall,
  ): Promise<Step<number[]>> {
    if (labels.length <= groupSize) return complete(state, question, call, labels);
    const groups = groupsOf(labels, groupSize);
    const rounds = await Promise.all(groups.map((group) => choose(state, question, group, call)));
    const failed = rounds.find((round) => !round.ok);
    if (failed && !failed.ok) return failed;
    const within = rounds.map((round) => (round as { value: number[] }).value);
    const winners = groups.map((group, g) => group[argmax(within[g] as number[])] as string);
    const final = await choose(state, question, winners, call);
    if (!final.ok) return final;
    const usage = rounds.reduce(
      (sum, round) => addUsage(sum, (round as { usage: Usage }).usage),
      final.usage,
    );
    const value = groups.flatMap((group, g) =>
      group.map((_, i) => (final.value[g] as number) * ((within[g] as number[])[i] as number)),
    );
    return { ok: true, value, usage };
  }

  async function answerOne(state: State, question: Question, call: UpstreamCall): Promise<Step<number[]>> {
    return question.type === 'choice'
      ? choose(state, question, choiceLabels(question), call)
      : complete(state, question, call);
  }

  return {
    name: 'openai',
    usageBound(request, bodyBytes) {
      // Every completion carries the whole state; one output token each.
      let calls = 0;
      for (const question of Object.values(request.questions)) {
        calls += question.type === 'choice' ? tournamentCalls(choiceLabels(question).length, groupSize) : 1;
      }
      return { input_tokens: calls * (bodyBytes + 256), output_tokens: calls };
    },
    async answer(call): Promise<UpstreamOutcome> {
      const entries = Object.entries(call.request.questions);
      const steps = await Promise.all(
        entries.map(([, question]) => answerOne(call.request.state, question, call)),
      );
      let usage = NO_USAGE;
      const answers: [string, unknown][] = [];
      for (const [i, step] of steps.entries()) {
        if (!step.ok) return { ok: false, failure: step.failure, detail: step.detail };
        usage = addUsage(usage, step.usage);
        const [id, question] = entries[i] as [string, Question];
        answers.push([id, answerFromWeights(question, step.value)]);
      }
      return { ok: true, answers: Object.fromEntries(answers), usage };
    },
    close: http.close,
  };
}

type Completion = { ok: true; top: TopLogprob[]; usage: Usage } | { ok: false; reason: string };

/** `choices[0].logprobs.content[0].top_logprobs` and `usage` of a chat completion. */
function readCompletion(body: unknown): Completion {
  if (!isPlainObject(body) || !Array.isArray(body.choices) || !isPlainObject(body.choices[0])) {
    return { ok: false, reason: 'the upstream returned an invalid answer: no choices in the completion' };
  }
  const logprobs = body.choices[0].logprobs;
  const first = isPlainObject(logprobs) && Array.isArray(logprobs.content) ? logprobs.content[0] : undefined;
  const top = isPlainObject(first) ? first.top_logprobs : undefined;
  if (!Array.isArray(top) || top.length === 0) {
    return {
      ok: false,
      reason:
        'the upstream returned no logprobs: the OpenAI-compatible server must support "logprobs" and "top_logprobs" on chat completions',
    };
  }
  const entries = top.filter(
    (entry): entry is TopLogprob =>
      isPlainObject(entry) && typeof entry.token === 'string' && typeof entry.logprob === 'number',
  );
  const usage = body.usage;
  if (
    !isPlainObject(usage) ||
    !Number.isInteger(usage.prompt_tokens) ||
    !Number.isInteger(usage.completion_tokens) ||
    (usage.prompt_tokens as number) < 0 ||
    (usage.completion_tokens as number) < 0
  ) {
    return { ok: false, reason: 'the upstream returned an invalid answer: usage is missing or malformed' };
  }
  return {
    ok: true,
    top: entries,
    usage: { input_tokens: usage.prompt_tokens as number, output_tokens: usage.completion_tokens as number },
  };
}
