import { del, enc, get, patch, put } from "../api.js";
import { confirmDialog, errorText, field, fill, form, h } from "../dom.js";

/** The agent's chat-app bot and social account: connect, pause, disconnect. */
export async function integrationsTab(panel, agent) {
  const base = `/v1/account/agents/${enc(agent.id)}/integrations`;
  const refresh = async () => {
    const now = await get(base);
    fill(
      panel,
      section({
        title: "Chat-app bot (Telegram)",
        kind: "chatapp",
        connected: now.chatapp,
        who: (c) => `@${c.bot_username}`,
        fields: () => {
          const token = h("input", { type: "password", name: "token", required: true, autocomplete: "off" });
          const webhook = h("input", { type: "url", name: "webhook_url", placeholder: "https://…/chatapp/AGENT/webhook" });
          return {
            inputs: [
              field("Bot token", token, "From @BotFather; checked with Telegram, then kept encrypted."),
              field("Webhook URL (optional)", webhook, "Registered with Telegram so the bot answers in its chats."),
            ],
            body: () => ({ token: token.value, webhook_url: webhook.value || null }),
          };
        },
      }),
      section({
        title: "Social account (X)",
        kind: "social",
        connected: now.social,
        who: (c) => `@${c.username}`,
        fields: () => {
          const access = h("input", { type: "password", name: "access_token", required: true, autocomplete: "off" });
          const refreshToken = h("input", { type: "password", name: "refresh_token", autocomplete: "off" });
          const expires = h("input", { type: "number", name: "expires_in", min: 1, step: 1 });
          return {
            inputs: [
              field("Access token", access, "An OAuth 2.0 user token; checked with X, then kept encrypted."),
              field("Refresh token (optional)", refreshToken),
              field("Expires in, seconds (optional)", expires),
            ],
            body: () => ({
              access_token: access.value,
              refresh_token: refreshToken.value || null,
              expires_in: expires.value ? Number(expires.value) : null,
            }),
          };
        },
      }),
    );
  };

  function section({ title, kind, connected, who, fields }) {
    const status = h("p", { role: "status", "aria-live": "polite" });
    const act = (work) => async () => {
      try {
        await work();
        await refresh();
      } catch (e) {
        fill(status, errorText(e));
      }
    };
    const { inputs, body } = fields();
    const connect = form({ "aria-label": `Connect the ${title}` }, [
      inputs,
      h("button", { type: "submit" }, connected ? "Replace" : "Connect"),
    ], async () => {
      await put(`${base}/${kind}`, body());
      await refresh();
    });
    return h(
      "section",
      { class: "integration" },
      h("h2", {}, title),
      connected
        ? [
            h("p", {}, `Connected as ${who(connected)}; ${connected.enabled ? "enabled" : "disabled"}.`),
            h(
              "div",
              { class: "actions" },
              h("button", { type: "button", onclick: act(() => patch(`${base}/${kind}`, { enabled: !connected.enabled })) },
                connected.enabled ? "Disable" : "Enable"),
              h("button", {
                type: "button",
                class: "danger",
                onclick: act(async () => {
                  if (await confirmDialog(`Disconnect ${who(connected)}?`, "Its tokens are forgotten; connect again to use it.", "Disconnect")) {
                    await del(`${base}/${kind}`);
                  }
                }),
              }, "Disconnect"),
            ),
            status,
          ]
        : h("p", {}, "Not connected."),
      connect,
    );
  }

  await refresh();
}
