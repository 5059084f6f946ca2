use super::*;

/// Bots connected before these records were typed read back, and are written the same.
#[test]
fn stored_bot_records_read_back_and_keep_their_shape() {
    let plain: BotSecret = serde_json::from_str(r#"{"bot_token":"1:t"}"#).unwrap();
    assert_eq!((plain.bot_token.as_str(), plain.webhook_secret), ("1:t", None));
    let hooked: BotSecret = serde_json::from_str(r#"{"bot_token":"1:t","webhook_secret":"s"}"#).unwrap();
    assert_eq!(hooked.webhook_secret.as_deref(), Some("s"));
    assert_eq!(
        serde_json::to_string(&hooked).unwrap(),
        r#"{"bot_token":"1:t","webhook_secret":"s"}"#
    );
    let public: BotPublic = serde_json::from_str(r#"{"bot_username":"b","bot_id":1}"#).unwrap();
    assert_eq!((public.bot_username.as_str(), public.bot_id), ("b", Some(1)));
    assert_eq!(
        serde_json::to_string(&public).unwrap(),
        r#"{"bot_username":"b","bot_id":1}"#
    );
}

#[test]
fn long_replies_split_within_the_limit_at_natural_breaks() {
    assert_eq!(split_message("short"), vec!["short"]);
    let line = "word ".repeat(100); // 500 chars
    let text = format!("{}\n{}", line.repeat(8), line.repeat(3)); // 4000 + 1 + 1500
    let parts = split_message(&text);
    assert_eq!(parts.len(), 2);
    assert!(parts.iter().all(|p| p.chars().count() <= MAX_MESSAGE_CHARS));
    assert!(parts[1].starts_with("word"), "cut at the line break");
    let solid = "x".repeat(9_000);
    let parts = split_message(&solid);
    assert_eq!(
        parts.iter().map(|p| p.chars().count()).collect::<Vec<_>>(),
        vec![4096, 4096, 808]
    );
    assert_eq!(parts.concat(), solid, "nothing lost");
}

#[test]
fn runs_of_whitespace_never_become_an_empty_message() {
    // The telegram_update fuzz target's invariant pointed here: a window of only spaces
    // was sent as an empty message, which Telegram refuses (and the rest of the reply).
    let spaces_then_word = format!("{}end", " ".repeat(5_000));
    assert_eq!(
        split_message(&spaces_then_word),
        vec![format!("{}end", " ".repeat(904))]
    );
    let word_then_spaces = format!("start{}", " ".repeat(5_000));
    assert_eq!(split_message(&word_then_spaces), vec!["start"]);
    assert_eq!(split_message(&format!("a{}", "\n".repeat(10_000))), vec!["a"]);
}
