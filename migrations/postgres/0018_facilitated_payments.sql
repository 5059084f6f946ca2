-- A payment settled through an x402 facilitator instead of the agent's own wallet: the
-- facilitator's URL. Recorded before the facilitator is asked to settle; its transaction
-- is learned from the answer, or found on chain by recovery (never asked for twice).
-- For such a payment on Base, valid_until is the authorization's validBefore (Unix
-- seconds): past it, a payment not found on chain never will be.
ALTER TABLE payments ADD COLUMN facilitator TEXT;
