import type { UpstreamHealth } from '@decision-gateway/contract';
import { useEffect, useState } from 'react';
import { AdminError, admin } from './api.ts';

/** The upstreams' health (circuit, calls, failures since start) and the routes over them. */
export function Upstreams() {
  const [health, setHealth] = useState<UpstreamHealth>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    admin
      .upstreams()
      .then(setHealth, (caught) => setError(caught instanceof AdminError ? caught.message : String(caught)));
  }, []);
  return (
    <section aria-labelledby="upstreams-heading">
      <h2 id="upstreams-heading">Upstreams</h2>
      {error && <p role="alert">{error}</p>}
      {health && (
        <>
          <div className="table">
            <table>
              <thead>
                <tr>
                  <th scope="col">Upstream</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Circuit</th>
                  <th scope="col">Calls</th>
                  <th scope="col">Failures</th>
                </tr>
              </thead>
              <tbody>
                {health.upstreams.map((u) => (
                  <tr key={u.name}>
                    <td>{u.name}</td>
                    <td>{u.kind ?? '–'}</td>
                    <td className={`circuit-${u.circuit}`}>{u.circuit}</td>
                    <td>{u.calls}</td>
                    <td>{u.failures}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <ul>
            {health.routes.map((r) => (
              <li key={r.name}>
                Route <strong>{r.name}</strong>: {r.upstreams.join(' → ')}
                {r.escalateTo && `, escalating to ${r.escalateTo}`}
                {r.cacheTtlSeconds > 0 && `, decisions cached ${r.cacheTtlSeconds} s`}
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}
