import {
  type DecisionImage,
  failure,
  type GatewayFailure,
  isPlainObject,
  mimeTypeOf,
  type Question,
  type State,
  type Usage,
} from '@decision-gateway/contract';
import {
  answerFromWeights,
  CHOICE_LABELS,
  type ImageCapabilities,
  optionCount,
  renderQuestion,
  type Upstream,
  type UpstreamCall,
  type UpstreamOutcome,
} from '@decision-gateway/questions';
import { Base64Text } from '../../json-body.ts';
import type { UpstreamHttp } from '../../upstream-http.ts';
import {
  type Ask,
  estimateWeights,
  plannedCalls,
  readLabels,
  type TopLogprob,
} from './label-distribution.ts';

/** Noul reads yes/no, and true/false as the same answers. */
export const NOUL_ALIASES: Record<string, readonly string[]> = { Yes: ['true'], No: ['false'] };

const addUsage = (a: Usage, b: Usage): Usage => ({
  input_tokens: a.input_tokens + b.input_tokens,
  output_tokens: a.output_tokens + b.output_tokens,
});

/** A failed completion ends its whole question (and so the request). */
class CompletionFailed extends Error {
  constructor(
    readonly failure: GatewayFailure,
    readonly detail: string,
    readonly unwell = false,
  ) {
    super(detail);
  }
}

/** Options per completion: few enough that every spelling of every offered label fits the list. */
export function groupSizeFor(topLogprobs: number): number {
  return Math.min(CHOICE_LABELS.length, Math.max(2, Math.floor(topLogprobs / 4)));
}

/** Completions a question takes at most: the base plan, plus as many again for unseen labels. */
export function maxCalls(question: Question, groupSize: number): number {
  return question.type === 'noul' ? 1 : 2 * plannedCalls(optionCount(question), groupSize);
}

/**
 * Any OpenAI-compatible chat-completions server that returns logprobs (docs/upstreams.md). Each completion
 * is one token at temperature 0 with `top_logprobs`; `label-distribution.ts` decides which options
 * each completion offers and reads the distribution off the label tokens. Completions go out in
 * parallel wherever they do not wait on each other; usage is summed over all of them.
 */
export function createOpenAiUpstream(
  http: UpstreamHttp,
  options: { name: string; model: string; topLogprobs: number; capabilities: ImageCapabilities },
): Upstream {
  const groupSize = groupSizeFor(options.topLogprobs);

  /** What a request's completions add up to: usage, their ids, the worst label mass. */
  interface Tally {
    usage: Usage;
    ids: string[];
    labelMass: number;
  }

  async function answerOne(state: State, question: Question, call: UpstreamCall, tally: Tally) {
    const aliases = question.type === 'noul' ? NOUL_ALIASES : {};
    const ask: Ask = async (subset) => {
      const prompt = renderQuestion(state, question, question.type === 'noul' ? undefined : subset);
      const sent = await http.postJson(
        '/chat/completions',
        {
          model: options.model,
          messages: [
            { role: 'system', content: prompt.system },
            { role: 'user', content: userContent(prompt.user, call.images) },
          ],
          max_tokens: 1,
          temperature: 0,
          logprobs: true,
          top_logprobs: options.topLogprobs,
        },
        // One completion asks about one question.
        { requestId: call.requestId, deadlineAt: call.deadlineAt, trace: call.trace, questions: 1 },
      );
      if (!sent.ok) throw new CompletionFailed(sent.failure, sent.detail, sent.unwell);
      const read = readCompletion(sent.body);
      if (!read.ok) throw new CompletionFailed(failure('upstream_error', read.reason), read.reason);
      const reading = readLabels(read.top, prompt.labels, aliases);
      tally.usage = addUsage(tally.usage, read.usage);
      if (read.id !== undefined) tally.ids.push(read.id);
      tally.labelMass = Math.min(tally.labelMass, reading.labelMass);
      return reading;
    };
    const count = optionCount(question);
    const extraCalls = maxCalls(question, groupSize) - plannedCalls(count, groupSize);
    return answerFromWeights(question, await estimateWeights(count, ask, { groupSize, extraCalls }));
  }

  return {
    name: options.name,
    capabilities: options.capabilities,
    usageBound(request, bodyBytes, imageTokens = 0) {
      // Every completion carries the whole state, images too; one output token each.
      let calls = 0;
      for (const question of Object.values(request.questions)) calls += maxCalls(question, groupSize);
      return { input_tokens: calls * (bodyBytes + 256 + imageTokens), output_tokens: calls };
    },
    async answer(call): Promise<UpstreamOutcome> {
      const tally: Tally = { usage: { input_tokens: 0, output_tokens: 0 }, ids: [], labelMass: 1 };
      const entries = Object.entries(call.request.questions);
      try {
        const answers = await Promise.all(
          entries.map(([, question]) => answerOne(call.request.state, question, call, tally)),
        );
        return {
          ok: true,
          answers: Object.fromEntries(entries.map(([id], i) => [id, answers[i]])),
          usage: tally.usage,
          labelMass: tally.labelMass,
          ...(tally.ids.length > 0 && { upstreamRequestId: requestIds(tally.ids) }),
        };
      } catch (error) {
        if (error instanceof CompletionFailed)
          return { ok: false, failure: error.failure, detail: error.detail, unwell: error.unwell };
        throw error;
      }
    },
    close: http.close,
  };
}

/** The completion ids for the log line: all of them, up to ten. */
function requestIds(ids: readonly string[]): string {
  return ids.length <= 10 ? ids.join(',') : `${ids.slice(0, 10).join(',')},…(+${ids.length - 10})`;
}

type Completion =
  | { ok: true; top: TopLogprob[]; usage: Usage; id: string | undefined }
  | { ok: false; reason: string };

/** `choices[0].logprobs.content[0].top_logprobs`, `usage` and the completion `id` of a chat completion. */
export function readCompletion(body: unknown): Completion {
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
    id: typeof body.id === 'string' && body.id !== '' ? body.id : undefined,
    top: entries,
    usage: { input_tokens: usage.prompt_tokens as number, output_tokens: usage.completion_tokens as number },
  };
}

/**
 * The user message: its prompt as text, or for a vision model with images (docs/images.md) the
 * prompt then each image as an `image_url` part (a data URL) after the text `Image <ref>:`.
 */
function userContent(prompt: string, images: readonly DecisionImage[] | undefined): unknown {
  if (images === undefined || images.length === 0) return prompt;
  const parts: unknown[] = [{ type: 'text', text: prompt }];
  for (const image of images) {
    if (image.source !== 'bytes') continue;
    parts.push({ type: 'text', text: `Image ${image.ref}:` });
    parts.push({
      type: 'image_url',
      image_url: {
        url: new Base64Text(image.base64, `data:${mimeTypeOf(image.format)};base64,`),
        ...(image.detail === 'low' || image.detail === 'high' || image.detail === 'auto'
          ? { detail: image.detail }
          : {}),
      },
    });
  }
  return parts;
}
