import type { KeyObject } from '@decision-gateway/contract';
import { type FormEvent, useCallback, useEffect, useState } from 'react';
import { AdminError, admin, adminToken } from './api.ts';
import { Field } from './Field.tsx';
import { KeyPage } from './KeyPage.tsx';
import { Keys } from './Keys.tsx';
import { Overview } from './Overview.tsx';
import { Playground } from './Playground.tsx';
import { Projects } from './Projects.tsx';
import { Quality } from './Quality.tsx';
import { Review, useOpenReviews } from './Review.tsx';
import { Upstreams } from './Upstreams.tsx';

/** The pages a link away from every page; anything not listed (and `#/`) is the Overview. */
const PAGES = [
  { hash: '#/', name: 'Overview' },
  { hash: '#/keys', name: 'Keys' },
  { hash: '#/projects', name: 'Projects' },
  { hash: '#/upstreams', name: 'Upstreams' },
  { hash: '#/playground', name: 'Playground' },
  { hash: '#/quality', name: 'Quality' },
  { hash: '#/review', name: 'Review' },
] as const;

/** `#/keys/<id>` is a key's page, the others' hashes their pages; anything else the Overview. */
function useRoute(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return hash;
}

export function App() {
  const [signedIn, setSignedIn] = useState(adminToken.get() !== null);
  const route = useRoute();
  if (!signedIn) return <SignIn onSignedIn={() => setSignedIn(true)} />;
  return <SignedIn route={route} onSignOut={() => setSignedIn(false)} />;
}

function SignedIn({ route, onSignOut }: { route: string; onSignOut: () => void }) {
  const openReviews = useOpenReviews(route);
  const keyId = /^#\/keys\/(.+)$/.exec(route)?.[1];
  const page = keyId ? 'Keys' : (PAGES.find((p) => p.hash === route)?.name ?? 'Overview');
  return (
    <main>
      <header className="row">
        <h1>Decision Gateway</h1>
        <button
          type="button"
          onClick={() => {
            adminToken.clear();
            onSignOut();
          }}
        >
          Sign out
        </button>
      </header>
      <nav aria-label="Pages" className="row">
        {PAGES.map((p) => (
          <a key={p.hash} href={p.hash} aria-current={p.name === page ? 'page' : undefined}>
            {p.name}
            {p.name === 'Review' && openReviews !== undefined && (
              <span className="count"> ({openReviews})</span>
            )}
          </a>
        ))}
      </nav>
      {keyId ? (
        <KeyPage id={decodeURIComponent(keyId)} />
      ) : page === 'Keys' ? (
        <Keys />
      ) : page === 'Projects' ? (
        <Projects />
      ) : page === 'Upstreams' ? (
        <Upstreams />
      ) : page === 'Playground' ? (
        <PlaygroundPage />
      ) : page === 'Quality' ? (
        <Quality />
      ) : page === 'Review' ? (
        <Review />
      ) : (
        <Overview />
      )}
    </main>
  );
}

/** The playground, with the keys it may mint a token for. */
function PlaygroundPage() {
  const [keys, setKeys] = useState<KeyObject[]>([]);
  const refresh = useCallback(() => {
    admin.listKeys().then(
      (page) => setKeys(page.keys),
      () => {},
    );
  }, []);
  useEffect(refresh, [refresh]);
  return <Playground keys={keys} />;
}

function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string>();
  async function submit(event: FormEvent) {
    event.preventDefault();
    try {
      await admin.check(token);
      adminToken.set(token);
      onSignedIn();
    } catch (caught) {
      setError(caught instanceof AdminError ? caught.message : String(caught));
    }
  }
  return (
    <main>
      <h1>Decision Gateway</h1>
      <form onSubmit={submit} className="form">
        <Field label="Admin token">
          {(id) => (
            <input
              id={id}
              // A text field (docs/console.md), masked by CSS: a password input has no textbox role.
              type="text"
              className="secret"
              autoComplete="off"
              spellCheck={false}
              value={token}
              onChange={(e) => setToken(e.target.value)}
            />
          )}
        </Field>
        <button type="submit">Sign in</button>
        {error && <p role="alert">{error}</p>}
      </form>
    </main>
  );
}
