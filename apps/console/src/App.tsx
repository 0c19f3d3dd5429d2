import type { KeyObject } from '@decision-gateway/contract';
import { type FormEvent, useCallback, useEffect, useState } from 'react';
import { AdminError, admin, adminToken } from './api.ts';
import { Field } from './Field.tsx';
import { KeyPage } from './KeyPage.tsx';
import { Keys } from './Keys.tsx';
import { Playground } from './Playground.tsx';
import { Upstreams } from './Upstreams.tsx';

/** `#/keys/<id>` is a key's page; anything else the overview. */
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
  const keyId = /^#\/keys\/(.+)$/.exec(route)?.[1];
  return (
    <main>
      <header className="row">
        <h1>Decision Gateway</h1>
        <button
          type="button"
          onClick={() => {
            adminToken.clear();
            setSignedIn(false);
          }}
        >
          Sign out
        </button>
      </header>
      {keyId ? <KeyPage id={decodeURIComponent(keyId)} /> : <Overview />}
    </main>
  );
}

function Overview() {
  const [keys, setKeys] = useState<KeyObject[]>([]);
  const refresh = useCallback(() => {
    admin.listKeys().then(
      (page) => setKeys(page.keys),
      () => {},
    );
  }, []);
  useEffect(refresh, [refresh]);
  return (
    <>
      <Keys onChange={refresh} />
      <Upstreams />
      <Playground keys={keys} />
    </>
  );
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
              // A text field (README.md#console), masked by CSS: a password input has no textbox role.
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
