import type { Answer, EvaluationRequest, Question, State, Usage } from '@decision-gateway/contract';
import { answerFromWeights, choiceLabels } from '../answers.ts';
import { softmax } from '../distribution.ts';
import { renderContent, renderState, renderWhole } from '../render.ts';
import { countTokens } from '../tokens.ts';
import type { Upstream, UpstreamCall, UpstreamOutcome } from '../upstream.ts';
import { bm25Scores } from './bm25.ts';
import { terms } from './terms.ts';

/** Softmax temperature over BM25 scores: one distinctive shared term gives about 4:1 odds. */
export const TEMPERATURE = 0.5;
/**
 * A statement needs evidence: with no overlap at all a noul leans to "false" (≈ 0.38), and one
 * distinctive term shared with the state tips it above 0.5.
 */
export const NOUL_EVIDENCE_BIAS = 0.25;

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
  switch (question.type) {
    case 'choice': {
      const documents = choiceLabels(question).map((label) =>
        terms(`${label}\n${renderContent(question.criteria[label])}`),
      );
      return answerFromWeights(question, softmax(bm25Scores(query, documents), TEMPERATURE));
    }
    case 'score': {
      const documents = question.criteria.map((level) => terms(renderContent(level)));
      return answerFromWeights(question, softmax(bm25Scores(query, documents), TEMPERATURE));
    }
    case 'noul': {
      // The statement itself describes "true"; the state is what it is tested against.
      const criteria = question.criteria ?? {};
      const trueSide = terms(`${renderContent(question.instructions)}\n${renderContent(criteria.true)}`);
      const falseSide = terms(renderContent(criteria.false));
      const [forTrue = 0, forFalse = 0] = bm25Scores(query, [trueSide, falseSide]);
      return answerFromWeights(question, softmax([forTrue - NOUL_EVIDENCE_BIAS, forFalse], TEMPERATURE));
    }
  }
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
