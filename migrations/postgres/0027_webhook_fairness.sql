-- Webhook endpoints that keep timing out are backed off as a whole: while `paused_until`
-- lies ahead, none of their deliveries is sent (each delivery's own retry schedule runs on
-- beneath it). `consecutive_timeouts` counts the attempts in a row that got no answer in
-- time; an answer of any kind resets it.
ALTER TABLE webhook_endpoints ADD COLUMN paused_until BIGINT;
ALTER TABLE webhook_endpoints ADD COLUMN consecutive_timeouts BIGINT NOT NULL DEFAULT 0;
CREATE INDEX webhook_deliveries_pending_by_endpoint ON webhook_deliveries (endpoint_id, state, created_at);
