import { choice, createGatewayClient, GatewayError, noul } from '@decision-gateway/client';
import { StrictMode, useMemo, useState } from 'react';
import { createRoot } from 'react-dom/client';

/** Where the gateway is, as this page's own server says (GET /config). */
async function gatewayUrl(): Promise<string> {
  const response = await fetch('/config');
  return ((await response.json()) as { gatewayUrl: string }).gatewayUrl;
}

/** A short-lived token for this browser session, minted by this page's server with its API key. */
async function sessionToken(): Promise<string> {
  const response = await fetch('/session-token', { method: 'POST' });
  if (!response.ok) throw new Error(`no token: HTTP ${response.status}`);
  return ((await response.json()) as { token: string }).token;
}

const questions = {
  team: choice('Which team should handle this ticket?', {
    billing: 'payments, invoices, refunds',
    technical: 'bugs, crashes, errors',
    sales: 'pricing, plans, upgrades',
  }),
  refund: noul('Is the customer asking for a refund?'),
};

function App() {
  const [state, setState] = useState(
    'I was charged twice for my order last week. Please refund the double charge.',
  );
  const [answer, setAnswer] = useState<string>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  // The client fetches a token before its first call, and again if the gateway says it expired.
  const client = useMemo(
    () => gatewayUrl().then((url) => createGatewayClient({ url, token: sessionToken })),
    [],
  );

  async function ask() {
    setBusy(true);
    setError(undefined);
    try {
      const { result, creditsUsed, meta } = await (await client).evaluate({ state, questions });
      const { team, refund } = result.answers;
      const shares = Object.entries(team.probabilities)
        .map(([label, p]) => `${label} ${(p * 100).toFixed(0)}%`)
        .join(', ');
      setAnswer(
        `Team: ${team.choice} (${shares}). Refund: ${(refund.noul * 100).toFixed(0)}% likely. ` +
          `${creditsUsed} credits, request ${meta.requestId}.`,
      );
    } catch (caught) {
      setError(caught instanceof GatewayError ? `${caught.code}: ${caught.message}` : String(caught));
    } finally {
      setBusy(false);
    }
  }

  return (
    <main
      style={{ fontFamily: 'system-ui, sans-serif', maxWidth: 640, margin: '2rem auto', padding: '0 1rem' }}
    >
      <h1>Ticket triage</h1>
      <label htmlFor="state">Ticket</label>
      <textarea
        id="state"
        rows={4}
        style={{ width: '100%' }}
        value={state}
        onChange={(e) => setState(e.target.value)}
      />
      <button type="button" onClick={ask} disabled={busy}>
        Ask
      </button>
      {answer && (
        <p role="status" aria-label="Answer">
          {answer}
        </p>
      )}
      {error && (
        <p role="alert" style={{ color: '#b00' }}>
          {error}
        </p>
      )}
    </main>
  );
}

createRoot(document.getElementById('root') as HTMLElement).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
