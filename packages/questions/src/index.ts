export * from './answers.ts';
export * from './checks.ts';
export * from './distribution.ts';
export { bm25Scores } from './lexical/bm25.ts';
export { answerLexically, createLexicalUpstream, lexicalUsage } from './lexical/lexical-upstream.ts';
export { terms } from './lexical/terms.ts';
export * from './render.ts';
export * from './tokens.ts';
export type * from './upstream.ts';
