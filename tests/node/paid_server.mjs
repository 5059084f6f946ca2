// A paid API as third parties build one with the x402 reference server: @x402/express's
// paymentMiddleware over @x402/core's x402ResourceServer with the `exact` schemes of
// @x402/evm and @x402/svm, verifying and settling through a facilitator (facilitator.mjs).
// It sells an Open-Meteo-shaped forecast (what plugins/examples/js-weather reads):
//
//   GET /v1/forecast?latitude=..&longitude=..   → {current: {temperature_2m, ...}} once paid
//
// env: FACILITATOR_URL; EVM_PAY_TO (and EVM_NETWORK, default eip155:8453) to sell on Base;
//      SVM_PAY_TO, SVM_NETWORK, SVM_MINT to sell on Solana; PRICE_UNITS (atomic USDC, e.g.
//      "1000" = 0.001 USDC).
// Prints one JSON line, {url}, once it listens on 127.0.0.1; serves until killed.
import express from "express";
import { HTTPFacilitatorClient } from "@x402/core/server";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";
import { ExactSvmScheme } from "@x402/svm/exact/server";

const env = (name, fallback) => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const units = env("PRICE_UNITS");
const server = new x402ResourceServer(new HTTPFacilitatorClient({ url: env("FACILITATOR_URL") }));
const accepts = [];
if (process.env.EVM_PAY_TO) {
  const network = env("EVM_NETWORK", "eip155:8453");
  server.register(network, new ExactEvmScheme());
  accepts.push({
    scheme: "exact",
    network,
    payTo: process.env.EVM_PAY_TO,
    // Base's USDC (the local chain runs it at the same address), by its EIP-712 domain.
    price: { amount: units, asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", extra: { name: "USD Coin", version: "2" } },
    maxTimeoutSeconds: 60,
  });
}
if (process.env.SVM_PAY_TO) {
  const network = env("SVM_NETWORK");
  server.register(network, new ExactSvmScheme());
  accepts.push({
    scheme: "exact",
    network,
    payTo: process.env.SVM_PAY_TO,
    price: { amount: units, asset: env("SVM_MINT") },
    maxTimeoutSeconds: 60,
  });
}

const app = express();
app.use(paymentMiddleware({ "GET /v1/forecast": { accepts, description: "The current weather" } }, server));
app.get("/v1/forecast", (request, response) => {
  response.json({
    latitude: Number(request.query.latitude),
    longitude: Number(request.query.longitude),
    current_units: { temperature_2m: "°C", wind_speed_10m: "km/h" },
    current: { time: "2026-11-30T12:00", temperature_2m: 21.5, wind_speed_10m: 7.2 },
  });
});
const listener = app.listen(0, "127.0.0.1", () => {
  console.log(JSON.stringify({ url: `http://127.0.0.1:${listener.address().port}` }));
});
