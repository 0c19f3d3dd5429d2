// Run against the quick-start gateway: DG_API_KEY=dg_… pnpm --filter @decision-gateway/client example
import { choice, createGatewayClient, GatewayError, noul, score } from '@decision-gateway/client';

const gateway = createGatewayClient({
  url: process.env.DG_URL ?? 'http://127.0.0.1:8787',
  apiKey: process.env.DG_API_KEY,
});

try {
  const { result, creditsUsed } = await gateway.evaluate({
    state: 'Hi, I was charged twice for my order last week. Please refund the double charge.',
    questions: {
      team: choice('Which team should handle this ticket?', {
        billing: 'payments, refunds',
        technical: 'bugs, crashes',
      }),
      urgency: score('How urgent is it?', ['not urgent', 'soon', 'now']),
      refund: noul('Is this a refund request?'),
    },
  });
  // Typed per question: team.choice is 'billing' | 'technical'; refund has noul and no confidence.
  console.log(
    `team: ${result.answers.team.choice} (confidence ${result.answers.team.confidence.toFixed(2)})`,
  );
  console.log(`urgency: ${result.answers.urgency.score.toFixed(2)} of 2`);
  console.log(`refund request: ${(result.answers.refund.noul * 100).toFixed(0)}%`);
  console.log(`${result.usage.input_tokens} input tokens, ${creditsUsed} credits, ${result.elapsedMs} ms`);
} catch (error) {
  if (error instanceof GatewayError) {
    console.error(
      `gateway error ${error.code} (${error.type}): ${error.message} [${error.requestId ?? 'no request id'}]`,
    );
    process.exitCode = 1;
  } else {
    throw error;
  }
}
