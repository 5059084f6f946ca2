import { get, post } from "../api.js";
import { copyButton, field, fill, form, h, table, time } from "../dom.js";

/** Upload a component and list the account's, by content hash. */
export async function pluginsPage(main) {
  const list = h("div");
  const refresh = async () => {
    const { plugins } = await get("/v1/account/plugins");
    fill(list, table("Uploaded components", [
      ["Plugin", (p) => h("span", {}, h("code", { title: p.plugin }, `${p.plugin.slice(0, 19)}…`), " ", copyButton(p.plugin, "Copy reference"))],
      ["Name", (p) => p.manifest?.name],
      ["Size", (p) => `${Math.ceil(p.size / 1024)} KiB`],
      ["WIT", (p) => p.witVersion],
      ["Uploaded", (p) => time(p.uploaded_at)],
      ["Used by", (p) => `${p.used_by_commands} command(s)`],
    ], plugins, "No components uploaded yet."));
  };
  const file = h("input", { type: "file", name: "component", accept: ".wasm,application/wasm", required: true });
  const upload = form({ "aria-label": "Upload a plugin" }, [
    field("Component (.wasm)", file, "A WebAssembly component of the agent:plugin world, built with the SDK."),
    h("button", { type: "submit" }, "Upload"),
  ], async () => {
    const chosen = file.files[0];
    if (!chosen) throw new Error("Choose a .wasm file first");
    const made = await post("/v1/account/plugins", await chosen.arrayBuffer(), { type: "application/wasm" });
    await refresh();
    const line = `plugin = "${made.plugin}"`;
    return h("div", { class: "once" },
      h("p", {}, `Uploaded ${made.manifest?.name ?? "the component"} ${made.manifest?.version ?? ""}. Use it in a manifest's command:`),
      h("div", { class: "row" }, h("code", { class: "uri" }, line), copyButton(line, "Copy line")),
    );
  });
  fill(main, h("h1", { tabindex: -1 }, "Plugins"), h("h2", {}, "Upload"), upload, h("h2", {}, "Components"), list);
  await refresh();
}
