import type { QuestionType, Truth } from '@decision-gateway/contract';
import type { KeptAnswer } from '@decision-gateway/questions';
import type { JudgedDecision } from '../store/store.ts';
import type { JudgedAnswer } from './calibration.ts';
import { judgeTruth, readKept } from './decision-record.ts';

/**
 * Each truth of each decision, judged against the answers it judges (docs/outcomes.md): an escalated
 * question counts its first answer for the first upstream and its final one for `escalate.to`.
 * `calibrated` reads the answers as a calibrated route gave them (docs/calibration-maps.md); the
 * default, the raw ones, is what calibration and the fits measure.
 */
export function judgedAnswers(
  decisions: readonly JudgedDecision[],
  options: { type?: QuestionType; calibrated?: boolean } = {},
): JudgedAnswer[] {
  const answers: JudgedAnswer[] = [];
  const as = (answer: KeptAnswer): KeptAnswer =>
    options.calibrated && answer.calibrated ? { ...answer.calibrated, upstream: answer.upstream } : answer;
  for (const decision of decisions) {
    const questions = readKept(decision.questions).questions;
    for (const questionId of Object.keys(decision.outcomes)) {
      const question = Object.hasOwn(questions, questionId) ? questions[questionId] : undefined;
      if (question === undefined) continue;
      if (options.type !== undefined && question.type !== options.type) continue;
      const verdict = judgeTruth(question, JSON.parse(decision.outcomes[questionId] as string) as Truth);
      if (!verdict.ok) continue;
      const reviewed = decision.reviewed.includes(questionId);
      for (const answer of question.first ? [question.first, question] : [question])
        answers.push({
          route: decision.route,
          upstream: answer.upstream,
          type: question.type,
          answer: as(answer),
          truth: verdict.judged,
          at: decision.at,
          ...(reviewed && { reviewed }),
        });
    }
  }
  return answers;
}
