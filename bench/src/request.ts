import { MODEL_ID } from '@decision-gateway/contract';

/** A realistic 3-question request (one of each type) over a support-ticket state of ~1 KB. */
export const BENCH_REQUEST = {
  model: MODEL_ID,
  state: {
    ticket: {
      id: 'T-48213',
      channel: 'email',
      subject: 'Charged twice for order #99812',
      body:
        'Hello, I placed order #99812 last Tuesday and my card statement shows two identical charges of 49.90 EUR. ' +
        'I only received one confirmation email and one parcel. Could you please refund the duplicate charge? ' +
        'I have attached a screenshot of the statement. This is the second time this happens, and I am starting to ' +
        'consider cancelling my subscription if it is not sorted out quickly. Thanks, Dana',
    },
    customer: { plan: 'pro', tenureMonths: 27, previousTickets: 3, language: 'en' },
  },
  questions: {
    team: {
      type: 'choice',
      instructions: 'Which team should handle this ticket?',
      criteria: {
        billing: 'payments, invoices, refunds, duplicate charges',
        technical: 'bugs, crashes, errors in the app',
        shipping: 'deliveries, parcels, tracking',
        account: 'login, profile, subscription changes',
      },
    },
    urgency: {
      type: 'score',
      instructions: 'How urgent is this ticket?',
      criteria: ['can wait a week', 'within two days', 'today', 'immediately: the customer may churn'],
    },
    refund: { type: 'noul', instructions: 'The customer asks for money back.' },
  },
} as const;

/** The same request in OpenAI's Decisions shape (the OpenAI door): the same state, the same three questions. */
export const BENCH_OPENAI_REQUEST = {
  model: MODEL_ID,
  input: [{ role: 'user', content: [{ type: 'input_json', data: BENCH_REQUEST.state }] }],
  questions: [
    {
      type: 'choice',
      name: 'team',
      instructions: BENCH_REQUEST.questions.team.instructions,
      choices: Object.entries(BENCH_REQUEST.questions.team.criteria).map(([value, description]) => ({
        value,
        description,
      })),
    },
    {
      type: 'score',
      name: 'urgency',
      instructions: BENCH_REQUEST.questions.urgency.instructions,
      levels: BENCH_REQUEST.questions.urgency.criteria.map((label) => ({ label })),
    },
    { type: 'predicate', name: 'refund', instructions: BENCH_REQUEST.questions.refund.instructions },
  ],
} as const;

/**
 * The same request in Google's Decisions shape (the Gemini door): the state as the text input and
 * the same three questions, which Google keys by ID too. `ai.decisions.create` of `@google/genai`
 * 3.3.0 sends this object as exactly these bytes (checked against a capturing server).
 */
export const BENCH_GEMINI_REQUEST = {
  model: MODEL_ID,
  input: JSON.stringify(BENCH_REQUEST.state),
  questions: BENCH_REQUEST.questions,
} as const;

/**
 * The bench's photo request: a 1 MB JPEG (noise, so it does not compress) of the sizes a phone
 * sends, as a multipart body whose `request` part asks one noul about it (docs/images.md), or as
 * the same request in JSON with the photo's base64 in it (as `/native` takes it).
 */
export async function benchPhoto(): Promise<{ body: Buffer; contentType: string; json: string }> {
  const { default: sharp } = await import('sharp');
  const { randomBytes } = await import('node:crypto');
  const [width, height] = [1000, 750];
  let quality = 92;
  let jpeg = await sharp(randomBytes(width * height * 3), { raw: { width, height, channels: 3 } })
    .jpeg({ quality })
    .toBuffer();
  // Near 1 MB whatever the encoder's version: step the quality down until it fits.
  while (jpeg.length > 1_048_576 && quality > 40) {
    quality -= 4;
    jpeg = await sharp(randomBytes(width * height * 3), { raw: { width, height, channels: 3 } })
      .jpeg({ quality })
      .toBuffer();
  }
  const asked = {
    model: BENCH_REQUEST.model,
    state: { note: 'The customer says the parcel arrived crushed.', photo: 'parcel' },
    questions: { damaged: { type: 'noul', instructions: 'Is the parcel in photo damaged?' } },
  };
  const request = JSON.stringify({ ...asked, assets: { parcel: { type: 'image', part: 'photo' } } });
  const json = JSON.stringify({
    ...asked,
    assets: { parcel: { type: 'image', format: 'jpeg', data_base64: jpeg.toString('base64') } },
  });
  const boundary = 'dgbenchboundary';
  const body = Buffer.concat([
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="request"\r\n\r\n${request}\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="photo"; filename="parcel.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`,
    ),
    jpeg,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { body, contentType: `multipart/form-data; boundary=${boundary}`, json };
}
