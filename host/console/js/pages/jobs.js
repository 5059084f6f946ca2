import { enc, get } from "../api.js";
import { fill, h, progress, short, table, time } from "../dom.js";

/** Not done yet: the owner's list tells waiting (queued) from under way (running). */
const underWay = (j) => j.state === "queued" || j.state === "running";

/** The agent's long-running jobs; refreshed every 2 s while one is under way. */
export async function jobsTab(panel, agent) {
  let timer = null;
  const render = async () => {
    const { jobs } = await get(`/v1/account/agents/${enc(agent.id)}/jobs?limit=100`);
    fill(
      panel,
      table("Long-running jobs, newest first", [
        ["Job", (j) => short(j.id, 6)],
        ["Command", (j) => (j.command ? `/${j.command}` : null)],
        ["From", (j) => j.origin],
        ["State", (j) => h("span", { class: `state ${j.state}` }, j.state)],
        ["Progress", (j) => (underWay(j) ? progress(j.progress, `Progress of job ${j.id}`) : null)],
        ["Started", (j) => time(j.created_at)],
        ["Error", (j) => (j.error ? `${j.error} (${j.code})` : null)],
      ], jobs, "No jobs yet."),
    );
    if (jobs.some(underWay)) timer = setTimeout(() => render().catch(() => {}), 2000);
  };
  await render();
  return () => clearTimeout(timer);
}
