import { setOwn, type Usage } from '@decision-gateway/contract';
import {
  checkUsage,
  MAX_TOKEN_COUNT,
  type Upstream,
  type UpstreamCall,
  type UpstreamOutcome,
} from '@decision-gateway/questions';
import { invalidAnswer } from './invalid-answer.ts';

/**
 * Asks `upstream` a request with more questions than one of its calls takes (docs/upstreams.md#groups):
 * in the fewest groups of at most `maxQuestions` consecutive questions (20 at 8 → 8, 8, 4), all
 * at once, each with the whole state. The attempt succeeds only if every group does; its answers
 * are the groups' together and its usage their sum.
 */
export function askInGroups(upstream: Upstream, call: UpstreamCall): Promise<UpstreamOutcome> {
  // Not async: a request within one call, the common case, pays no promise layer of its own.
  const size = upstream.maxQuestions;
  if (size === undefined) return upstream.answer(call);
  const ids = Object.keys(call.request.questions);
  return ids.length <= size ? upstream.answer(call) : inGroups(upstream, call, ids, size);
}

async function inGroups(
  upstream: Upstream,
  call: UpstreamCall,
  ids: string[],
  size: number,
): Promise<UpstreamOutcome> {
  const groups: UpstreamCall[] = [];
  for (let start = 0; start < ids.length; start += size) {
    const questions = Object.fromEntries(
      ids.slice(start, start + size).map((id) => [id, call.request.questions[id]]),
    ) as UpstreamCall['request']['questions'];
    groups.push({ ...call, request: { ...call.request, questions } });
  }
  const outcomes = await Promise.all(groups.map((group) => upstream.answer(group)));
  const answers: Record<string, unknown> = {};
  let usage: Usage = { input_tokens: 0, output_tokens: 0 };
  let labelMass: number | undefined;
  let blocked: Record<string, unknown> | undefined;
  for (const [i, outcome] of outcomes.entries()) {
    if (!outcome.ok) return outcome;
    const counted = checkUsage(outcome.usage);
    if (!counted.ok) {
      const reason = `group ${i + 1} of ${groups.length}: ${counted.reason}`;
      return invalidAnswer(reason);
    }
    usage = {
      input_tokens: Math.min(MAX_TOKEN_COUNT, usage.input_tokens + counted.value.input_tokens),
      output_tokens: Math.min(MAX_TOKEN_COUNT, usage.output_tokens + counted.value.output_tokens),
    };
    const raw = outcome.answers;
    if (typeof raw === 'object' && raw !== null) {
      // Only the group's own questions, each as an own property ("__proto__" included).
      for (const id of Object.keys(groups[i]?.request.questions ?? {}))
        if (Object.hasOwn(raw, id)) setOwn(answers, id, (raw as Record<string, unknown>)[id]);
    }
    if (outcome.labelMass !== undefined) labelMass = Math.min(labelMass ?? 1, outcome.labelMass);
    blocked ??= outcome.blocked;
  }
  const first = outcomes[0] as Extract<UpstreamOutcome, { ok: true }>;
  return {
    ok: true,
    answers,
    usage,
    ...(first.upstreamRequestId !== undefined && { upstreamRequestId: first.upstreamRequestId }),
    ...(labelMass !== undefined && { labelMass }),
    ...(blocked !== undefined && { blocked }),
  };
}
