//! Wire formats of the third-party APIs: the Telegram Bot API, the X API v2, and an x402
//! facilitator's.

pub mod facilitator;
pub mod telegram;
pub mod x;
