//! Randomness from the operating system, for keys and unguessable ids.

/// Fills `buf` from the OS generator. Without one the service cannot make keys safely,
/// so failing here is fatal by design.
pub fn fill(buf: &mut [u8]) {
    getrandom::fill(buf).expect("the operating system's random number generator failed");
}

/// `len` random bytes as lowercase hex.
pub fn hex_token(len: usize) -> String {
    let mut buf = vec![0u8; len];
    fill(&mut buf);
    hex::encode(buf)
}

/// `len` characters from [0-9A-Za-z], uniformly (about 5.95 bits each).
pub fn alphanumeric(len: usize) -> String {
    const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = String::with_capacity(len);
    let mut buf = [0u8; 64];
    while out.len() < len {
        fill(&mut buf);
        // 248 = 4 × 62: rejecting larger bytes keeps every character equally likely.
        for byte in buf.iter().filter(|b| **b < 248) {
            if out.len() == len {
                break;
            }
            out.push(ALPHABET[(*byte % 62) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn alphanumeric_has_the_length_and_alphabet() {
        let token = super::alphanumeric(43);
        assert_eq!(token.len(), 43);
        assert!(token.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(token, super::alphanumeric(43));
    }
}
