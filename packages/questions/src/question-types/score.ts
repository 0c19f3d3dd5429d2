import type { ScoreAnswer, ScoreQuestion } from '@decision-gateway/contract';
import {
  argmax,
  expectedScore,
  keyed,
  levelNames,
  normalize,
  probability,
  scoreConfidence,
} from '../distribution.ts';
import { checkConfidence, checkDistribution, fail } from '../distribution-checks.ts';
import { bm25Scores } from '../lexical/bm25.ts';
import { terms } from '../lexical/terms.ts';
import { instructionsBlock, renderContent, SYSTEM_PROMPT } from '../prompt.ts';
import type { QuestionBehaviour } from './behaviour.ts';
import { scoreOneOf } from './one-of-options.ts';

/** `{"0": description of level 0, …}` as sent. */
export function scoreLegend(question: ScoreQuestion): ScoreAnswer['legend'] {
  return keyed(levelNames(question.criteria.length), question.criteria);
}

/** A score answer from one weight per level (lowest level first); the weights are renormalised. */
export function scoreFromWeights(question: ScoreQuestion, weights: readonly number[]): ScoreAnswer {
  const p = normalize(weights);
  return {
    type: 'score',
    score: expectedScore(p),
    confidence: scoreConfidence(p),
    legend: scoreLegend(question),
    probabilities: keyed(levelNames(p.length), p),
  };
}

export const score: QuestionBehaviour<'score'> = {
  optionCount: (question) => question.criteria.length,

  render(stateText, question, offered) {
    const labels = offered.map(String);
    const lines = offered.map((level) => {
      const text = renderContent(question.criteria[level]);
      return text === '' ? `${level}.` : `${level}. ${text}`;
    });
    const whole = offered.length === question.criteria.length;
    const user = [
      stateText,
      instructionsBlock(question.instructions, 'Which level fits the state best?'),
      `# Levels (lowest first)\n${lines.join('\n')}`,
      whole
        ? `Answer with the level number (0–${question.criteria.length - 1}) only.`
        : `Answer with one of the level numbers ${labels.join(', ')} only.`,
    ].join('\n\n');
    return { system: SYSTEM_PROMPT, user, labels };
  },

  fromWeights: scoreFromWeights,

  check(question, raw, tolerance) {
    const n = question.criteria.length;
    const levels = levelNames(n);
    const p = checkDistribution(raw.probabilities, levels, 'level', tolerance);
    if (!p.ok) return p;
    if (typeof raw.score !== 'number' || !(raw.score >= 0 && raw.score <= n - 1)) {
      return fail(`.score: ${JSON.stringify(raw.score)} is not in [0, ${n - 1}]`);
    }
    const confidence = checkConfidence(raw.confidence, () => scoreConfidence(p.value));
    if (!confidence.ok) return confidence;
    return {
      ok: true,
      value: {
        type: 'score',
        score: raw.score,
        confidence: confidence.value,
        legend: scoreLegend(question),
        probabilities: keyed(levels, p.value),
      },
    };
  },

  lexicalScores: (query, question) =>
    bm25Scores(
      query,
      question.criteria.map((level) => terms(renderContent(level))),
    ),

  unsureBy: 'confidence',
  // Plain ASCII, "0 to 2" rather than "0–2": one character beyond Latin-1 makes the MCP door's
  // whole answer, decision and all, a two-byte string to write out and encode.
  summarize: (answer) => {
    const levels = Object.values(answer.probabilities);
    const likeliest = argmax(levels);
    return `${answer.score.toFixed(2)} on 0 to ${levels.length - 1} (likeliest ${likeliest}, p=${probability(levels[likeliest] ?? 0)})`;
  },

  unsure: (answer, rule) => rule.confidenceBelow !== undefined && answer.confidence < rule.confidenceBelow,

  keepQuestion: () => ({}),

  keep: (question, answer) => ({
    p: question.criteria.map((_, i) => answer.probabilities[String(i)] ?? 0),
    confidence: answer.confidence,
    score: answer.score,
  }),

  judge(kept, truth) {
    const levels = (kept.p as number[]).length;
    return Number.isInteger(truth) && (truth as number) >= 0 && (truth as number) < levels
      ? { ok: true, judged: { type: 'score', index: truth as number } }
      : { ok: false, reason: `the truth of this score is a level index from 0 to ${levels - 1}` };
  },

  score(kept, truth) {
    const scored = scoreOneOf(kept.p as number[], truth);
    const index = truth.type === 'score' ? truth.index : 0;
    return { ...scored, absError: Math.abs((kept.score ?? 0) - index) };
  },
};
