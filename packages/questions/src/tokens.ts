// o200k_base is the encoding of current OpenAI models; gpt-tokenizer is a pure-JS BPE with no
// native parts or downloads, so token counts work offline and anywhere Node runs.
import { countTokens as countO200k } from 'gpt-tokenizer/encoding/o200k_base';

/** Tokens in `text` under the o200k_base encoding. */
export function countTokens(text: string): number {
  return text.length === 0 ? 0 : countO200k(text);
}
