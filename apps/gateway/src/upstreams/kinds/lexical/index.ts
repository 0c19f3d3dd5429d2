import { createLexicalUpstream } from '@decision-gateway/questions';
import { z } from 'zod';
import { maxQuestions, timeoutMs } from '../fields.ts';
import { defineKind } from '../kind.ts';

/** The built-in lexical baseline (packages/questions): offline, deterministic, not a language model. */
export const lexical = defineKind({
  schema: z.strictObject({ kind: z.literal('lexical'), timeoutMs, maxQuestions: maxQuestions.optional() }),
  requiredEnv: [],
  fromEnv: (env) => ({ timeoutMs: env.timeoutMs }),
  remote: false,
  create: (name) => ({ ...createLexicalUpstream(), name }),
});
