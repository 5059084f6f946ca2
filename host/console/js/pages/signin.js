import { ApiError, get, session } from "../api.js";
import { field, fill, form, h } from "../dom.js";

/** Signs in with a key of scope `manage`: checked with GET /v1/account before it is kept. */
export function signInPage(main, reason, signedIn) {
  const input = h("input", { type: "password", name: "key", required: true, autocomplete: "off", spellcheck: "false" });
  fill(
    main,
    h("h1", { tabindex: -1 }, "Sign in"),
    reason ? h("p", { class: "error", role: "alert" }, reason) : null,
    h("p", {}, "Sign in with an API key of scope manage. It is kept in this tab only, and forgotten when the tab closes."),
    form({ class: "signin", "aria-label": "Sign in" }, [
      field("API key", input, "From your operator (agent-host key create) or from this console's key page."),
      h("button", { type: "submit" }, "Sign in"),
    ], async () => {
      const key = input.value.trim();
      try {
        const account = await get("/v1/account", { key });
        session.signIn(key);
        signedIn(account);
      } catch (e) {
        if (e instanceof ApiError && e.status === 403) {
          throw new Error("This key may use agents but not manage the account: sign in with a key of scope manage.");
        }
        if (e instanceof ApiError && e.status === 401) {
          throw new Error(/expired/.test(e.message) ? e.message : "This key is not valid, or it was revoked.");
        }
        throw e;
      }
    }),
  );
  input.focus();
}
