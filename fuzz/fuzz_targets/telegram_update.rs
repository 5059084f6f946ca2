//! A Telegram webhook update, arbitrary JSON, and the reply split that answers it.
//! Invariants: never panics; a text message is read back exactly; every part of a reply is
//! non-empty (Telegram refuses empty messages) and within Telegram's 4,096 characters.

#![no_main]

use agent_host::services::chatapp::{MAX_MESSAGE_CHARS, read_update, split_message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(update) = serde_json::from_slice::<serde_json::Value>(data) else {
        // Not JSON: the route refuses it before it gets here. Split the bytes as a reply.
        let text = String::from_utf8_lossy(data);
        check_split(&text);
        return;
    };
    if let Some(incoming) = read_update(&update) {
        assert_eq!(Some(incoming.text.as_str()), update["message"]["text"].as_str());
        if let Some(command) = &incoming.command {
            assert!(!command.contains('@') && !command.chars().any(char::is_whitespace));
        }
        check_split(&incoming.text);
    }
});

fn check_split(text: &str) {
    for part in split_message(text) {
        assert!(
            !part.trim().is_empty(),
            "an empty part of {:?}",
            text.chars().take(40).collect::<String>()
        );
        assert!(part.chars().count() <= MAX_MESSAGE_CHARS);
    }
}
