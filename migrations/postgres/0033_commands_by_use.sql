-- A command priced by use (x402's `upto`, docs/x402.md): `commands.by_use` is its
-- manifest's `by_use` (JSON: the price per unit, what a unit is, the maximum), NULL when
-- the command has a fixed price only. What a paid run used is kept with its payment.
ALTER TABLE commands ADD COLUMN by_use TEXT;
