import { call, del, enc, get, post, put } from "../api.js";
import { copyButton, errorText, external, field, fill, form, h } from "../dom.js";

const NETWORKS = [
  ["solana", "Solana"],
  ["base", "Base"],
];

/** The agent's wallets: address, balance, a QR code to fund it, and transfers out. */
export async function walletsTab(panel, agent) {
  const qrUrls = [];
  const render = async () => {
    const { wallets } = await get(`/v1/account/agents/${enc(agent.id)}/wallets`);
    fill(panel, NETWORKS.map(([network, label]) => {
      const wallet = wallets.find((w) => w.network === network);
      return wallet ? walletCard(agent, wallet, label, qrUrls) : missingWallet(agent, network, label, render);
    }));
  };
  await render();
  // Leaving the page frees the QR images.
  return () => qrUrls.forEach((u) => URL.revokeObjectURL(u));
}

function walletCard(agent, wallet, label, qrUrls) {
  const balance = h("p", { class: "balance", "aria-live": "polite" }, "Balance: loading…");
  get(`/v1/agents/${enc(agent.id)}/wallet/${wallet.network}/balance`)
    .then((b) => fill(balance, `Balance: ${b.balanceUsdc} USDC · ${b.balanceNative} ${b.nativeToken}`))
    .catch((e) => fill(balance, `Balance unavailable: ${errorText(e)}`));

  // At its own size: a QR code scaled by a fraction blurs its modules.
  const qr = h("img", { class: "qr", alt: `QR code to fund ${wallet.address} with USDC on ${label}` });
  call("GET", `/v1/account/agents/${enc(agent.id)}/wallets/${wallet.network}/qr`, { raw: true })
    .then((r) => r.blob())
    .then((blob) => {
      const url = URL.createObjectURL(blob);
      qrUrls.push(url);
      qr.src = url;
    })
    .catch(() => qr.replaceWith(h("p", { class: "error" }, "The QR code could not be made.")));

  return h(
    "section",
    { class: "wallet" },
    h("h2", {}, `${label} wallet`),
    h("div", { class: "wallet-body" },
      h("div", {},
        h("p", {}, "Address: ", h("code", { class: "address" }, wallet.address), " ", copyButton(wallet.address, "Copy address")),
        h("p", {}, external(wallet.explorer_url, "See it in the explorer")),
        balance,
        h("p", { class: "hint" }, "Scan to send USDC to this wallet: ", h("code", { class: "uri" }, wallet.funding_uri)),
        alertForm(agent, wallet, label),
        transferForm(agent, wallet, label),
      ),
      qr,
    ),
  );
}

/** The wallet's low-balance alert, which raises a `wallet.low_balance` webhook. */
function alertForm(agent, wallet, label) {
  const alert = wallet.low_balance_alert;
  const below = h("input", { type: "text", name: "below", inputmode: "decimal", pattern: "[0-9]+(\\.[0-9]{1,6})?", value: alert ? String(alert.below_usdc) : "" });
  const state = h("p", { class: "hint", "aria-live": "polite" },
    alert ? `Alert below ${alert.below_usdc} USDC${alert.low ? ": the balance is below it now" : ""}.` : "No low-balance alert.");
  const path = `/v1/account/agents/${enc(agent.id)}/wallets/${wallet.network}/alert`;
  return h("details", {},
    h("summary", {}, "Low-balance alert"),
    state,
    form({ "aria-label": `Low-balance alert for the ${label} wallet` }, [
      field("Alert below (USDC)", below, "Webhook endpoints subscribed to wallet.low_balance are told once when the balance goes below."),
      h("div", { class: "actions" },
        h("button", { type: "submit" }, "Save alert"),
        h("button", { type: "button", class: "copy", onclick: async () => {
          try {
            await del(path);
            below.value = "";
            fill(state, "No low-balance alert.");
          } catch (e) {
            fill(state, errorText(e));
          }
        } }, "Remove alert")),
    ], async () => {
      const saved = await put(path, { below_usdc: below.value.trim() });
      fill(state, `Alert below ${saved.below_usdc} USDC${saved.low ? ": the balance is below it now" : ""}.`);
    }),
  );
}

function transferForm(agent, wallet, label) {
  const recipient = h("input", { type: "text", name: "recipient", required: true, autocomplete: "off", spellcheck: "false" });
  const amount = h("input", { type: "text", name: "amount", required: true, inputmode: "decimal", pattern: "[0-9]+(\\.[0-9]{1,6})?" });
  const memo = h("input", { type: "text", name: "memo" });
  return h("details", {},
    h("summary", {}, `Send USDC from this ${label} wallet`),
    form({ "aria-label": `Transfer from the ${label} wallet` }, [
      field("Recipient address", recipient),
      field("Amount (USDC)", amount, "Up to 6 decimals."),
      field("Memo (optional)", memo, "Kept with the transfer; not put on chain."),
      h("button", { type: "submit" }, "Send"),
    ], async () => {
      const sent = await post(`/v1/agents/${enc(agent.id)}/wallet/${wallet.network}/transfer`, {
        recipientAddress: recipient.value.trim(),
        amountUsdc: Number(amount.value),
        memo: memo.value || undefined,
      });
      return h("p", {}, `Sent ${sent.amount} USDC. `, external(sent.explorerUrl, "See the transaction"));
    }),
  );
}

function missingWallet(agent, network, label, render) {
  const secret = h("input", { type: "password", name: "secret", required: true, autocomplete: "off" });
  return h(
    "section",
    { class: "wallet" },
    h("h2", {}, `${label} wallet`),
    h("p", {}, "No wallet on this network yet."),
    form({ "aria-label": `Create a ${label} wallet` }, [h("button", { type: "submit" }, `Create a ${label} wallet`)], async () => {
      await post(`/v1/account/agents/${enc(agent.id)}/wallets`, { network });
      await render();
    }),
    h("details", {},
      h("summary", {}, "Import an existing key instead"),
      form({ "aria-label": `Import a ${label} wallet` }, [
        field("Secret key", secret, network === "solana" ? "A base58 keypair or a solana-keygen JSON array." : "A 0x-hex private key."),
        h("button", { type: "submit" }, "Import"),
      ], async () => {
        await post(`/v1/account/agents/${enc(agent.id)}/wallets`, { network, secret: secret.value });
        await render();
      }),
    ),
  );
}
