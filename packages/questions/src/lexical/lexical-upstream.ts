import type { Answer, EvaluationRequest, Question, State, Usage } from '@decision-gateway/contract';
import { softmax } from '../distribution.ts';
import { renderState } from '../prompt.ts';
import { behaviourOf } from '../question-types/index.ts';
import { renderWhole } from '../render.ts';
import { countTokens } from '../tokens.ts';
import type { Upstream, UpstreamCall, UpstreamOutcome } from '../upstream.ts';
import { terms } from './terms.ts';

export { NOUL_EVIDENCE_BIAS } from '../question-types/index.ts';

/** Softmax temperature over BM25 scores: one distinctive shared term gives about 4:1 odds. */
export const TEMPERATURE = 0.5;
/**
 * The built-in upstream: a lexical relevance baseline, NOT a language model. It ranks options by
 * BM25 relevance between the state and each option's label and description,
 * turns scores into a distribution with a fixed-temperature softmax, and counts input tokens with
 * a real tokenizer (o200k_base) over the text it reads. Offline, deterministic, output tokens 0.
 */
export function answerLexically(state: State, question: Question): Answer {
  // The state is the evidence. Instructions say what to decide, not what is true: words they
  // share with one option ("How urgent?" vs "not urgent") must not tip the answer.
  const query = terms(renderState(state));
  const behaviour = behaviourOf(question);
  return behaviour.fromWeights(question, softmax(behaviour.lexicalScores(query, question), TEMPERATURE));
}

/**
 * Input tokens of what the baseline reads: the state once, plus each question as a language model
 * would see it without the state, every option shown once (a choice of more than 26 options in
 * groups of at most 26, since a prompt labels options A–Z).
 */
export function lexicalUsage(request: EvaluationRequest): Usage {
  let input = countTokens(renderState(request.state));
  for (const question of Object.values(request.questions)) {
    for (const { system, user } of renderWhole('', question))
      input += countTokens(system) + countTokens(user);
  }
  return { input_tokens: input, output_tokens: 0 };
}

export function createLexicalUpstream(): Upstream {
  // usageBound and answer see the same request object; count its tokens once.
  const counted = new WeakMap<EvaluationRequest, Usage>();
  const usageOf = (request: EvaluationRequest) => {
    let usage = counted.get(request);
    if (usage === undefined) {
      usage = lexicalUsage(request);
      counted.set(request, usage);
    }
    return usage;
  };
  return {
    name: 'lexical',
    kind: 'lexical',
    usageBound: (request) => usageOf(request),
    async answer({ request }: UpstreamCall): Promise<UpstreamOutcome> {
      const answers = Object.fromEntries(
        Object.entries(request.questions).map(([id, question]) => [
          id,
          answerLexically(request.state, question),
        ]),
      );
      return { ok: true, answers, usage: usageOf(request) };
    },
  };
}
