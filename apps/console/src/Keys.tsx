import type { CreatedKey, KeyObject } from '@decision-gateway/contract';
import { type FormEvent, useCallback, useEffect, useState } from 'react';
import { AdminError, admin } from './api.ts';
import { Field } from './Field.tsx';

/** The keys, newest first, a page at a time; creating one shows its plain key once. */
export function Keys({ onChange }: { onChange?: () => void }) {
  const [keys, setKeys] = useState<KeyObject[]>([]);
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<string>();
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<CreatedKey>();

  const load = useCallback(async (cursor?: string) => {
    try {
      const page = await admin.listKeys(cursor);
      setKeys(page.keys);
      setNext(page.nextCursor);
      setError(undefined);
    } catch (caught) {
      setError(caught instanceof AdminError ? caught.message : String(caught));
    }
  }, []);
  useEffect(() => {
    void load(cursors[cursors.length - 1]);
  }, [load, cursors]);

  return (
    <section aria-labelledby="keys-heading">
      <h2 id="keys-heading">Keys</h2>
      {error && <p role="alert">{error}</p>}
      <div className="table">
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Prefix</th>
              <th scope="col">Credits</th>
              <th scope="col">Last used</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {keys.map((key) => (
              <tr key={key.id}>
                <td>
                  <a href={`#/keys/${key.id}`}>{key.name}</a>
                </td>
                <td>
                  <code>{key.prefix}…</code>
                </td>
                <td>{key.credits ?? 'unlimited'}</td>
                <td>{key.lastUsedAt ?? 'never'}</td>
                <td>{key.revokedAt ? 'revoked' : 'active'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <div className="row">
        <button
          type="button"
          disabled={cursors.length === 1}
          onClick={() => setCursors(cursors.slice(0, -1))}
        >
          Previous page
        </button>
        <button type="button" disabled={next === null} onClick={() => next && setCursors([...cursors, next])}>
          Next page
        </button>
        <button type="button" aria-expanded={creating} onClick={() => setCreating(!creating)}>
          Create key
        </button>
      </div>
      {creating && (
        <CreateKeyForm
          onCreated={(key) => {
            setCreated(key);
            setCreating(false);
            setCursors([undefined]);
            void load();
            onChange?.();
          }}
        />
      )}
      {created && <NewKey created={created} />}
    </section>
  );
}

function CreateKeyForm({ onCreated }: { onCreated: (key: CreatedKey) => void }) {
  const [name, setName] = useState('');
  const [credits, setCredits] = useState('100');
  const [error, setError] = useState<string>();
  async function submit(event: FormEvent) {
    event.preventDefault();
    try {
      onCreated(await admin.createKey(name, credits.trim() === '' ? null : Number(credits)));
    } catch (caught) {
      setError(caught instanceof AdminError ? caught.message : String(caught));
    }
  }
  return (
    <form onSubmit={submit} className="form">
      <Field label="Name">
        {(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} required />}
      </Field>
      <Field label="Credits">
        {(id) => (
          <input id={id} value={credits} onChange={(e) => setCredits(e.target.value)} inputMode="decimal" />
        )}
      </Field>
      <button type="submit">Create</button>
      {error && <p role="alert">{error}</p>}
    </form>
  );
}

function NewKey({ created }: { created: CreatedKey }) {
  const [copied, setCopied] = useState(false);
  return (
    <div className="notice">
      <p>Shown only this once; copy it now:</p>
      <output aria-label="New key">
        <code>{created.key}</code>
      </output>
      <button
        type="button"
        onClick={async () => {
          await navigator.clipboard?.writeText(created.key).catch(() => {});
          setCopied(true);
        }}
      >
        {copied ? 'Copied' : 'Copy'}
      </button>
    </div>
  );
}
