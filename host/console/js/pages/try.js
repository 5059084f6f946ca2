import { call, enc } from "../api.js";
import { field, fill, h } from "../dom.js";

// Try the agent: a chat with it from the console, its answer streamed as it is written
// (server-sent events over fetch: EventSource cannot send the key), and the commands it
// called shown as they run. The conversation stays in this page only.

/** Reads server-sent events from a fetch response: calls `on(event, data)` for each. */
async function readEvents(response, on) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      let event = "message";
      const data = [];
      for (const line of frame.split(/\r?\n/)) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) on(event, JSON.parse(data.join("\n")));
    }
  }
}

/** A command's answer as the model got it: its response text when it is the usual JSON. */
function said(summary) {
  try {
    return JSON.parse(summary).response ?? summary;
  } catch {
    return summary;
  }
}

export async function tryTab(panel, agent) {
  const history = [];
  const log = h("ol", { class: "conversation", "aria-label": "Conversation" });
  const message = h("textarea", { name: "message", rows: 3, required: true, maxlength: 4000 });
  const tools = h("input", { type: "checkbox", name: "tools", checked: true });
  const send = h("button", { type: "submit" }, "Send");
  const stop = h("button", { type: "button", class: "copy", hidden: true }, "Stop");
  let controller = null;
  stop.addEventListener("click", () => controller?.abort());

  const ask = async (event) => {
    event.preventDefault();
    const text = message.value.trim();
    if (!text) return;
    message.value = "";
    const answer = h("p", { class: "answer", "aria-live": "polite" });
    const calls = h("ul", { class: "calls", "aria-label": "Commands called" });
    log.append(h("li", { class: "turn user" }, h("strong", {}, "You: "), text));
    const turn = h("li", { class: "turn agent", "aria-busy": "true" }, h("strong", {}, `${agent.username}: `), calls, answer);
    log.append(turn);
    send.disabled = true;
    stop.hidden = false;
    controller = new AbortController();
    let written = "";
    try {
      const response = await call("POST", `/v1/agents/${enc(agent.id)}/chat`, {
        body: { message: text, conversationHistory: history, toolsEnabled: tools.checked, stream: true },
        accept: "text/event-stream",
        raw: true,
        signal: controller.signal,
      });
      await readEvents(response, (name, data) => {
        if (name === "delta") {
          written += data.text;
          answer.textContent = written;
        } else if (name === "tool_call_started") {
          calls.append(h("li", { id: `call-${data.id}` }, "Running ", h("code", {}, `/${data.name}`), ` ${JSON.stringify(data.arguments)}`));
        } else if (name === "tool_call_finished") {
          const item = calls.querySelector(`#call-${CSS.escape(data.id)}`);
          fill(item ?? calls.appendChild(h("li")), data.ok ? "Called " : "Failed: ", h("code", {}, `/${data.name}`), data.summary ? ` — ${said(data.summary)}` : "");
        } else if (name === "done") {
          written = data.data.response;
          answer.textContent = written;
          turn.append(h("small", { class: "hint" }, `${data.usage.promptTokens} prompt and ${data.usage.completionTokens} completion tokens`));
        } else if (name === "error") {
          throw new Error(data.error?.message ?? "The chat failed");
        }
      });
      history.push({ role: "user", content: text }, { role: "assistant", content: written });
    } catch (e) {
      answer.append(h("span", { class: "error", role: "alert" }, e.name === "AbortError" ? " (stopped)" : ` ${e.message}`));
    } finally {
      turn.removeAttribute("aria-busy");
      send.disabled = false;
      stop.hidden = true;
      message.focus();
    }
  };

  const chat = h("form", { "aria-label": `Chat with ${agent.username}` },
    field("Message", message, "Enter sends; Shift+Enter starts a new line."),
    h("label", { class: "check" }, tools, " Let it call its commands"),
    h("div", { class: "actions" }, send, stop));
  chat.addEventListener("submit", ask);
  message.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      chat.requestSubmit();
    }
  });
  fill(panel,
    h("p", { class: "hint" }, "Talk to the agent as its users do. The chat counts against the account's limits and tokens like any other."),
    log,
    chat);
  return () => controller?.abort();
}
