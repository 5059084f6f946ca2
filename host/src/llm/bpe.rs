//! A byte-level BPE tokenizer (the GPT-2 scheme) built from a GGUF file's own vocabulary
//! and merges, so an embedded model needs no separate tokenizer file. Special tokens
//! (`<|im_start|>` and the like) are matched whole before anything else.

use std::collections::HashMap;

pub struct Bpe {
    vocab: HashMap<String, u32>,
    tokens: Vec<String>,
    ranks: HashMap<(String, String), usize>,
    specials: Vec<(String, u32)>,
    byte_to_char: [char; 256],
    char_to_byte: HashMap<char, u8>,
}

/// GPT-2's reversible map from bytes to printable characters.
fn byte_chars() -> [char; 256] {
    let mut printable: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut map = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..256u32 {
        if printable.contains(&b) {
            map[b as usize] = char::from_u32(b).unwrap_or('?');
        } else {
            map[b as usize] = char::from_u32(256 + extra).unwrap_or('?');
            extra += 1;
        }
    }
    printable.clear();
    map
}

impl Bpe {
    /// `tokens` by id; `merges` as `"a b"` pairs in priority order.
    pub fn new(tokens: Vec<String>, merges: &[String]) -> Bpe {
        let vocab = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let ranks = merges
            .iter()
            .enumerate()
            .filter_map(|(rank, m)| m.split_once(' ').map(|(a, b)| ((a.to_string(), b.to_string()), rank)))
            .collect();
        // Tokens written like `<|name|>` are specials: they never come out of merges.
        let mut specials: Vec<(String, u32)> = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| t.starts_with("<|") && t.ends_with("|>") && t.len() > 4)
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        specials.sort_by_key(|(t, _)| std::cmp::Reverse(t.len()));
        let byte_to_char = byte_chars();
        let char_to_byte = byte_to_char.iter().enumerate().map(|(b, c)| (*c, b as u8)).collect();
        Bpe {
            vocab,
            tokens,
            ranks,
            specials,
            byte_to_char,
            char_to_byte,
        }
    }

    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.vocab.get(token).copied()
    }

    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            // The earliest special token, if any.
            let next = self
                .specials
                .iter()
                .filter_map(|(t, id)| rest.find(t.as_str()).map(|at| (at, t.len(), *id)))
                .min_by_key(|(at, _, _)| *at);
            match next {
                Some((at, len, id)) => {
                    self.encode_plain(&rest[..at], &mut ids);
                    ids.push(id);
                    rest = &rest[at + len..];
                }
                None => {
                    self.encode_plain(rest, &mut ids);
                    break;
                }
            }
        }
        ids
    }

    fn encode_plain(&self, text: &str, ids: &mut Vec<u32>) {
        for piece in pre_tokenize(text) {
            let mapped: Vec<String> = piece
                .bytes()
                .map(|b| self.byte_to_char[b as usize].to_string())
                .collect();
            for symbol in self.merge(mapped) {
                match self.vocab.get(&symbol) {
                    Some(id) => ids.push(*id),
                    // Unknown whole symbol: fall back to its characters (bytes), always in vocab.
                    None => ids.extend(symbol.chars().filter_map(|c| self.vocab.get(&c.to_string()).copied())),
                }
            }
        }
    }

    /// Applies merges, lowest rank first, until none applies.
    fn merge(&self, mut symbols: Vec<String>) -> Vec<String> {
        loop {
            let best = symbols
                .windows(2)
                .enumerate()
                .filter_map(|(i, pair)| self.ranks.get(&(pair[0].clone(), pair[1].clone())).map(|r| (*r, i)))
                .min();
            let Some((_, i)) = best else { return symbols };
            let merged = format!("{}{}", symbols[i], symbols[i + 1]);
            symbols.splice(i..i + 2, [merged]);
        }
    }

    pub fn decode(&self, ids: &[u32]) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids)).into_owned()
    }

    /// The bytes the tokens stand for: a token may end inside a character, so a stream
    /// of them is cut into text only where characters end.
    pub fn decode_bytes(&self, ids: &[u32]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for id in ids {
            let Some(token) = self.tokens.get(*id as usize) else {
                continue;
            };
            if self.specials.iter().any(|(t, _)| t == token) {
                continue;
            }
            for c in token.chars() {
                match self.char_to_byte.get(&c) {
                    Some(b) => bytes.push(*b),
                    None => bytes.extend(c.to_string().as_bytes()),
                }
            }
        }
        bytes
    }
}

#[derive(PartialEq, Clone, Copy)]
enum Class {
    Letter,
    Digit,
    Space,
    Other,
}

fn class(c: char) -> Class {
    if c.is_alphabetic() {
        Class::Letter
    } else if c.is_numeric() {
        Class::Digit
    } else if c.is_whitespace() {
        Class::Space
    } else {
        Class::Other
    }
}

/// GPT-2-style pieces: an optional leading space with a run of letters, or of other
/// symbols; digits one by one; runs of whitespace (the last space joins the next word).
pub fn pre_tokenize(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        let c = chars[i];
        match class(c) {
            Class::Space => {
                let mut j = i;
                while j < chars.len() && class(chars[j]) == Class::Space {
                    j += 1;
                }
                // Leave one plain space to lead the next word, GPT-2 style.
                let next_is_word = j < chars.len() && chars[j - 1] == ' ' && j - 1 > i;
                let lead_single = j < chars.len() && j - 1 == i && chars[i] == ' ';
                if lead_single {
                    i += 1; // the space starts the next piece
                    let kind = class(chars[i]);
                    let end = run_end(&chars, i, kind);
                    pieces.push(chars[start..end].iter().collect());
                    i = end;
                    continue;
                }
                let end = if next_is_word { j - 1 } else { j };
                pieces.push(chars[start..end].iter().collect());
                i = end;
            }
            kind => {
                let end = run_end(&chars, i, kind);
                pieces.push(chars[start..end].iter().collect());
                i = end;
            }
        }
    }
    pieces
}

fn run_end(chars: &[char], from: usize, kind: Class) -> usize {
    if kind == Class::Digit {
        return from + 1;
    }
    let mut j = from;
    while j < chars.len() && class(chars[j]) == kind {
        j += 1;
    }
    j.max(from + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_follow_gpt2_rules() {
        assert_eq!(pre_tokenize("Hello world!"), vec!["Hello", " world", "!"]);
        assert_eq!(pre_tokenize("a  b"), vec!["a", " ", " b"]);
        assert_eq!(pre_tokenize("x 12"), vec!["x", " 1", "2"]);
        assert_eq!(pre_tokenize("line\n"), vec!["line", "\n"]);
    }

    fn tiny() -> Bpe {
        // Byte-level symbols for "hi", " hi", the merges, and one special.
        let g = |s: &str| s.replace(' ', "Ġ");
        let tokens: Vec<String> = ["<|im_end|>", "h", "i", "Ġ", "hi", "Ġh", "Ġhi", "!"]
            .iter()
            .map(|t| g(t))
            .collect();
        let merges = vec!["Ġ h".to_string(), "Ġh i".to_string(), "h i".to_string()];
        Bpe::new(tokens, &merges)
    }

    #[test]
    fn encodes_merges_and_specials_and_decodes_back() {
        let bpe = tiny();
        let ids = bpe.encode("hi hi!<|im_end|>");
        assert_eq!(ids, vec![4, 6, 7, 0]);
        assert_eq!(bpe.decode(&ids), "hi hi!");
        assert_eq!(bpe.token_id("<|im_end|>"), Some(0));
    }
}
