-- A command priced by use (x402's `upto`, docs/x402.md): `commands.by_use` is its
-- manifest's `by_use` (JSON: the price per unit, what a unit is, the maximum), NULL when
-- the command has a fixed price only. What a paid run used is kept with its payment.
ALTER TABLE commands ADD COLUMN by_use TEXT;
-- `payments.released_at`: a payment by use whose work failed by the agent's fault is
-- released (failed, nothing charged), or whose settlement its payer made fail; its payer
-- then cools off as after a refund, so that failing work cannot be had again and again
-- for free.
ALTER TABLE payments ADD COLUMN released_at BIGINT;
CREATE INDEX payments_released ON payments (network, payer, released_at) WHERE released_at IS NOT NULL;
