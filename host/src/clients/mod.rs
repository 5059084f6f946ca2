//! Wire formats of the third-party APIs: the Telegram Bot API and the X API v2.

pub mod telegram;
pub mod x;
