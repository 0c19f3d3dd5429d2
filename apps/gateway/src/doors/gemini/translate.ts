import {
  type Answer,
  type EvaluationRequest,
  failure,
  type GatewayFailure,
  GEMINI_LIMITS,
  GEMINI_MODEL_NAMES,
  GEMINI_STATUS,
  GEMINI_UNSUPPORTED_CONTENT,
  type GeminiAnswer,
  type GeminiAsWritten,
  GeminiDecisionRequest,
  type GeminiInputContent,
  type GeminiInstructions,
  type GeminiQuestion,
  type GeminiUsage,
  type ImageFormat,
  type Issue,
  isPlainObject,
  LIMITS,
  MODEL_ID,
  nestingDepth,
  type Parsed,
  parseWorded,
  SCORE_LIMITS,
  setOwn,
  summarizeIssues,
  toIssues,
  type UsageDetails,
} from '@decision-gateway/contract';
import type { Translated } from '../../core/evaluation/index.ts';
import type { ImageSource } from '../../images/decision-images.ts';

/**
 * The Gemini door's translation (docs/gemini.md): Google's request → the gateway's, and the
 * gateway's answers, usage and failures → Google's. This gateway takes text, JSON and images:
 * audio, video and documents are refused with their path.
 */

const TEXT_JSON_IMAGES =
  'this gateway takes text, JSON and images: audio, video and documents are not accepted';

/**
 * The body of `POST /gemini/{v1beta,v1}/decisions` → the decision, or the gateway error of the first
 * rule broken in the order of docs/http-api.md#errors: 40002 (no question, or more than 1000) →
 * 40003 (another model) → 40001 (every other rule, each issue with its path).
 */
export function parseGeminiDecisionRequest(body: unknown): Parsed<Translated<GeminiAsWritten>> {
  if (!isPlainObject(body)) return invalid([{ path: [], message: 'the body must be a JSON object' }]);
  const { questions, model } = body;
  if (isPlainObject(questions)) {
    const count = Object.keys(questions).length;
    if (count < GEMINI_LIMITS.minQuestions || count > GEMINI_LIMITS.maxQuestions)
      return {
        ok: false,
        error: failure(
          'invalid_question_count',
          `questions: ${count} questions sent; a request takes ${GEMINI_LIMITS.minQuestions} to ${GEMINI_LIMITS.maxQuestions}`,
          {
            issues: [
              {
                path: ['questions'],
                message: `has ${count} entries; ${GEMINI_LIMITS.minQuestions} to ${GEMINI_LIMITS.maxQuestions} are accepted`,
              },
            ],
          },
        ),
      };
  }
  if (typeof model === 'string' && !GEMINI_MODEL_NAMES.includes(model))
    return {
      ok: false,
      error: failure(
        'unknown_model',
        `model: unknown model "${model.slice(0, 64)}"; this gateway serves "${MODEL_ID}"`,
        { issues: [{ path: ['model'], message: `must be "${MODEL_ID}" or "models/${MODEL_ID}"` }] },
      ),
    };
  if (nestingDepth(body, LIMITS.maxDepth) > LIMITS.maxDepth)
    return invalid([{ path: [], message: `the body nests deeper than ${LIMITS.maxDepth} levels` }]);
  const unsupported = unsupportedContents(body.input);
  if (unsupported.length > 0) return invalid(unsupported);
  const parsed = parseWorded(GeminiDecisionRequest, body);
  if (!parsed.success) return invalid(toIssues(parsed.error.issues));
  const request = parsed.data;
  const images = imagesOf(request.input);
  const issues = [...tooManyLevels(request.questions), ...images.issues];
  if (issues.length > 0) return invalid(issues);
  return { ok: true, value: toGatewayRequest(request, images.sources) };
}

/** Audio, video and document contents, wherever they stand in the input: refused by name. */
function unsupportedContents(input: unknown): Issue[] {
  const contents = Array.isArray(input) ? input : [input];
  const issues: Issue[] = [];
  contents.forEach((content, i) => {
    if (isPlainObject(content) && (GEMINI_UNSUPPORTED_CONTENT as readonly unknown[]).includes(content.type))
      issues.push({ path: Array.isArray(input) ? ['input', i] : ['input'], message: TEXT_JSON_IMAGES });
  });
  return issues;
}

/** Google takes up to 255 levels; this gateway's scores have at most 10. */
function tooManyLevels(questions: Readonly<Record<string, GeminiQuestion>>): Issue[] {
  const issues: Issue[] = [];
  for (const id of Object.keys(questions)) {
    const question = questions[id] as GeminiQuestion;
    if (question.type === 'score' && question.criteria.length > SCORE_LIMITS.levels.max)
      issues.push({
        path: ['questions', id, 'criteria'],
        message: `has ${question.criteria.length} levels: this gateway's scores have at most ${SCORE_LIMITS.levels.max} levels`,
      });
  }
  return issues;
}

const MIME_FORMATS: Readonly<Record<string, ImageFormat>> = {
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'image/webp': 'webp',
};

const contentsOf = (input: GeminiDecisionRequest['input']): GeminiInputContent[] | undefined =>
  typeof input === 'string' ? undefined : Array.isArray(input) ? input : [input];

/**
 * Every image content of the input, in order, named `image-<i>` (docs/images.md#names): bytes with
 * a PNG, JPEG or WebP `mime_type`, or a `uri`; more than 128, both or neither, is refused at its path.
 */
function imagesOf(input: GeminiDecisionRequest['input']): { sources: ImageSource[]; issues: Issue[] } {
  const sources: ImageSource[] = [];
  const issues: Issue[] = [];
  const contents = contentsOf(input) ?? [];
  contents.forEach((content, i) => {
    if (content.type !== 'image') return;
    const path = Array.isArray(input) ? ['input', i] : ['input'];
    const ref = `image-${sources.length}`;
    if (sources.length === GEMINI_LIMITS.maxImages)
      issues.push({ path, message: `a request takes at most ${GEMINI_LIMITS.maxImages} images` });
    if ((content.data === undefined) === (content.uri === undefined)) {
      issues.push({ path, message: 'an image content needs either data (base64) or a uri' });
      return;
    }
    if (content.uri !== undefined) {
      sources.push({ ref, path: [...path, 'uri'], url: content.uri });
      return;
    }
    const declared = content.mime_type === undefined ? undefined : MIME_FORMATS[content.mime_type];
    if (content.mime_type !== undefined && declared === undefined)
      issues.push({
        path: [...path, 'mime_type'],
        message: 'must be image/png, image/jpeg or image/webp: this gateway takes those images',
      });
    sources.push({ ref, path: [...path, 'data'], base64: content.data as string, declared });
  });
  return { sources, issues };
}

/** Text contents' texts joined by a blank line; a string as it is. */
function instructionsText(instructions: GeminiInstructions): string {
  if (typeof instructions === 'string') return instructions;
  return (Array.isArray(instructions) ? instructions : [instructions]).map((c) => c.text).join('\n\n');
}

/** The input as the gateway's state (docs/gemini.md#for-other-kinds-of-upstream): images by their names. */
function stateOf(input: GeminiDecisionRequest['input']): string {
  const contents = contentsOf(input);
  if (contents === undefined) return input as string;
  let image = 0;
  return contents.map((c) => (c.type === 'text' ? c.text : `[image-${image++}]`)).join('\n\n');
}

/** One of Google's questions as the gateway's own. */
function questionOf(question: GeminiQuestion): Record<string, unknown> {
  const instructions = instructionsText(question.instructions);
  switch (question.type) {
    case 'noul': {
      const given = question.criteria ?? {};
      const criteria = {
        ...(given.true_description !== undefined && { true: given.true_description }),
        ...(given.false_description !== undefined && { false: given.false_description }),
      };
      return { type: 'noul', instructions, ...(Object.keys(criteria).length > 0 && { criteria }) };
    }
    case 'choice':
      return { type: 'choice', instructions, criteria: question.criteria };
    case 'score':
      return { type: 'score', instructions, criteria: question.criteria };
  }
}

function toGatewayRequest(body: GeminiDecisionRequest, images: ImageSource[]): Translated<GeminiAsWritten> {
  const questions: Record<string, unknown> = {};
  // An ID such as `__proto__` is data here, as in the caller's JSON.
  for (const id of Object.keys(body.questions))
    setOwn(questions, id, questionOf(body.questions[id] as GeminiQuestion));
  const request = { model: MODEL_ID, state: stateOf(body.input), questions } as unknown as EvaluationRequest;
  return {
    request,
    ...(images.length > 0 && { images }),
    asWritten: { dialect: 'gemini-decisions', body },
  };
}

const topProbability = (probabilities: Readonly<Record<string, number>>) =>
  Math.max(...Object.values(probabilities));

/**
 * The gateway's answers → Google's, keyed by question ID: Google's confidences (a noul's
 * max(p, 1 − p), the top probability otherwise) and a score's legend of the question's own levels.
 */
export function geminiAnswers(
  original: GeminiAsWritten,
  answers: Readonly<Record<string, Answer>>,
): Record<string, GeminiAnswer> {
  const out: Record<string, GeminiAnswer> = {};
  for (const id of Object.keys(original.body.questions)) {
    const answer = Object.hasOwn(answers, id) ? answers[id] : undefined;
    const question = original.body.questions[id] as GeminiQuestion;
    let given: GeminiAnswer | undefined;
    if (answer?.type === 'noul')
      given = { type: 'noul', noul: answer.noul, confidence: Math.max(answer.noul, 1 - answer.noul) };
    else if (answer?.type === 'choice')
      given = {
        type: 'choice',
        choice: answer.choice,
        probabilities: answer.probabilities,
        confidence: topProbability(answer.probabilities),
      };
    else if (answer?.type === 'score' && question.type === 'score')
      given = {
        type: 'score',
        score: answer.score,
        probabilities: answer.probabilities,
        legend: Object.fromEntries(question.criteria.map((level, i) => [String(i), level])),
        confidence: topProbability(answer.probabilities),
      };
    if (given === undefined) throw new Error(`no answer of its type for question ${JSON.stringify(id)}`);
    setOwn(out, id, given);
  }
  return out;
}

export function geminiUsage(
  usage: { input_tokens: number; output_tokens: number },
  details?: UsageDetails,
): GeminiUsage {
  return {
    total_input_tokens: usage.input_tokens,
    total_output_tokens: usage.output_tokens,
    total_tokens: usage.input_tokens + usage.output_tokens,
    ...(details !== undefined && {
      total_cached_tokens: details.cached_tokens,
      total_thought_tokens: details.reasoning_tokens,
    }),
  };
}

/** `{"error": {code, message, status}, "gateway_code"}`: the Gemini door's error body. */
export function geminiError(f: GatewayFailure) {
  const status = (GEMINI_STATUS as Record<number, string>)[f.status];
  return {
    error: {
      code: f.status,
      message: f.message,
      status: status ?? (f.status >= 500 ? 'INTERNAL' : 'INVALID_ARGUMENT'),
    },
    gateway_code: f.code,
  };
}

function invalid(issues: Issue[]): Parsed<never> {
  return { ok: false, error: failure('invalid_request', summarizeIssues(issues), { issues }) };
}
