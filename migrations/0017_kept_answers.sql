-- A paid answer kept with its payment, so that a payer's retry (after a dropped
-- connection) gets it again without paying twice: the payer's own id for the payment
-- (x402's payment-identifier extension; one use per payer, ever), the answer, and until
-- when it is kept.
ALTER TABLE payments ADD COLUMN payment_ref TEXT;
ALTER TABLE payments ADD COLUMN answer TEXT;
ALTER TABLE payments ADD COLUMN answer_expires_at INTEGER;
CREATE UNIQUE INDEX payments_by_payer_ref ON payments (payer, payment_ref) WHERE payment_ref IS NOT NULL;
-- For the pass that forgets answers past their time.
CREATE INDEX payments_answers_to_forget ON payments (answer_expires_at) WHERE answer IS NOT NULL;
