//! The keyed API's request bodies as the API defines them, with their rules. Type errors
//! are caught by `ApiJson` (naming the field); the rules serde cannot express are here.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::domain::Network;
use crate::error::ApiError;
use crate::money::MicroUsdc;

pub use crate::services::chat::MESSAGE_MAX_CHARS as CHAT_MESSAGE_MAX_CHARS;
/// Caps on `conversationHistory` (the API leaves them open): turns, and characters in all.
pub const HISTORY_MAX_TURNS: usize = 100;
pub const HISTORY_MAX_CHARS: usize = 100_000;
pub const CHATAPP_TEXT_MAX_CHARS: usize = 4_096;
pub const MEMO_MAX_CHARS: usize = 500;

pub fn network(text: &str) -> Result<Network, ApiError> {
    Network::parse(text).ok_or_else(|| ApiError::validation(format!("Invalid network '{text}': use solana or base")))
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Deserialize)]
pub struct ChatTurn {
    pub role: Role,
    pub content: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatRequest {
    pub message: String,
    #[serde(default)]
    pub conversation_history: Vec<ChatTurn>,
    #[serde(default)]
    pub tools_enabled: bool,
    #[serde(default, deserialize_with = "whole")]
    pub max_tool_calls: Option<u8>,
    /// Answer as server-sent events (as `Accept: text/event-stream` asks too).
    #[serde(default)]
    pub stream: bool,
}

impl ChatRequest {
    pub const DEFAULT_MAX_TOOL_CALLS: u8 = 5;

    pub fn validate(&self) -> Result<(), ApiError> {
        let chars = self.message.chars().count();
        if self.message.trim().is_empty() {
            return Err(ApiError::validation("Invalid field 'message': must not be empty"));
        }
        if chars > CHAT_MESSAGE_MAX_CHARS {
            return Err(ApiError::validation(format!(
                "Invalid field 'message': {chars} characters, the maximum is {CHAT_MESSAGE_MAX_CHARS}"
            )));
        }
        if let Some(n) = self.max_tool_calls
            && n > 10
        {
            return Err(ApiError::validation(format!(
                "Invalid field 'maxToolCalls': {n} is not between 0 and 10"
            )));
        }
        if self.conversation_history.len() > HISTORY_MAX_TURNS {
            return Err(ApiError::validation(format!(
                "Invalid field 'conversationHistory': {} turns, the maximum is {HISTORY_MAX_TURNS}",
                self.conversation_history.len()
            )));
        }
        let total: usize = self
            .conversation_history
            .iter()
            .map(|t| t.content.chars().count())
            .sum();
        if total > HISTORY_MAX_CHARS {
            return Err(ApiError::validation(format!(
                "Invalid field 'conversationHistory': {total} characters in all, the maximum is {HISTORY_MAX_CHARS}"
            )));
        }
        Ok(())
    }

    pub fn max_tool_calls(&self) -> u8 {
        self.max_tool_calls.unwrap_or(Self::DEFAULT_MAX_TOOL_CALLS)
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteRequest {
    #[serde(default)]
    pub parameters: Option<Map<String, Value>>,
    #[serde(default)]
    pub raw_text: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct InlineButton {
    pub text: String,
    #[serde(default)]
    pub callback_data: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub enum ParseMode {
    Markdown,
    MarkdownV2,
    #[serde(rename = "HTML")]
    Html,
}

impl ParseMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ParseMode::Markdown => "Markdown",
            ParseMode::MarkdownV2 => "MarkdownV2",
            ParseMode::Html => "HTML",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatappSendRequest {
    pub chat_id: Value,
    pub text: String,
    #[serde(default)]
    pub parse_mode: Option<ParseMode>,
    #[serde(default, deserialize_with = "whole")]
    pub reply_to_message_id: Option<i64>,
    #[serde(default)]
    pub inline_keyboard: Option<Vec<Vec<InlineButton>>>,
}

impl ChatappSendRequest {
    /// The chat id as Telegram takes it: positive user, negative group, `-100…` channel.
    pub fn chat_id(&self) -> Result<i64, ApiError> {
        let bad = || ApiError::validation("Invalid field 'chatId': must be a number or a numeric string");
        match &self.chat_id {
            // `5.0` is a whole number too, as JSON Schema's `integer` says.
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().and_then(whole_float)).ok_or_else(bad),
            Value::String(s) => {
                let s = s.trim();
                let digits = s.strip_prefix('-').unwrap_or(s);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                s.parse().map_err(|_| bad())
            }
            _ => Err(bad()),
        }
        .and_then(|id| if id == 0 { Err(bad()) } else { Ok(id) })
    }

    pub fn validate(&self) -> Result<(), ApiError> {
        self.chat_id()?;
        let chars = self.text.chars().count();
        if self.text.is_empty() || chars > CHATAPP_TEXT_MAX_CHARS {
            return Err(ApiError::validation(format!(
                "Invalid field 'text': must be 1 to {CHATAPP_TEXT_MAX_CHARS} characters (got {chars})"
            )));
        }
        if let Some(id) = self.reply_to_message_id
            && id <= 0
        {
            return Err(ApiError::validation(
                "Invalid field 'replyToMessageId': must be a positive message id",
            ));
        }
        for (r, row) in self.inline_keyboard.iter().flatten().enumerate() {
            for (b, button) in row.iter().enumerate() {
                let at = format!("inlineKeyboard[{r}][{b}]");
                if button.text.is_empty() {
                    return Err(ApiError::validation(format!(
                        "Invalid field '{at}.text': must not be empty"
                    )));
                }
                match (&button.callback_data, &button.url) {
                    (Some(data), None) if (1..=64).contains(&data.len()) => {}
                    (Some(_), None) => {
                        return Err(ApiError::validation(format!(
                            "Invalid field '{at}.callback_data': must be 1 to 64 bytes"
                        )));
                    }
                    (None, Some(url))
                        if url.starts_with("https://") || url.starts_with("http://") || url.starts_with("tg://") => {}
                    (None, Some(_)) => {
                        return Err(ApiError::validation(format!(
                            "Invalid field '{at}.url': must be an http(s) or tg:// URL"
                        )));
                    }
                    _ => {
                        return Err(ApiError::validation(format!(
                            "Invalid field '{at}': a button needs exactly one of callback_data or url"
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SocialPostRequest {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub media_urls: Option<Vec<String>>,
    #[serde(default)]
    pub reply_to_tweet_id: Option<String>,
}

impl SocialPostRequest {
    pub fn validate(&self) -> Result<(), ApiError> {
        let has_text = self.text.as_deref().is_some_and(|t| !t.trim().is_empty());
        let has_media = self.media_urls.as_ref().is_some_and(|m| !m.is_empty());
        if !has_text && !has_media {
            return Err(ApiError::validation(
                "Either 'text' or 'mediaUrls' is required (neither was given)",
            ));
        }
        if let Some(urls) = &self.media_urls {
            if urls.len() > 4 {
                return Err(ApiError::validation(format!(
                    "Invalid field 'mediaUrls': {} URLs, at most 4 images or 1 video/GIF",
                    urls.len()
                )));
            }
            for (i, url) in urls.iter().enumerate() {
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    return Err(ApiError::validation(format!(
                        "Invalid field 'mediaUrls[{i}]': must be an http(s) URL"
                    )));
                }
            }
        }
        if let Some(id) = &self.reply_to_tweet_id
            && (id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(ApiError::validation(
                "Invalid field 'replyToTweetId': must be a numeric post id",
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransferRequest {
    #[serde(default)]
    pub recipient_address: Option<Value>,
    #[serde(default)]
    pub amount_usdc: Option<Value>,
    #[serde(default)]
    pub memo: Option<String>,
}

/// A transfer request whose fields have the right types and amounts.
#[derive(Debug)]
pub struct Transfer {
    pub recipient: String,
    pub amount: MicroUsdc,
    pub memo: Option<String>,
}

impl TransferRequest {
    pub fn validate(self) -> Result<Transfer, ApiError> {
        let recipient = match self.recipient_address {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
            Some(Value::String(_)) | None => {
                return Err(ApiError::validation("Invalid field 'recipientAddress': is required"));
            }
            Some(_) => {
                return Err(ApiError::validation(
                    "Invalid field 'recipientAddress': must be a string",
                ));
            }
        };
        let amount = match self.amount_usdc {
            Some(Value::Number(n)) => match n.as_f64() {
                Some(f) => MicroUsdc::from_f64(f)
                    .map_err(|e| ApiError::validation(format!("Invalid field 'amountUsdc': {e}")))?,
                None => return Err(ApiError::validation("Invalid field 'amountUsdc': must be a number")),
            },
            None => return Err(ApiError::validation("Invalid field 'amountUsdc': is required")),
            Some(_) => return Err(ApiError::validation("Invalid field 'amountUsdc': must be a number")),
        };
        if amount == MicroUsdc::ZERO {
            return Err(ApiError::validation("Invalid field 'amountUsdc': must be positive"));
        }
        if let Some(memo) = &self.memo
            && memo.chars().count() > MEMO_MAX_CHARS
        {
            return Err(ApiError::validation(format!(
                "Invalid field 'memo': at most {MEMO_MAX_CHARS} characters"
            )));
        }
        Ok(Transfer {
            recipient,
            amount,
            memo: self.memo,
        })
    }
}

/// A float that is an integer a client could have meant exactly: from 2^53 a float stands
/// for several integers (`9007199254740993.0` reads as ...992), and using one of them would
/// be using a number nobody sent.
fn whole_float(float: f64) -> Option<i64> {
    const INEXACT_FROM: f64 = 9_007_199_254_740_992.0; // 2^53
    (float.fract() == 0.0 && float.abs() < INEXACT_FROM).then_some(float as i64)
}

/// A whole number given as JSON writes it, `2` or `2.0` (JSON Schema's `integer` is both),
/// or null. A fraction, or a number out of `T`'s range, is refused naming the field.
pub fn whole<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<i64>,
{
    use serde::de::Error;
    let Some(number) = <Option<serde_json::Number> as Deserialize>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let whole = number.as_i64().or_else(|| whole_float(number.as_f64()?));
    let out_of_range = || D::Error::custom(format!("{number} is not a whole number in range"));
    let whole = whole.ok_or_else(out_of_range)?;
    T::try_from(whole).map(Some).map_err(|_| out_of_range())
}

/// For a field where `null` means something (remove it): `Some(None)` when sent as `null`,
/// `None` when left out. Used as `#[serde(default, deserialize_with = "requests::present")]`.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    <Option<T> as serde::Deserialize>::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::decode_json;

    #[test]
    fn whole_numbers_may_be_written_with_a_point() {
        let two: ChatRequest = decode_json(br#"{"message":"hi","maxToolCalls":2.0}"#).unwrap();
        assert_eq!(two.max_tool_calls(), 2);
        let absent: ChatRequest = decode_json(br#"{"message":"hi","maxToolCalls":null}"#).unwrap();
        assert_eq!(absent.max_tool_calls(), ChatRequest::DEFAULT_MAX_TOOL_CALLS);
        for refused in [r#"2.5"#, "300", "-1", "1e300", r#""2""#] {
            let body = format!(r#"{{"message":"hi","maxToolCalls":{refused}}}"#);
            let err = decode_json::<ChatRequest>(body.as_bytes()).unwrap_err();
            assert!(err.message.contains("maxToolCalls"), "{refused}: {}", err.message);
        }
        // Past 2^53 a float is not the integer written: refused, never rounded to another.
        let near = r#"{"chatId":9007199254740993.0,"text":"hi","replyToMessageId":9007199254740993.0}"#;
        let err = decode_json::<ChatappSendRequest>(near.as_bytes()).unwrap_err();
        assert!(err.message.contains("replyToMessageId"), "{}", err.message);
        let near = r#"{"chatId":9007199254740993.0,"text":"hi"}"#;
        let send: ChatappSendRequest = decode_json(near.as_bytes()).unwrap();
        assert!(send.chat_id().is_err());
        let exact = r#"{"chatId":-1001234567890.0,"text":"hi"}"#;
        let send: ChatappSendRequest = decode_json(exact.as_bytes()).unwrap();
        assert_eq!(send.chat_id().unwrap(), -1_001_234_567_890);
    }

    #[test]
    fn chat_rules() {
        let ok: ChatRequest = decode_json(br#"{"message":"hi"}"#).unwrap();
        assert!(ok.validate().is_ok());
        assert_eq!(ok.max_tool_calls(), 5);
        let long = format!(r#"{{"message":"{}"}}"#, "é".repeat(10_000));
        assert!(
            decode_json::<ChatRequest>(long.as_bytes()).unwrap().validate().is_ok(),
            "characters, not bytes"
        );
        let too_long = format!(r#"{{"message":"{}"}}"#, "a".repeat(10_001));
        assert!(
            decode_json::<ChatRequest>(too_long.as_bytes())
                .unwrap()
                .validate()
                .is_err()
        );
        let eleven: ChatRequest = decode_json(br#"{"message":"hi","maxToolCalls":11}"#).unwrap();
        assert!(eleven.validate().unwrap_err().message.contains("maxToolCalls"));
        assert!(decode_json::<ChatRequest>(br#"{"message":"hi","maxToolCalls":2.5}"#).is_err());
        assert!(decode_json::<ChatRequest>(br#"{"message":"hi","maxToolCalls":-1}"#).is_err());
        let bad_role =
            decode_json::<ChatRequest>(br#"{"message":"hi","conversationHistory":[{"role":"system","content":"x"}]}"#);
        assert!(bad_role.unwrap_err().message.contains("conversationHistory[0].role"));
    }

    #[test]
    fn chat_ids() {
        let req = |id: &str| -> ChatappSendRequest {
            decode_json(format!(r#"{{"chatId":{id},"text":"hi"}}"#).as_bytes()).unwrap()
        };
        assert_eq!(req("123").chat_id().unwrap(), 123);
        assert_eq!(req(r#""-1001234567890""#).chat_id().unwrap(), -1_001_234_567_890);
        assert!(req(r#""12a""#).chat_id().is_err());
        assert!(req("1.5").chat_id().is_err());
        assert!(req("true").chat_id().is_err());
        assert!(req(r#""""#).chat_id().is_err());
    }

    #[test]
    fn keyboard_buttons_need_exactly_one_action() {
        let req = |buttons: &str| -> ChatappSendRequest {
            decode_json(format!(r#"{{"chatId":1,"text":"hi","inlineKeyboard":[[{buttons}]]}}"#).as_bytes()).unwrap()
        };
        assert!(req(r#"{"text":"a","callback_data":"x"}"#).validate().is_ok());
        assert!(req(r#"{"text":"a","url":"https://example.com"}"#).validate().is_ok());
        assert!(req(r#"{"text":"a"}"#).validate().is_err());
        assert!(
            req(r#"{"text":"a","callback_data":"x","url":"https://e.com"}"#)
                .validate()
                .is_err()
        );
        let long = format!(r#"{{"text":"a","callback_data":"{}"}}"#, "x".repeat(65));
        assert!(req(&long).validate().is_err());
    }

    #[test]
    fn transfer_amounts_are_exact_and_positive() {
        let t = |body: &str| decode_json::<TransferRequest>(body.as_bytes()).unwrap().validate();
        assert_eq!(
            t(r#"{"recipientAddress":"a","amountUsdc":1234.567891}"#)
                .unwrap()
                .amount,
            MicroUsdc(1_234_567_891)
        );
        assert_eq!(
            t(r#"{"recipientAddress":"a","amountUsdc":0.000001}"#).unwrap().amount,
            MicroUsdc(1)
        );
        assert!(t(r#"{"recipientAddress":"a","amountUsdc":0.0000001}"#).is_err());
        assert!(t(r#"{"recipientAddress":"a","amountUsdc":0}"#).is_err());
        assert!(t(r#"{"recipientAddress":"a","amountUsdc":-1}"#).is_err());
        assert!(t(r#"{"recipientAddress":"a","amountUsdc":"1"}"#).is_err());
        assert!(
            t(r#"{"recipientAddress":5,"amountUsdc":1}"#)
                .unwrap_err()
                .message
                .contains("must be a string")
        );
        assert!(
            t(r#"{"amountUsdc":1}"#)
                .unwrap_err()
                .message
                .contains("recipientAddress")
        );
    }
}
