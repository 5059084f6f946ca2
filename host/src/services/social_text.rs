//! The rules X applies to a post before it accepts it: the weighted length of the text, and
//! what a media file is (by its bytes, never its name).

/// X's limit, in weighted characters.
pub const MAX_WEIGHTED: usize = 280;
/// Any URL counts as this many characters (X shortens it to t.co).
const URL_WEIGHT: usize = 23;

/// Characters in these ranges weigh 1; all others (CJK, emoji, ...) weigh 2, as in
/// twitter-text's default configuration.
fn weight(c: char) -> usize {
    let cp = c as u32;
    let light = (0x0000..=0x10FF).contains(&cp)
        || (0x2000..=0x200D).contains(&cp)
        || (0x2010..=0x201F).contains(&cp)
        || (0x2032..=0x2037).contains(&cp);
    if light { 1 } else { 2 }
}

/// The weighted length of a post's text.
pub fn weighted_length(text: &str) -> usize {
    let mut total = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let next_url = ["https://", "http://"].iter().filter_map(|p| rest.find(p)).min();
        match next_url {
            Some(at) => {
                total += rest[..at].chars().map(weight).sum::<usize>();
                let url_len = rest[at..].find(char::is_whitespace).unwrap_or(rest.len() - at);
                total += URL_WEIGHT;
                rest = &rest[at + url_len..];
            }
            None => {
                total += rest.chars().map(weight).sum::<usize>();
                break;
            }
        }
    }
    total
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    Png,
    Jpeg,
    Webp,
    Gif,
    Mp4,
}

impl MediaKind {
    /// Recognised by content.
    pub fn sniff(bytes: &[u8]) -> Option<MediaKind> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(MediaKind::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(MediaKind::Jpeg)
        } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            Some(MediaKind::Webp)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(MediaKind::Gif)
        } else if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" {
            Some(MediaKind::Mp4)
        } else {
            None
        }
    }

    pub fn mime(self) -> &'static str {
        match self {
            MediaKind::Png => "image/png",
            MediaKind::Jpeg => "image/jpeg",
            MediaKind::Webp => "image/webp",
            MediaKind::Gif => "image/gif",
            MediaKind::Mp4 => "video/mp4",
        }
    }

    /// X's upload category; images upload in one request, the others in chunks.
    pub fn category(self) -> &'static str {
        match self {
            MediaKind::Gif => "tweet_gif",
            MediaKind::Mp4 => "tweet_video",
            _ => "tweet_image",
        }
    }

    pub fn is_image(self) -> bool {
        matches!(self, MediaKind::Png | MediaKind::Jpeg | MediaKind::Webp)
    }
}

/// Up to 4 images, or exactly one video or GIF.
pub fn check_mix(kinds: &[MediaKind]) -> Result<(), String> {
    let moving = kinds.iter().filter(|k| !k.is_image()).count();
    if moving > 0 && kinds.len() > 1 {
        return Err("a post takes up to 4 images, or exactly 1 video or GIF on its own".into());
    }
    if kinds.len() > 4 {
        return Err("a post takes at most 4 images".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_urls_and_wide_characters_like_x() {
        assert_eq!(weighted_length("hello"), 5);
        assert_eq!(
            weighted_length("see https://example.com/a/very/long/path?q=1 now"),
            4 + 23 + 4
        );
        assert_eq!(weighted_length("日本語"), 6);
        assert_eq!(weighted_length("😀"), 2);
        assert_eq!(weighted_length(&"a".repeat(280)), 280);
        assert_eq!(weighted_length(&"語".repeat(141)), 282);
    }

    #[test]
    fn recognises_media_by_content() {
        assert_eq!(MediaKind::sniff(b"\x89PNG\r\n\x1a\n...."), Some(MediaKind::Png));
        assert_eq!(MediaKind::sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some(MediaKind::Jpeg));
        assert_eq!(MediaKind::sniff(b"RIFF\x10\0\0\0WEBPVP8 "), Some(MediaKind::Webp));
        assert_eq!(MediaKind::sniff(b"GIF89a..."), Some(MediaKind::Gif));
        assert_eq!(MediaKind::sniff(b"\0\0\0\x18ftypmp42"), Some(MediaKind::Mp4));
        assert_eq!(MediaKind::sniff(b"<html>not an image"), None);
    }

    #[test]
    fn four_images_or_one_moving_picture() {
        use MediaKind::*;
        assert!(check_mix(&[Png, Jpeg, Webp, Png]).is_ok());
        assert!(check_mix(&[Png, Png, Png, Png, Png]).is_err());
        assert!(check_mix(&[Mp4]).is_ok());
        assert!(check_mix(&[Gif, Png]).is_err());
        assert!(check_mix(&[Mp4, Mp4]).is_err());
    }
}
