// js-weather: the current temperature at a place, from the Open-Meteo forecast API, with
// each answer kept in the key-value store so a repeat within `cache_seconds` makes no call.
// Written against the JavaScript SDK (plugin-sdk/js) and the standard `fetch()`, which the
// host sends through its outbound guard (wasi:http).
//
// Agent manifest:
//   [[commands]]
//   command = "weather"
//   handler_type = "custom"
//   plugin = "plugins/examples/js-weather/dist/js_weather.wasm"
//   allowed_hosts = ["api.open-meteo.com"]
//   config = { cache_seconds = 600 }        # and api_url to use another server
import { definePlugin, invalidInput, kv, log, unavailable } from "@agent-host/plugin-sdk";

const OPEN_METEO = "https://api.open-meteo.com";

function coordinate(call, name, limit) {
  const value = call.number(name);
  if (!Number.isFinite(value) || Math.abs(value) > limit) {
    throw invalidInput(`${name} must be between -${limit} and ${limit}`);
  }
  return value;
}

export const command = definePlugin({
  name: "js_weather",
  version: "0.1.0",
  description: "The current temperature at a place (written in JavaScript)",
  parameters: [
    { name: "latitude", type: "number", required: true, description: "Degrees north, -90 to 90" },
    { name: "longitude", type: "number", required: true, description: "Degrees east, -180 to 180" },
  ],
  capabilities: ["http", "kv"],

  async execute(call) {
    const latitude = coordinate(call, "latitude", 90);
    const longitude = coordinate(call, "longitude", 180);
    const api = String(call.config.api_url ?? OPEN_METEO).replace(/\/+$/, "");
    const maxAge = Number(call.config.cache_seconds ?? 600) * 1000;

    const key = `at:${latitude.toFixed(2)},${longitude.toFixed(2)}`;
    const cached = kv.getJson(key);
    if (cached && Date.now() - cached.at < maxAge) return `${cached.text} (cached)`;

    const url = `${api}/v1/forecast?latitude=${latitude}&longitude=${longitude}&current=temperature_2m,wind_speed_10m`;
    let response;
    try {
      response = await fetch(url, { headers: { accept: "application/json" } });
    } catch (e) {
      // A refusal by the host's guard says only "denied" here; its reason is in the run's log.
      throw unavailable(`the weather service could not be reached (${e.message})`);
    }
    const body = await response.json().catch(() => null);
    if (!response.ok) {
      // Open-Meteo explains a refusal as {"error": true, "reason": "..."}.
      throw unavailable(`the weather service refused (${response.status}): ${body?.reason ?? "no reason given"}`);
    }
    const current = body?.current;
    const units = body?.current_units ?? {};
    if (typeof current?.temperature_2m !== "number") throw unavailable("the weather service sent no temperature");
    const text =
      `${current.temperature_2m} ${units.temperature_2m ?? "°C"}, wind ${current.wind_speed_10m} ` +
      `${units.wind_speed_10m ?? "km/h"} at ${latitude}, ${longitude} (${current.time} GMT)`;

    kv.setJson(key, { at: Date.now(), text });
    kv.setJson("lookups", (kv.getJson("lookups") ?? 0) + 1);
    log.info(`looked up ${latitude},${longitude}`);
    return text;
  },
});
