import { createRequire } from 'node:module';

// o200k_base is the encoding of current OpenAI models; gpt-tokenizer is a pure-JS BPE with no
// native parts or downloads, so token counts work offline and anywhere Node runs. Its tables take
// about 70 MB, so they load on the first count: a gateway on another upstream never pays for them.
type Encoder = { countTokens(text: string): number };
let encoder: Encoder | undefined;

/** Tokens in `text` under the o200k_base encoding. */
export function countTokens(text: string): number {
  if (text.length === 0) return 0;
  encoder ??= createRequire(import.meta.url)('gpt-tokenizer/encoding/o200k_base') as Encoder;
  return encoder.countTokens(text);
}
