import type { BudgetWindow, ProjectObject } from '@decision-gateway/contract';
import { type FormEvent, useCallback, useEffect, useState } from 'react';
import { AdminError, admin } from './api.ts';
import { Budgets } from './Budgets.tsx';
import { Field } from './Field.tsx';

const WINDOWS: BudgetWindow[] = ['minute', 'hour', 'day', 'week', 'month'];

/** Projects (docs/budgets.md): keys grouped under shared budgets; create one, set a budget on one. */
export function Projects() {
  const [projects, setProjects] = useState<ProjectObject[]>();
  const [error, setError] = useState<string>();
  const load = useCallback(() => {
    admin.listProjects().then(
      (list) => setProjects(list.projects),
      (caught) => setError(caught instanceof AdminError ? caught.message : String(caught)),
    );
  }, []);
  useEffect(load, [load]);

  return (
    <section aria-labelledby="projects-heading">
      <h2 id="projects-heading">Projects</h2>
      <CreateProject onCreated={load} />
      {error && <p role="alert">{error}</p>}
      {projects === undefined ? (
        !error && <p>Loading…</p>
      ) : projects.length === 0 ? (
        <p>No projects yet.</p>
      ) : (
        <>
          <SetBudget projects={projects} onSet={load} />
          {projects.map((p) => (
            <article key={p.id} aria-labelledby={`project-${p.id}`}>
              <h3 id={`project-${p.id}`}>{p.name}</h3>
              <p>
                <code>{p.id}</code> · {p.keyCount} {p.keyCount === 1 ? 'key' : 'keys'}
              </p>
              <Budgets budgets={p.budgets} holder={p.name} />
            </article>
          ))}
        </>
      )}
    </section>
  );
}

function CreateProject({ onCreated }: { onCreated: () => void }) {
  const [name, setName] = useState('');
  const [error, setError] = useState<string>();
  async function submit(event: FormEvent) {
    event.preventDefault();
    try {
      await admin.createProject(name);
      setName('');
      setError(undefined);
      onCreated();
    } catch (caught) {
      setError(caught instanceof AdminError ? caught.message : String(caught));
    }
  }
  return (
    <form onSubmit={submit} className="form">
      <Field label="Project name">
        {(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} />}
      </Field>
      <button type="submit">Create project</button>
      {error && <p role="alert">{error}</p>}
    </form>
  );
}

/** One budget of a project set (its window's budget replaced), the others kept. */
function SetBudget({ projects, onSet }: { projects: ProjectObject[]; onSet: () => void }) {
  const [projectId, setProjectId] = useState(projects[0]?.id ?? '');
  const [window, setWindow] = useState<BudgetWindow>('day');
  const [limit, setLimit] = useState('10');
  const [soft, setSoft] = useState(false);
  const [error, setError] = useState<string>();
  async function submit(event: FormEvent) {
    event.preventDefault();
    const project = projects.find((p) => p.id === projectId);
    if (!project) return;
    const others = project.budgets
      .filter((b) => b.window !== window)
      .map(({ window: w, limit: l, mode }) => ({ window: w, limit: l, mode }));
    try {
      await admin.setProjectBudgets(projectId, [
        ...others,
        { window, limit: Number(limit), mode: soft ? 'soft' : 'hard' },
      ]);
      setError(undefined);
      onSet();
    } catch (caught) {
      setError(caught instanceof AdminError ? caught.message : String(caught));
    }
  }
  return (
    <form onSubmit={submit} className="form" aria-label="Set a budget">
      <Field label="Project">
        {(id) => (
          <select id={id} value={projectId} onChange={(e) => setProjectId(e.target.value)}>
            {projects.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="Window">
        {(id) => (
          <select id={id} value={window} onChange={(e) => setWindow(e.target.value as BudgetWindow)}>
            {WINDOWS.map((w) => (
              <option key={w} value={w}>
                {w}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="Limit (credits)">
        {(id) => (
          <input id={id} value={limit} onChange={(e) => setLimit(e.target.value)} inputMode="decimal" />
        )}
      </Field>
      <label>
        <input type="checkbox" checked={soft} onChange={(e) => setSoft(e.target.checked)} /> Soft (warn only)
      </label>
      <button type="submit">Set budget</button>
      {error && <p role="alert">{error}</p>}
    </form>
  );
}
