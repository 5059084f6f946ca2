//! Wire formats of the third-party APIs (the Telegram Bot API; the X API comes next).

pub mod telegram;
